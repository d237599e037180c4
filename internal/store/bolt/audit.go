package bolt

import (
	"context"
	"encoding/binary"
	"time"

	"go.etcd.io/bbolt"
)

// auditBucket holds the audit log: keys are the record's time (Unix
// nanoseconds) then a sequence number, both big-endian, so a cursor walks
// the records in time order and pruning by age is a delete from the start.
var auditBucket = []byte("audit")

func auditKey(t time.Time, seq uint64) []byte {
	var k [16]byte
	binary.BigEndian.PutUint64(k[:8], uint64(t.UnixNano()))
	binary.BigEndian.PutUint64(k[8:], seq)
	return k[:]
}

func auditTime(k []byte) time.Time {
	return time.Unix(0, int64(binary.BigEndian.Uint64(k[:8])))
}

func auditBucketOf(tx *bbolt.Tx) (*bbolt.Bucket, error) {
	if b := tx.Bucket(auditBucket); b != nil {
		return b, nil
	}
	return tx.CreateBucket(auditBucket)
}

// AppendAudit stores one audit record, data, at time t.
func (s *Store) AppendAudit(ctx context.Context, t time.Time, data []byte) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	return s.db.Update(func(tx *bbolt.Tx) error {
		b, err := auditBucketOf(tx)
		if err != nil {
			return err
		}
		seq, err := b.NextSequence()
		if err != nil {
			return err
		}
		return b.Put(auditKey(t, seq), data)
	})
}

// ScanAudit calls fn with the audit records before until (all when zero),
// newest first, until fn returns false or ctx ends. data is valid only
// during the call.
func (s *Store) ScanAudit(ctx context.Context, until time.Time, fn func(t time.Time, data []byte) bool) error {
	return s.db.View(func(tx *bbolt.Tx) error {
		b := tx.Bucket(auditBucket)
		if b == nil {
			return nil
		}
		c := b.Cursor()
		var k, v []byte
		if until.IsZero() {
			k, v = c.Last()
		} else {
			k, v = c.Seek(auditKey(until, 0))
			if k == nil {
				k, v = c.Last()
			} else {
				k, v = c.Prev()
			}
		}
		for n := 0; k != nil; k, v = c.Prev() {
			if n++; n%1024 == 0 && ctx.Err() != nil {
				return ctx.Err()
			}
			if len(k) != 16 {
				continue
			}
			if !until.IsZero() && !auditTime(k).Before(until) {
				continue
			}
			if !fn(auditTime(k), v) {
				return nil
			}
		}
		return ctx.Err()
	})
}

// PruneAudit deletes the audit records older than before, then the oldest
// beyond maxRecords (when > 0), and returns how many it deleted.
func (s *Store) PruneAudit(ctx context.Context, before time.Time, maxRecords int) (int, error) {
	if err := ctx.Err(); err != nil {
		return 0, err
	}
	deleted := 0
	err := s.db.Update(func(tx *bbolt.Tx) error {
		b := tx.Bucket(auditBucket)
		if b == nil {
			return nil
		}
		excess := 0
		if maxRecords > 0 {
			excess = b.Stats().KeyN - maxRecords
		}
		var err error
		deleted, err = deleteFront(b, func(k, _ []byte) (bool, error) {
			old := !before.IsZero() && len(k) == 16 && auditTime(k).Before(before)
			if !old && excess <= 0 {
				return false, nil
			}
			excess-- // an old record deleted also counts against the cap
			return true, nil
		})
		return err
	})
	return deleted, err
}
