package bolt

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"time"

	"go.etcd.io/bbolt"

	"github.com/stamen-dev/stamen/internal/history"
)

// A record's value is its time (Unix nanoseconds) and its order sequence
// number, 8 bytes each, then the caller's data.
const sentHeader = 16

// PutSent keeps data as what stamen sent under task id at time at, and
// drops the oldest records beyond the limits, in one transaction. A record
// for an id already kept replaces it.
func (s *Store) PutSent(id string, at time.Time, data []byte, lim history.SentLimits) error {
	if id == "" {
		return errors.New("put sent task: empty id")
	}
	err := s.db.Update(func(tx *bbolt.Tx) error {
		sent, order := tx.Bucket(sentBucket), tx.Bucket(sentOrderBucket)
		seq, err := order.NextSequence()
		if err != nil {
			return err
		}
		val := make([]byte, sentHeader+len(data))
		binary.BigEndian.PutUint64(val, uint64(at.UnixNano()))
		binary.BigEndian.PutUint64(val[8:], seq)
		copy(val[sentHeader:], data)
		if err := sent.Put([]byte(id), val); err != nil {
			return err
		}
		if err := order.Put(seqKey(seq), []byte(id)); err != nil {
			return err
		}
		return pruneSent(sent, order, seq, at, lim)
	})
	if err != nil {
		return fmt.Errorf("put sent task %s: %w", id, err)
	}
	return nil
}

// pruneSent deletes records from the oldest until at most lim.Max order
// entries remain and the oldest record is younger than lim.MaxAge. Entries
// are only ever deleted from the front, so their count is last-first+1
// (bucket statistics would walk every page). An entry whose id was put
// again since points to a newer record: only the entry goes.
func pruneSent(sent, order *bbolt.Bucket, last uint64, now time.Time, lim history.SentLimits) error {
	_, err := deleteFront(order, func(k, id []byte) (bool, error) {
		seq := binary.BigEndian.Uint64(k)
		val := sent.Get(id)
		current := len(val) >= sentHeader && binary.BigEndian.Uint64(val[8:]) == seq
		tooMany := lim.Max > 0 && last-seq+1 > uint64(lim.Max)
		tooOld := lim.MaxAge > 0 && current && now.Sub(time.Unix(0, int64(binary.BigEndian.Uint64(val)))) > lim.MaxAge
		if current && !tooMany && !tooOld {
			return false, nil
		}
		if current {
			if err := sent.Delete(id); err != nil {
				return false, err
			}
		}
		return true, nil
	})
	return err
}

// Sent returns the data PutSent kept for task id, and whether there is any.
func (s *Store) Sent(id string) ([]byte, bool, error) {
	var out []byte
	err := s.db.View(func(tx *bbolt.Tx) error {
		if v := tx.Bucket(sentBucket).Get([]byte(id)); len(v) >= sentHeader {
			out = append([]byte(nil), v[sentHeader:]...)
		}
		return nil
	})
	if err != nil {
		return nil, false, fmt.Errorf("read sent task %s: %w", id, err)
	}
	return out, out != nil, nil
}

// SentCount is how many sent tasks are kept.
func (s *Store) SentCount() int {
	n := 0
	_ = s.db.View(func(tx *bbolt.Tx) error {
		n = tx.Bucket(sentBucket).Stats().KeyN
		return nil
	})
	return n
}

// Sent is the sent-task log (history.SentLog) in the bbolt file, bounded
// by Lim.
type Sent struct {
	S   *Store
	Lim history.SentLimits
}

// PutSent keeps data under task id, sent at time at. A bbolt
// transaction cannot be interrupted: ctx is not consulted.
func (l Sent) PutSent(_ context.Context, id string, at time.Time, data []byte) error {
	return l.S.PutSent(id, at, data, l.Lim)
}

// Sent returns what PutSent kept for id.
func (l Sent) Sent(_ context.Context, id string) ([]byte, bool, error) { return l.S.Sent(id) }

var _ history.SentLog = Sent{}
