package bolt

import (
	"encoding/binary"
	"time"

	"go.etcd.io/bbolt"
)

// statsBucket keeps the task activity aggregate (internal/taskstats): one
// record per minute, keyed by the minute's number (Unix minutes, 8 bytes
// big-endian, so that keys sort by time), and under sinceKey when the
// aggregate began counting. The store keeps the aggregate itself rather
// than rebuilding it from the task records at start: the records are
// bounded by --max_tasks and keep one time per state, so a rebuild would
// lose every task evicted since and every event but a task's latest of
// each kind, where the aggregate's own records are a few kilobytes a
// minute.
var statsBucket = []byte("task_stats")

var sinceKey = []byte("since")

func minuteKey(m int64) []byte { return binary.BigEndian.AppendUint64(nil, uint64(m)) }

// WriteStats puts the minutes' records, deletes the minutes del names,
// and notes since as the start of counting unless one is noted, in one
// transaction.
func (s *Store) WriteStats(put map[int64][]byte, del []int64, since time.Time) error {
	return s.db.Update(func(tx *bbolt.Tx) error {
		b, err := tx.CreateBucketIfNotExists(statsBucket)
		if err != nil {
			return err
		}
		if b.Get(sinceKey) == nil {
			if err := b.Put(sinceKey, binary.BigEndian.AppendUint64(nil, uint64(since.Unix()))); err != nil {
				return err
			}
		}
		for _, m := range del {
			if err := b.Delete(minuteKey(m)); err != nil {
				return err
			}
		}
		for m, rec := range put {
			if err := b.Put(minuteKey(m), rec); err != nil {
				return err
			}
		}
		return nil
	})
}

// LoadStats calls fn with each minute's record, oldest first, and returns
// when counting began (ok false when nothing is stored). rec is valid only
// during the call.
func (s *Store) LoadStats(fn func(m int64, rec []byte) error) (since time.Time, ok bool, err error) {
	err = s.db.View(func(tx *bbolt.Tx) error {
		b := tx.Bucket(statsBucket)
		if b == nil {
			return nil
		}
		if v := b.Get(sinceKey); len(v) == 8 {
			since, ok = time.Unix(int64(binary.BigEndian.Uint64(v)), 0), true
		}
		return b.ForEach(func(k, v []byte) error {
			if len(k) != 8 {
				return nil
			}
			return fn(int64(binary.BigEndian.Uint64(k)), v)
		})
	})
	return since, ok, err
}
