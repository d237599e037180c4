// Package audittest checks an audit.Store against what every one must do,
// for the tests of each implementation.
package audittest

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stamen-dev/stamen/internal/audit"
)

// CheckStore appends ten records to s, which must be empty, and checks
// List's filters, order and paging, then Prune's two bounds.
func CheckStore(t *testing.T, s audit.Store) {
	t.Helper()
	t0 := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	ctx := context.Background()
	for i := range 10 {
		user := "alice"
		if i%2 == 1 {
			user = "bob"
		}
		op := "revokeTask"
		if i%3 == 0 {
			op = "purgeQueue"
		}
		if err := s.Append(ctx, audit.Record{Time: t0.Add(time.Duration(i) * time.Minute), User: user, Operation: op, Status: 200 + i}); err != nil {
			t.Fatal(err)
		}
	}
	statuses := func(q audit.Query) string {
		t.Helper()
		recs, err := s.List(ctx, q)
		if err != nil {
			t.Fatal(err)
		}
		var out []string
		for _, r := range recs {
			out = append(out, fmt.Sprint(r.Status))
		}
		return strings.Join(out, ",")
	}
	for _, tc := range []struct {
		name string
		q    audit.Query
		want string
	}{
		{"all, newest first", audit.Query{}, "209,208,207,206,205,204,203,202,201,200"},
		{"limit offset", audit.Query{Limit: 3, Offset: 2}, "207,206,205"},
		{"user", audit.Query{User: "bob"}, "209,207,205,203,201"},
		{"operation", audit.Query{Operation: "purgeQueue"}, "209,206,203,200"},
		{"user and operation", audit.Query{User: "bob", Operation: "purgeQueue"}, "209,203"},
		{"window", audit.Query{Since: t0.Add(2 * time.Minute), Until: t0.Add(5 * time.Minute)}, "204,203,202"},
		{"until only", audit.Query{Until: t0.Add(2 * time.Minute)}, "201,200"},
		{"until past the end", audit.Query{Until: t0.Add(time.Hour), Limit: 1}, "209"},
		{"since past the end", audit.Query{Since: t0.Add(time.Hour)}, ""},
	} {
		if got := statuses(tc.q); got != tc.want {
			t.Errorf("%s: %s, want %s", tc.name, got, tc.want)
		}
	}
	n, err := s.Prune(ctx, t0.Add(3*time.Minute), 5)
	if err != nil || n != 5 {
		t.Errorf("Prune = %d, %v; want 5 (3 too old, then 2 beyond the cap)", n, err)
	}
	if got := statuses(audit.Query{}); got != "209,208,207,206,205" {
		t.Errorf("after prune: %s", got)
	}
}
