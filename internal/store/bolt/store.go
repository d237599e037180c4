// Package bolt keeps stamen's state on disk so that a restart restores
// it: the task records, keyed by their sequence numbers (the order the
// tasks were created in), the latest event of each worker, and the task
// names seen.
//
// The state hands over its changes in batches (state.Drain), written in
// one bbolt transaction each, off the ingestion path. Sequence keys make
// every write an append or an update near the end of the B+tree, and
// eviction one range delete at its start, so the file holds about what
// the state holds. bbolt's copy-on-write B+tree never leaves a torn file:
// a crash loses at most the batch in flight.
package bolt

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"runtime"
	"time"

	"go.etcd.io/bbolt"

	"github.com/stamen-dev/stamen/internal/history"
)

var (
	tasksBucket   = []byte("tasks")
	workersBucket = []byte("workers")
	typesBucket   = []byte("types")
	// sentBucket maps a task id stamen sent to its message (see PutSent);
	// sentOrderBucket maps a sequence number to that id, oldest first, so
	// that pruning reads the oldest records without scanning.
	sentBucket      = []byte("sent")
	sentOrderBucket = []byte("sent_order")
	// Buckets of the earlier event-log format, dropped on open.
	oldBuckets = [][]byte{[]byte("events"), []byte("heartbeats")}
)

// Store is safe for concurrent use.
type Store struct {
	db   *bbolt.DB
	path string
}

