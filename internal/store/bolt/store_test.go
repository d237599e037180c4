package bolt

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"go.etcd.io/bbolt"

	"github.com/stamen-dev/stamen/internal/history"
)

type loaded struct {
	Tasks   []string
	Workers []string
	Types   []string
}

func loadAll(t *testing.T, s *Store) loaded {
	t.Helper()
	var l loaded
	err := s.Load(func(seq uint64, data []byte) error {
		l.Tasks = append(l.Tasks, fmt.Sprintf("%d=%s", seq, data))
		return nil
	}, func(e []byte) error {
		l.Workers = append(l.Workers, string(e))
		return nil
	}, func(name string) { l.Types = append(l.Types, name) })
	if err != nil {
		t.Fatal(err)
	}
	return l
}

func TestWriteReopenLoad(t *testing.T) {
	path := filepath.Join(t.TempDir(), "stamen.db")
	// A file of the earlier event-log format: its buckets go.
	db, err := bbolt.Open(path, 0o600, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := db.Update(func(tx *bbolt.Tx) error {
		_, err := tx.CreateBucket([]byte("events"))
		return err
	}); err != nil {
		t.Fatal(err)
	}
	db.Close()

	s, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	batches := []history.Batch{
		{Tasks: []history.Task{{Seq: 1, Data: []byte("a1")}, {Seq: 2, Data: []byte("b1")}, {Seq: 3, Data: []byte("c1")}}, FirstSeq: 1,
			Workers: map[string][]byte{"w1": []byte("online")}, Types: []string{"t.a"}},
		// c is updated, d and e created, a and b evicted.
		{Tasks: []history.Task{{Seq: 3, Data: []byte("c2")}, {Seq: 4, Data: []byte("d1")}, {Seq: 5, Data: []byte("e1")}}, FirstSeq: 3,
			Workers: map[string][]byte{"w1": []byte("heartbeat"), "w2": []byte("online")}, Types: []string{"t.b", "t.a"}},
	}
	for _, b := range batches {
		if err := s.Write(context.Background(), b); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}

	s, err = Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	want := loaded{
		Tasks:   []string{"3=c2", "4=d1", "5=e1"},
		Workers: []string{"heartbeat", "online"},
		Types:   []string{"t.a", "t.b"},
	}
	if diff := cmp.Diff(want, loadAll(t, s)); diff != "" {
		t.Errorf("load (-want +got):\n%s", diff)
	}
	if n, _ := s.Size(context.Background()); n <= 0 {
		t.Errorf("Size %d", n)
	}
	if err := s.db.View(func(tx *bbolt.Tx) error {
		if tx.Bucket([]byte("events")) != nil {
			return fmt.Errorf("the old event log is still there")
		}
		return nil
	}); err != nil {
		t.Error(err)
	}
}

// TestForgetWorkersAndTypes: forgotten workers and task types leave their
// buckets, and a worker forgotten and seen again in one batch stays.
func TestForgetWorkersAndTypes(t *testing.T) {
	s, err := Open(filepath.Join(t.TempDir(), "stamen.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	batches := []history.Batch{
		{Workers: map[string][]byte{"w1": []byte("w1 online"), "w2": []byte("w2 online"), "w3": []byte("w3 online")},
			Types: []string{"t.a", "t.b", "t.c"}},
		{ForgottenWorkers: []string{"w1", "w2"}, Workers: map[string][]byte{"w2": []byte("w2 back")},
			ForgottenTypes: []string{"t.a", "t.c"}},
	}
	for _, b := range batches {
		if err := s.Write(context.Background(), b); err != nil {
			t.Fatal(err)
		}
	}
	if tasks, workers, types := s.Counts(); tasks != 0 || workers != 2 || types != 1 {
		t.Errorf("Counts() = %d tasks, %d workers, %d types; want 0, 2, 1", tasks, workers, types)
	}
	want := loaded{Workers: []string{"w2 back", "w3 online"}, Types: []string{"t.b"}}
	if diff := cmp.Diff(want, loadAll(t, s)); diff != "" {
		t.Errorf("load (-want +got):\n%s", diff)
	}
}

// TestWriteSkipsKeysOverBoltsLimit: a worker or task name longer than
// bbolt's largest key failed the whole transaction, at every flush. The
// batch is now written without those keys.
func TestWriteSkipsKeysOverBoltsLimit(t *testing.T) {
	s, err := Open(filepath.Join(t.TempDir(), "stamen.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	long := strings.Repeat("x", bbolt.MaxKeySize+1)
	b := history.Batch{
		Tasks:   []history.Task{{Seq: 1, Data: []byte("t1")}},
		Workers: map[string][]byte{"w1": []byte("w1 online"), "celery@" + long: []byte("long online")},
		Types:   []string{"t.a", long},
	}
	if err := s.Write(context.Background(), b); err != nil {
		t.Fatalf("the batch was not written: %v", err)
	}
	want := loaded{Tasks: []string{"1=t1"}, Workers: []string{"w1 online"}, Types: []string{"t.a"}}
	if diff := cmp.Diff(want, loadAll(t, s)); diff != "" {
		t.Errorf("load (-want +got):\n%s", diff)
	}
}
