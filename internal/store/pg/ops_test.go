package pg_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stamen-dev/stamen/internal/audit"
	"github.com/stamen-dev/stamen/internal/history"
	"github.com/stamen-dev/stamen/internal/store/pg"
)

// TestAuditInPostgres: the fleet's audit log keeps records newest first,
// filters by operation, user and time, and prunes by age and by count.
func TestAuditInPostgres(t *testing.T) {
	s := openStore(t, newDB(t))
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	a := pg.Audit{S: s}
	base := time.Date(2026, 11, 23, 12, 0, 0, 0, time.UTC)
	n := int64(3)
	for i, r := range []audit.Record{
		{User: "alice", Operation: "revokeTask", Status: 200},
		{User: "bob", Operation: "revokeTasks", Status: 200, Count: &n},
		{User: "alice", Operation: "purgeQueue", Status: 404},
		{User: "bob", Operation: "revokeTask", Status: 200},
	} {
		r.Time, r.Role, r.Params = base.Add(time.Duration(i)*time.Minute), "operator", map[string]any{"taskid": fmt.Sprint(i)}
		if err := a.Append(ctx, r); err != nil {
			t.Fatal(err)
		}
	}
	for _, tc := range []struct {
		name string
		q    audit.Query
		want []string // user/operation, newest first
	}{
		{"all", audit.Query{}, []string{"bob/revokeTask", "alice/purgeQueue", "bob/revokeTasks", "alice/revokeTask"}},
		{"user", audit.Query{User: "alice"}, []string{"alice/purgeQueue", "alice/revokeTask"}},
		{"operation", audit.Query{Operation: "revokeTask"}, []string{"bob/revokeTask", "alice/revokeTask"}},
		{"window", audit.Query{Since: base.Add(time.Minute), Until: base.Add(3 * time.Minute)}, []string{"alice/purgeQueue", "bob/revokeTasks"}},
		{"page", audit.Query{Limit: 1, Offset: 1}, []string{"alice/purgeQueue"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			recs, err := a.List(ctx, tc.q)
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, r := range recs {
				got = append(got, r.User+"/"+r.Operation)
			}
			if fmt.Sprint(got) != fmt.Sprint(tc.want) {
				t.Errorf("got %v, want %v", got, tc.want)
			}
		})
	}
	recs, _ := a.List(ctx, audit.Query{Operation: "revokeTasks"})
	if len(recs) != 1 || recs[0].Count == nil || *recs[0].Count != 3 || recs[0].Params["taskid"] != "1" {
		t.Errorf("record read back: %+v", recs)
	}
	if n, err := a.Prune(ctx, base.Add(time.Minute), 2); err != nil || n != 2 {
		t.Fatalf("prune: %d, %v; want 2 gone", n, err)
	}
	recs, _ = a.List(ctx, audit.Query{})
	if len(recs) != 2 || recs[0].User != "bob" || recs[1].Operation != "purgeQueue" {
		t.Errorf("after pruning: %+v", recs)
	}
}

// TestSentInPostgres: what stamen sent is read back by id, replaced when
// sent again, and trimmed to the limits, the oldest first.
func TestSentInPostgres(t *testing.T) {
	s := openStore(t, newDB(t))
	l := pg.Sent{S: s, Lim: history.SentLimits{Max: 3, MaxAge: time.Hour}}
	base := time.Now()
	for i := range 5 {
		if err := l.PutSent(context.Background(), fmt.Sprintf("id-%d", i), base.Add(time.Duration(i)*time.Second), []byte(fmt.Sprint("data-", i))); err != nil {
			t.Fatal(err)
		}
	}
	if err := l.PutSent(context.Background(), "id-4", base.Add(10*time.Second), []byte("again")); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		id   string
		want string // "" when trimmed
	}{{"id-0", ""}, {"id-1", ""}, {"id-2", "data-2"}, {"id-3", "data-3"}, {"id-4", "again"}} {
		data, ok, err := l.Sent(context.Background(), tc.id)
		if err != nil || ok != (tc.want != "") || string(data) != tc.want {
			t.Errorf("%s: %q, %v, %v; want %q", tc.id, data, ok, err, tc.want)
		}
	}
	if err := l.PutSent(context.Background(), "late", base.Add(2*time.Hour), []byte("x")); err != nil {
		t.Fatal(err)
	}
	if _, ok, _ := l.Sent(context.Background(), "id-4"); ok {
		t.Error("a record older than MaxAge was kept")
	}
}

// TestQueuesInPostgres: the queues the fleet published to are listed newest
// first, once each, and trimmed to Max names and to those noted within
// MaxAge.
func TestQueuesInPostgres(t *testing.T) {
	s := openStore(t, newDB(t))
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	q := pg.Queues{S: s, Max: 3, MaxAge: time.Hour}
	base := time.Now().Add(-30 * time.Minute)
	put := func(name string, at time.Time) {
		t.Helper()
		if err := q.PutQueue(context.Background(), name, at); err != nil {
			t.Fatal(err)
		}
	}
	for i, name := range []string{"q0", "q1", "q2", "q3"} {
		put(name, base.Add(time.Duration(i)*time.Second))
	}
	put("q1", base.Add(10*time.Second)) // noted again: newest
	put("q2", base)                     // an older note does not move it back
	for _, tc := range []struct {
		name string
		q    pg.Queues
		want string
	}{
		{"trimmed to Max", q, "[q1 q3 q2]"},
		{"no bounds", pg.Queues{S: s}, "[q1 q3 q2]"},
	} {
		got, err := tc.q.Queues(ctx)
		if err != nil || fmt.Sprint(got) != tc.want {
			t.Errorf("%s: %v, %v; want %s", tc.name, got, err, tc.want)
		}
	}
	// Noted two hours later: the others are past MaxAge, and go.
	put("late", base.Add(2*time.Hour))
	if got, err := (pg.Queues{S: s}).Queues(ctx); err != nil || fmt.Sprint(got) != "[late]" {
		t.Errorf("after a note past MaxAge: %v, %v; want [late]", got, err)
	}
}