// Open opens or creates the store at path.
func Open(path string) (*Store, error) {
	db, err := open(path)
	if err != nil {
		return nil, err
	}
	err = db.Update(func(tx *bbolt.Tx) error {
		for _, b := range oldBuckets {
			if tx.Bucket(b) != nil {
				if err := tx.DeleteBucket(b); err != nil {
					return err
				}
			}
		}
		for _, b := range [][]byte{tasksBucket, workersBucket, typesBucket, sentBucket, sentOrderBucket} {
			if _, err := tx.CreateBucketIfNotExists(b); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		_ = db.Close()
		return nil, fmt.Errorf("prepare the store %s: %w", path, err)
	}
	return &Store{db: db, path: path}, nil
}

func open(path string) (*bbolt.DB, error) {
	// The freelist is synced: without it bbolt rebuilds it at open by
	// reading every page, which maps the whole file into memory.
	db, err := bbolt.Open(path, 0o600, &bbolt.Options{Timeout: 2 * time.Second})
	if err != nil {
		return nil, fmt.Errorf("open the store %s: %w", path, err)
	}
	return db, nil
}

// Write commits a batch in one transaction. A worker or task name longer
// than bbolt's largest key (32 KiB: a careless or hostile event) is not
// kept as a key: its Put would fail the transaction, and the kept batch
// at every flush after, so that nothing would be written any more. Such a
// worker is not restored at start, and such a name is not listed until
// a task of that name comes again. A bbolt transaction cannot be
// interrupted: ctx is not consulted.
func (s *Store) Write(_ context.Context, b history.Batch) error {
	return s.db.Update(func(tx *bbolt.Tx) error {
		tasks := tx.Bucket(tasksBucket)
		// Keys come in creation order: full pages, as an append-only
		// B+tree fills them.
		tasks.FillPercent = 1
		for i, t := range b.Tasks {
			yieldEvery(i)
			if err := tasks.Put(seqKey(t.Seq), t.Data); err != nil {
				return err
			}
		}
		_, err := deleteFront(tasks, func(k, _ []byte) (bool, error) {
			return binary.BigEndian.Uint64(k) < b.FirstSeq, nil
		})
		if err != nil {
			return err
		}
		workers := tx.Bucket(workersBucket)
		for _, w := range b.ForgottenWorkers {
			if err := workers.Delete([]byte(w)); err != nil {
				return err
			}
		}
		for w, e := range b.Workers {
			if len(w) > bbolt.MaxKeySize {
				continue // see Write's comment
			}
			if err := workers.Put([]byte(w), e); err != nil {
				return err
			}
		}
		types := tx.Bucket(typesBucket)
		for _, name := range b.Types {
			if len(name) > bbolt.MaxKeySize {
				continue // see Write's comment
			}
			if err := types.Put([]byte(name), nil); err != nil {
				return err
			}
		}
		for _, name := range b.ForgottenTypes {
			if err := types.Delete([]byte(name)); err != nil {
				return err
			}
		}
		return nil
	})
}

// Load calls task with every task record in sequence order, then worker
// with each worker's latest event, then typ with each task name. The
// bytes are valid only during the call. Meant to be called once, before
// any Write.
func (s *Store) Load(task func(seq uint64, data []byte) error, worker func(event []byte) error, typ func(name string)) error {
	if err := s.load(task, worker, typ); err != nil {
		return err
	}
	// Reading every record mapped the whole file into the process, and
	// the kernel counts those pages as its resident memory until they are
	// unmapped. Reopening maps the file afresh: writes only ever touch
	// its ends.
	if err := s.db.Close(); err != nil {
		return fmt.Errorf("close the store after loading: %w", err)
	}
	db, err := open(s.path)
	if err != nil {
		return err
	}
	s.db = db
	return nil
}

func (s *Store) load(task func(seq uint64, data []byte) error, worker func(event []byte) error, typ func(name string)) error {
	return s.db.View(func(tx *bbolt.Tx) error {
		err := tx.Bucket(tasksBucket).ForEach(func(k, v []byte) error {
			if len(k) != 8 {
				return errors.New("store: malformed task key")
			}
			return task(binary.BigEndian.Uint64(k), v)
		})
		if err != nil {
			return err
		}
		if err := tx.Bucket(workersBucket).ForEach(func(_, v []byte) error { return worker(v) }); err != nil {
			return err
		}
		return tx.Bucket(typesBucket).ForEach(func(k, _ []byte) error {
			typ(string(k))
			return nil
		})
	})
}

// Counts returns how many tasks, workers and task types the store holds.
func (s *Store) Counts() (tasks, workers, types int) {
	_ = s.db.View(func(tx *bbolt.Tx) error {
		tasks = tx.Bucket(tasksBucket).Stats().KeyN
		workers = tx.Bucket(workersBucket).Stats().KeyN
		types = tx.Bucket(typesBucket).Stats().KeyN
		return nil
	})
	return tasks, workers, types
}

// Size returns the file's size in bytes. It reads the open file's
// header: it never fails and does not wait.
func (s *Store) Size(context.Context) (int64, error) {
	var n int64
	_ = s.db.View(func(tx *bbolt.Tx) error {
		n = tx.Size()
		return nil
	})
	return n, nil
}

// Ping checks that the file can be read: a closed store, or one whose
// file is gone from under it, fails. A local file answers at once: ctx
// is not needed.
func (s *Store) Ping(context.Context) error {
	if _, err := os.Stat(s.path); err != nil {
		return fmt.Errorf("store %s: %w", s.path, err)
	}
	return s.db.View(func(tx *bbolt.Tx) error {
		if tx.Bucket(tasksBucket) == nil {
			return fmt.Errorf("store %s: no tasks bucket", s.path)
		}
		return nil
	})
}

// Close closes the store.
func (s *Store) Close() error {
	return s.db.Close()
}

func seqKey(seq uint64) []byte {
	var k [8]byte
	binary.BigEndian.PutUint64(k[:], seq)
	return k[:]
}

// yieldRecords is how many records a write puts or deletes between two
// yields of its processor.
const yieldRecords = 256

// yieldEvery lets other goroutines run once every yieldRecords records.
// A flush puts and deletes a second's records, tens of thousands at
// 50,000 events a second: about 15 ms of CPU in one goroutine. Go
// preempts a goroutine only after 10 ms, so on a 2-core machine (2 Ps)
// the request handlers queued behind the flush on its P waited that
// long: most of the task list's slowest answers while ingesting came
// during flushes (bench/RESULTS.md, reads under ingestion). A write of 17,000 puts
// and as many deletes yields 133 times.
func yieldEvery(i int) {
	if i%yieldRecords == yieldRecords-1 {
		runtime.Gosched()
	}
}

// deleteFront deletes a bucket's records from its first key on, in key
// order, for as long as del says so, and returns how many went. After each
// delete the cursor seeks past the deleted key, from the root: asking
// First again would walk every leaf this transaction has emptied (bbolt
// rebalances only at commit), which made deleting n records from the front
// cost n² and was half the CPU of a flush evicting tens of thousands of
// tasks a second. Cursor.Next after Delete is not used because
// it skips the record that moved into the deleted one's place.
func deleteFront(b *bbolt.Bucket, del func(k, v []byte) (bool, error)) (int, error) {
	c := b.Cursor()
	n := 0
	var key []byte
	for k, v := c.First(); k != nil; k, v = c.Seek(key) {
		ok, err := del(k, v)
		if err != nil || !ok {
			return n, err
		}
		key = append(key[:0], k...)
		yieldEvery(n)
		if err := c.Delete(); err != nil {
			return n, err
		}
		n++
	}
	return n, nil
}

// Roles are the sent log and the audit log, kept in the file so that they
// survive a restart. The state, restored from the file at start, answers
// the task reads; the queue log is a fleet's, which one process does not
// need.
func (s *Store) Roles(lim history.Limits) history.Roles {
	return history.Roles{Sent: Sent{S: s, Lim: lim.Sent}, Audit: Audit{S: s}}
}

var _ history.Store = (*Store)(nil)
