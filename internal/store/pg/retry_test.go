package pg_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stamen-dev/stamen/internal/audit"
	"github.com/stamen-dev/stamen/internal/history"
	"github.com/stamen-dev/stamen/internal/state"
	"github.com/stamen-dev/stamen/internal/store/pg"
	"github.com/stamen-dev/stamen/internal/testcluster"
)

// TestReadsSurviveTerminatedSessions: after PostgreSQL ends the store's
// sessions (its restart, a failover: pg_terminate_backend), the next read
// of every kind answers what it answered before, on a new connection,
// rather than 503 once per replica. Each read runs just before the
// sessions end, so that the pool hands the same connection out again
// without pinging it (pgxpool pings only those idle over a second), as on
// a busy replica.
func TestReadsSurviveTerminatedSessions(t *testing.T) {
	db := testcluster.PostgresDB(t)
	s := openStore(t, testcluster.PostgresURL(testcluster.PostgresAddr, db))
	st := state.New(state.Config{MaxTasks: 1000, TrackChanges: true})
	dataset(t, st, 60)
	drainTo(t, st, s)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	if err := s.Write(context.Background(), history.Batch{Workers: map[string][]byte{"w0@h": heartbeat(t, "w0@h", 1000)}}); err != nil {
		t.Fatal(err)
	}
	at := time.Date(2026, 11, 27, 6, 0, 0, 0, time.UTC)
	if err := (pg.Audit{S: s}).Append(ctx, audit.Record{Time: at, User: "alice", Operation: "revokeTask", Status: 200}); err != nil {
		t.Fatal(err)
	}
	if err := (pg.Sent{S: s}).PutSent(context.Background(), "sent-1", at, []byte(`{"task": "proj.add"}`)); err != nil {
		t.Fatal(err)
	}
	if err := (pg.Queues{S: s}).PutQueue(context.Background(), "q1", at); err != nil {
		t.Fatal(err)
	}
	list := func(q state.Query) func() (any, error) {
		return func() (any, error) {
			ids, _, err := listPG(t, s, q)
			return ids, err
		}
	}
	for _, tc := range []struct {
		name string
		read func() (any, error)
	}{
		{"list", list(state.Query{Limit: 10})},
		{"list kwargs pair", list(state.Query{Limit: 10, Search: "kwargs:k=3"})},
		{"task", func() (any, error) {
			tk, ok, err := s.Task(ctx, "00000002-0000-4000-8000-000000000002")
			return fmt.Sprint(tk.UUID, tk.State, ok), err
		}},
		{"task types", func() (any, error) { return s.TaskTypes(ctx) }},
		{"workers", func() (any, error) {
			ws, err := s.Workers(ctx)
			var names []string
			for _, w := range ws {
				names = append(names, w.Hostname)
			}
			return names, err
		}},
		{"worker events", func() (any, error) {
			n := 0
			err := s.WorkerEvents(ctx, func([]byte) { n++ })
			return n, err
		}},
		{"match tasks", func() (any, error) {
			ids, more, err := s.MatchTasks(ctx, state.Query{State: "FAILURE"}, 100)
			return fmt.Sprint(ids, more), err
		}},
		{"failures", func() (any, error) {
			gs, err := s.Failures(ctx, state.Query{State: "FAILURE"})
			return fmt.Sprintf("%+v", gs), err
		}},
		{"counts", func() (any, error) {
			tasks, workers, types, err := s.Counts(ctx)
			return fmt.Sprint(tasks, workers, types), err
		}},
		{"audit", func() (any, error) {
			recs, err := pg.Audit{S: s}.List(ctx, audit.Query{})
			return len(recs), err
		}},
		{"sent", func() (any, error) {
			data, ok, err := pg.Sent{S: s}.Sent(context.Background(), "sent-1")
			return fmt.Sprint(string(data), ok), err
		}},
		{"queues", func() (any, error) { return pg.Queues{S: s}.Queues(ctx) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			want, err := tc.read()
			if err != nil {
				t.Fatal(err)
			}
			if fmt.Sprint(want) == fmt.Sprint(zero(want)) {
				t.Fatalf("read %v before the sessions ended: the test needs something to read", want)
			}
			testcluster.TerminatePostgresBackends(t, db)
			got, err := tc.read()
			if err != nil {
				t.Fatalf("first read after PostgreSQL ended the sessions: %v", err)
			}
			if fmt.Sprint(got) != fmt.Sprint(want) {
				t.Errorf("read %v after the sessions ended, %v before", got, want)
			}
		})
	}
}

// zero is the zero value of v's kind, for the check that a read found
// something.
func zero(v any) any {
	switch v.(type) {
	case int:
		return 0
	case []string:
		return []string(nil)
	}
	return ""
}

// TestWritesSurviveTerminatedSessions: the fleet's records written as an
// operation is answered (its audit record, the task it sent for a later
// retry, the queue it published to) are written, once, at the first try
// after PostgreSQL ended the store's sessions, rather than lost: the write
// runs again on a new connection. Each write follows a read, as on a busy
// replica, so that the pool hands that connection out unpinged.
func TestWritesSurviveTerminatedSessions(t *testing.T) {
	db := testcluster.PostgresDB(t)
	s := openStore(t, testcluster.PostgresURL(testcluster.PostgresAddr, db))
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	at := time.Date(2026, 11, 27, 6, 0, 0, 0, time.UTC)
	for _, tc := range []struct {
		name  string
		write func() error
		// read says what the history holds of the write.
		read func() (string, error)
		want string
	}{
		{"audit", func() error {
			return pg.Audit{S: s}.Append(ctx, audit.Record{Time: at, User: "alice", Operation: "revokeTask", Status: 200})
		}, func() (string, error) {
			recs, err := pg.Audit{S: s}.List(ctx, audit.Query{})
			var got []string
			for _, r := range recs {
				got = append(got, r.User+"/"+r.Operation)
			}
			return fmt.Sprint(got), err
		}, "[alice/revokeTask]"},
		{"sent", func() error {
			return pg.Sent{S: s}.PutSent(context.Background(), "sent-1", at, []byte(`{"task": "proj.add"}`))
		}, func() (string, error) {
			data, ok, err := pg.Sent{S: s}.Sent(context.Background(), "sent-1")
			return fmt.Sprint(string(data), " ", ok), err
		}, `{"task": "proj.add"} true`},
		{"queues", func() error {
			return pg.Queues{S: s}.PutQueue(context.Background(), "q1", at)
		}, func() (string, error) {
			names, err := pg.Queues{S: s}.Queues(ctx)
			return fmt.Sprint(names), err
		}, "[q1]"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := tc.read(); err != nil {
				t.Fatal(err)
			}
			testcluster.TerminatePostgresBackends(t, db)
			if err := tc.write(); err != nil {
				t.Fatalf("first write after PostgreSQL ended the sessions: %v", err)
			}
			got, err := tc.read()
			if err != nil || got != tc.want {
				t.Errorf("the history holds %s (%v), want %s", got, err, tc.want)
			}
		})
	}
}
