package bolt

import (
	"bytes"
	"context"
	"fmt"
	"path/filepath"
	"testing"

	"github.com/stamen-dev/stamen/internal/history"
)

// record is a task record of about the size the state writes.
func record(seq uint64) []byte {
	return fmt.Appendf(bytes.Repeat([]byte{'x'}, 150), "%d", seq)
}

// batchOf puts tasks [from, to) and evicts those before first.
func batchOf(from, to, first uint64) history.Batch {
	b := history.Batch{FirstSeq: first}
	for seq := from; seq < to; seq++ {
		b.Tasks = append(b.Tasks, history.Task{Seq: seq, Data: record(seq)})
	}
	return b
}

// One write that evicts tens of thousands of records, many leaves' worth,
// from the front keeps exactly the rest: deleting from the front must not
// skip a record, whatever moves into a deleted one's place.
func TestWriteEvictsManyLeavesFromTheFront(t *testing.T) {
	for _, tc := range []struct {
		name               string
		stored, put, first uint64
	}{
		{"some", 1000, 0, 400},
		{"many leaves", 60_000, 20_000, 45_001},
		{"all but new", 30_000, 5_000, 30_000},
		{"everything", 10_000, 0, 1 << 40},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s, err := Open(filepath.Join(t.TempDir(), "stamen.db"))
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close()
			for from := uint64(0); from < tc.stored; from += 10_000 {
				if err := s.Write(context.Background(), batchOf(from, min(from+10_000, tc.stored), 0)); err != nil {
					t.Fatal(err)
				}
			}
			if err := s.Write(context.Background(), batchOf(tc.stored, tc.stored+tc.put, tc.first)); err != nil {
				t.Fatal(err)
			}
			var got []uint64
			err = s.Load(func(seq uint64, data []byte) error {
				if !bytes.Equal(data, record(seq)) {
					return fmt.Errorf("record %d holds %q", seq, data)
				}
				got = append(got, seq)
				return nil
			}, func([]byte) error { return nil }, func(string) {})
			if err != nil {
				t.Fatal(err)
			}
			from := min(tc.first, tc.stored+tc.put)
			if want := int(tc.stored + tc.put - from); len(got) != want {
				t.Fatalf("%d records left, want %d", len(got), want)
			}
			for i, seq := range got {
				if seq != from+uint64(i) {
					t.Fatalf("record %d is %d, want %d", i, seq, from+uint64(i))
				}
			}
		})
	}
}

// BenchmarkWriteEvicting is one second of the store's flush at a million
// tasks and ingestion at about 17,000 tasks a second (50,000 events): as
// many records put as evicted from the front, in one transaction.
func BenchmarkWriteEvicting(b *testing.B) {
	const stored, perSecond = 200_000, 17_000
	s, err := Open(filepath.Join(b.TempDir(), "stamen.db"))
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	for from := uint64(0); from < stored; from += 20_000 {
		if err := s.Write(context.Background(), batchOf(from, from+20_000, 0)); err != nil {
			b.Fatal(err)
		}
	}
	next := uint64(stored)
	b.ResetTimer()
	for b.Loop() {
		b.StopTimer()
		batch := batchOf(next, next+perSecond, next+perSecond-stored)
		b.StartTimer()
		if err := s.Write(context.Background(), batch); err != nil {
			b.Fatal(err)
		}
		next += perSecond
	}
}
