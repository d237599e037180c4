package bolt_test

import (
	"context"
	"fmt"
	"net/url"
	"path/filepath"
	"testing"
	"time"

	"github.com/stamen-dev/stamen/internal/audit"
	"github.com/stamen-dev/stamen/internal/store/bolt"
)

func benchRecord(i int) audit.Record {
	params, _ := audit.Params(map[string]string{"taskid": fmt.Sprint(i)}, url.Values{"terminate": {"true"}},
		func(n string) bool { return n == "terminate" }, nil)
	return audit.Record{
		Time: time.Unix(1_700_000_000, 0).Add(time.Duration(i) * time.Millisecond), User: "alice", Role: "operator",
		Remote: "10.0.0.1:5000", Operation: "revokeTask", Method: "POST", Path: fmt.Sprintf("/api/task/revoke/%d", i),
		Params: params, Status: 200,
	}
}

func openBolt(b *testing.B) bolt.Audit {
	b.Helper()
	db, err := bolt.Open(filepath.Join(b.TempDir(), "audit.db"))
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = db.Close() })
	return bolt.Audit{S: db}
}

// BenchmarkBoltAppend is the cost the audit log adds to a write call with
// --persistent: one bbolt transaction (with its fsync) per record.
func BenchmarkBoltAppend(b *testing.B) {
	s := openBolt(b)
	ctx := context.Background()
	i := 0
	for b.Loop() {
		if err := s.Append(ctx, benchRecord(i)); err != nil {
			b.Fatal(err)
		}
		i++
	}
}

// BenchmarkBoltList reads a page of 100 records filtered by user out of
// 10,000 (the default cap), half of them that user's.
func BenchmarkBoltList(b *testing.B) {
	s := openBolt(b)
	ctx := context.Background()
	for i := range 10000 {
		r := benchRecord(i)
		if i%2 == 1 {
			r.User = "bob"
		}
		if err := s.Append(ctx, r); err != nil {
			b.Fatal(err)
		}
	}
	for b.Loop() {
		recs, err := s.List(ctx, audit.Query{User: "bob", Limit: 100, Offset: 1000})
		if err != nil || len(recs) != 100 {
			b.Fatalf("%d records, %v", len(recs), err)
		}
	}
}
