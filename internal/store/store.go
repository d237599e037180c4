// Package store keeps stamen's history on disk so that a restart restores
// it. It stores the Celery events themselves, in arrival order, and replays
// them into a fresh state: the state machine stays the one source of truth
// for merging events, and the store needs no schema of its own.
//
// Heartbeats, which would dominate the log, are kept as one latest event per
// worker. The log is bounded: beyond MaxEvents the oldest events go first.
// Writes are buffered and committed in one transaction per Flush, off the
// ingestion path; bbolt's copy-on-write B+tree never leaves a torn file, so
// a crash loses at most what was not flushed yet.
package store

import (
	"encoding/binary"
	"errors"
	"fmt"
	"sync"
	"time"

	bolt "go.etcd.io/bbolt"
)

var (
	eventsBucket     = []byte("events")
	heartbeatsBucket = []byte("heartbeats")
)

// Store is safe for concurrent use.
type Store struct {
	db        *bolt.DB
	maxEvents int

	mu         sync.Mutex
	pending    [][]byte
	heartbeats map[string][]byte
}

// Open opens or creates the store at path. maxEvents bounds the event log.
func Open(path string, maxEvents int) (*Store, error) {
	db, err := bolt.Open(path, 0o600, &bolt.Options{Timeout: 2 * time.Second, NoFreelistSync: true})
	if err != nil {
		return nil, fmt.Errorf("open the store %s: %w", path, err)
	}
	err = db.Update(func(tx *bolt.Tx) error {
		for _, b := range [][]byte{eventsBucket, heartbeatsBucket} {
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
	return &Store{db: db, maxEvents: maxEvents, heartbeats: map[string][]byte{}}, nil
}

// Append buffers one event (its JSON object) for the next Flush.
func (s *Store) Append(event []byte) {
	s.mu.Lock()
	s.pending = append(s.pending, event)
	s.mu.Unlock()
}

// SetHeartbeat buffers the latest heartbeat of a worker.
func (s *Store) SetHeartbeat(worker string, event []byte) {
	s.mu.Lock()
	s.heartbeats[worker] = event
	s.mu.Unlock()
}

// Flush commits what was buffered, then trims the log to maxEvents.
func (s *Store) Flush() error {
	s.mu.Lock()
	pending, hbs := s.pending, s.heartbeats
	s.pending, s.heartbeats = nil, map[string][]byte{}
	s.mu.Unlock()
	if len(pending) == 0 && len(hbs) == 0 {
		return nil
	}
	return s.db.Update(func(tx *bolt.Tx) error {
		ev := tx.Bucket(eventsBucket)
		// Sequential keys fill pages completely.
		ev.FillPercent = 1
		for _, e := range pending {
			seq, err := ev.NextSequence()
			if err != nil {
				return err
			}
			if err := ev.Put(seqKey(seq), e); err != nil {
				return err
			}
		}
		hb := tx.Bucket(heartbeatsBucket)
		for w, e := range hbs {
			if err := hb.Put([]byte(w), e); err != nil {
				return err
			}
		}
		// Keys are contiguous sequence numbers (only the oldest are ever
		// deleted), so the count is last - first + 1.
		c := ev.Cursor()
		first, _ := c.First()
		if first == nil {
			return nil
		}
		excess := int(ev.Sequence()-binary.BigEndian.Uint64(first)+1) - s.maxEvents
		for k := first; k != nil && excess > 0; k, _ = c.First() {
			if err := c.Delete(); err != nil {
				return err
			}
			excess--
		}
		return nil
	})
}

// Replay calls fn with every stored event, oldest first, then with the
// latest heartbeat of each worker.
func (s *Store) Replay(fn func(event []byte) error) error {
	return s.db.View(func(tx *bolt.Tx) error {
		for _, b := range [][]byte{eventsBucket, heartbeatsBucket} {
			if err := tx.Bucket(b).ForEach(func(_, v []byte) error { return fn(v) }); err != nil {
				return err
			}
		}
		return nil
	})
}

// Len returns the number of events in the log.
func (s *Store) Len() int {
	var n int
	_ = s.db.View(func(tx *bolt.Tx) error {
		b := tx.Bucket(eventsBucket)
		if first, _ := b.Cursor().First(); first != nil {
			n = int(b.Sequence() - binary.BigEndian.Uint64(first) + 1)
		}
		return nil
	})
	return n
}

// Size returns the file's size in bytes.
func (s *Store) Size() int64 {
	var n int64
	_ = s.db.View(func(tx *bolt.Tx) error {
		n = tx.Size()
		return nil
	})
	return n
}

// Close flushes and closes the store.
func (s *Store) Close() error {
	return errors.Join(s.Flush(), s.db.Close())
}

func seqKey(seq uint64) []byte {
	var k [8]byte
	binary.BigEndian.PutUint64(k[:], seq)
	return k[:]
}
