package pg

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"hash/fnv"
	"log/slog"
	"slices"
	"sync"
	"time"

	"github.com/stamen-dev/stamen/internal/history"
	"github.com/stamen-dev/stamen/internal/taskrec"
)

// The replicas of a fleet share the writing. Every replica receives every
// event, so each would write every task's row; instead each writes the
// records of the tasks it owns, and holds the others'. A task's owner is
// chosen by rendezvous hashing of its id over the live replicas: the
// replicas whose row in stamen_replicas was stamped within the live window
// by the server's clock (each stamps its own at every flush), so no
// coordinator and no clock of a replica's own take part, and a replica
// leaving or joining moves only its own share.
//
// A held record is not trusted to its owner: once the grace period has
// passed (time for the owner to flush and write it), the holder asks
// PostgreSQL whether the row already holds everything the record brings
// (uncoveredSQL, one read for all the records due), and writes the ones it
// does not. So a replica that was SIGKILLed, cut off from PostgreSQL, or
// slow, or that never received the events, loses nothing: its share is
// written by the others from what they held, a grace period later. The
// replicas' views of who is live may differ for a moment (a replica seen
// by one a flush before the other): a task each thinks another owns is
// then written by each holder once its grace period has passed, so none
// is left unwritten. The read costs the database about what the write it replaces
// cost when it changed nothing (a lookup and the merge compared), without
// that write's row lock and WAL, and after the owner's write rather than
// beside it (bench/RESULTS.md).
//
// The held records are bounded by Config.MaxHeld: beyond it the oldest are
// checked and written at once rather than held longer. A newer record of
// a held task replaces the held ones it covers (see hold), and is held
// from its arrival.

// Defaults of the sharing.
const (
	// DefaultFlushInterval is the replicas' flush interval assumed when
	// Config.FlushInterval is not set.
	DefaultFlushInterval = time.Second
	// DefaultMaxHeld bounds the records held for the other replicas.
	DefaultMaxHeld = 100_000
	// forgetReplicas is how long a replica's row stays after its last
	// stamp: the table holds the replicas of the last hour, not every
	// one that ever ran.
	forgetReplicas = time.Hour
)

// sharer holds a replica's view of its fleet and the records it holds for
// the other replicas.
type sharer struct {
	self string
	// on is false where the schema has no stamen_replicas.
	on bool
	// grace is how long a record is held before it is checked; live is
	// how recently a replica must have stamped its row to own tasks.
	grace, live time.Duration
	max         int
	now         func() time.Time

	mu sync.Mutex
	// peers are the other live replicas as of the last stamp.
	peers []string
	held  map[string]*heldRecord
	// queue is the held records in the order they became due; an entry
	// whose record was replaced since (at differs) is skipped.
	queue []heldEntry
}

// heldRecord is what is held of a task: its records, newest last (more
// than one only where a newer one lacks what an older brings: the task
// was evicted from the state and seen again), since at.
type heldRecord struct {
	tasks []taskrec.Task
	at    time.Time
}

type heldEntry struct {
	id string
	at time.Time
}

// replicasVersion is the schema version that adds stamen_replicas; a
// store opened at an older one (a test's) writes every record itself.
const replicasVersion = 9

func newSharer(cfg Config, on bool) *sharer {
	self := cfg.ReplicaID
	if self == "" {
		b := make([]byte, 8)
		_, _ = rand.Read(b)
		self = hex.EncodeToString(b)
	}
	every := cfg.FlushInterval
	if every <= 0 {
		every = DefaultFlushInterval
	}
	maxHeld := cfg.MaxHeld
	if maxHeld <= 0 {
		maxHeld = DefaultMaxHeld
	}
	return &sharer{
		self: self, on: on,
		// The owner writes a record at its next flush, within an interval
		// of this replica's, and its write takes a moment more.
		grace: 2*every + time.Second,
		// A replica counts as live for three of its flushes: a slow write
		// or a busy moment does not hand its share to the others.
		live: 3*every + 2*time.Second,
		max:  maxHeld, now: cfg.Now, held: map[string]*heldRecord{},
	}
}

// stampSQL stamps this replica's row with the server's clock, forgets the
// replicas gone for an hour, and returns the other live ones. The SELECT
// sees the table as the statement began, which is all it needs: this
// replica's own stamp is not read.
const stampSQL = `WITH stamp AS (
	INSERT INTO stamen_replicas (id, seen) VALUES ($1, now())
	ON CONFLICT (id) DO UPDATE SET seen = now()
), forget AS (
	DELETE FROM stamen_replicas WHERE seen < now() - make_interval(secs => $3)
)
SELECT id FROM stamen_replicas WHERE id <> $1 AND seen > now() - make_interval(secs => $2) ORDER BY id`

// stamp stamps this replica as live and reads the others.
func (s *Store) stamp(ctx context.Context) error {
	sh := s.share
	if !sh.on {
		return nil
	}
	var peers []string
	err := s.write(ctx, true, func(ctx context.Context) error {
		rows, err := s.pool.Query(ctx, stampSQL, sh.self, sh.live.Seconds(), forgetReplicas.Seconds())
		if err != nil {
			return err
		}
		defer rows.Close()
		peers = peers[:0]
		for rows.Next() {
			var id string
			if err := rows.Scan(&id); err != nil {
				return err
			}
			peers = append(peers, id)
		}
		return rows.Err()
	})
	if err != nil {
		return unavailable(err)
	}
	sh.mu.Lock()
	sh.peers = peers
	sh.mu.Unlock()
	return nil
}

// split returns the records of tasks this replica owns, and holds the
// others'.
func (sh *sharer) split(tasks []taskrec.Task) []taskrec.Task {
	sh.mu.Lock()
	defer sh.mu.Unlock()
	if len(sh.peers) == 0 {
		return tasks
	}
	selfHash := memberHash(sh.self)
	peerHashes := make([]uint64, len(sh.peers))
	for i, p := range sh.peers {
		peerHashes[i] = memberHash(p)
	}
	now := sh.now()
	own := tasks[:0:0]
	for i := range tasks {
		if owns(tasks[i].UUID, selfHash, peerHashes) {
			own = append(own, tasks[i])
			continue
		}
		sh.hold(tasks[i], now)
	}
	return own
}

// hold keeps t for its owner until the grace period has passed. The
// records of the task t covers go, and t is not kept if one of them
// covers it: a record is the task's whole record as the state knows it,
// so a newer one sets every field an older one set, but after the state
// forgot the task.
func (sh *sharer) hold(t taskrec.Task, at time.Time) {
	if h, ok := sh.held[t.UUID]; ok {
		for i := range h.tasks {
			if covers(&h.tasks[i], &t) {
				return // a held record brings all t does
			}
		}
		kept := h.tasks[:0]
		for _, old := range h.tasks {
			if !covers(&t, &old) {
				kept = append(kept, old)
			}
		}
		h.tasks, h.at = append(kept, t), at
	} else {
		sh.held[t.UUID] = &heldRecord{tasks: []taskrec.Task{t}, at: at}
	}
	sh.queue = append(sh.queue, heldEntry{id: t.UUID, at: at})
}

// due takes out the held records whose grace period has passed, and the
// oldest beyond the bound.
func (sh *sharer) due() []heldRecord {
	sh.mu.Lock()
	defer sh.mu.Unlock()
	cutoff := sh.now().Add(-sh.grace)
	var out []heldRecord
	i := 0
	for ; i < len(sh.queue); i++ {
		e := sh.queue[i]
		h, ok := sh.held[e.id]
		if !ok || !h.at.Equal(e.at) {
			continue // replaced or taken since
		}
		if e.at.After(cutoff) && len(sh.held) <= sh.max {
			break
		}
		out = append(out, *h)
		delete(sh.held, e.id)
	}
	sh.queue = append(sh.queue[:0:0], sh.queue[i:]...)
	return out
}

// giveBack holds again the records due that could not be written, unless
// a newer record of the task is held meanwhile.
func (sh *sharer) giveBack(recs []heldRecord) {
	sh.mu.Lock()
	defer sh.mu.Unlock()
	for _, r := range recs {
		id := r.tasks[0].UUID
		if _, ok := sh.held[id]; ok {
			continue
		}
		sh.held[id] = &heldRecord{tasks: r.tasks, at: r.at}
		sh.queue = append(sh.queue, heldEntry{id: id, at: r.at})
	}
	// Keep the queue in the order the records are due: those given back
	// are the oldest.
	slices.SortStableFunc(sh.queue, func(x, y heldEntry) int { return x.at.Compare(y.at) })
}

// replicas is how many replicas are live as of the last stamp, this one
// included.
func (sh *sharer) replicas() int {
	sh.mu.Lock()
	defer sh.mu.Unlock()
	return len(sh.peers) + 1
}

// heldCount is how many records are held for the other replicas.
func (sh *sharer) heldCount() int {
	sh.mu.Lock()
	defer sh.mu.Unlock()
	return len(sh.held)
}

// uncovered returns the records of recs whose rows lack something they
// bring, in chunks of WriteChunk records, one read each.
func (s *Store) uncovered(ctx context.Context, recs []heldRecord) ([]taskrec.Task, error) {
	var all []*taskrec.Task
	for i := range recs {
		for j := range recs[i].tasks {
			all = append(all, &recs[i].tasks[j])
		}
	}
	var out []taskrec.Task
	for len(all) > 0 {
		part := all[:min(len(all), s.cfg.WriteChunk)]
		all = all[len(part):]
		err := s.read(ctx, func(ctx context.Context) error {
			rows, err := s.pool.Query(ctx, uncoveredSQL, recordArgs(part)...)
			if err != nil {
				return err
			}
			defer rows.Close()
			for rows.Next() {
				var n int64 // the record's place in part, from 1
				if err := rows.Scan(&n); err != nil {
					return handedOut(err)
				}
				out = append(out, *part[n-1])
			}
			return handedOut(rows.Err())
		})
		if err != nil {
			return nil, fmt.Errorf("check the records held for other replicas: %w", err)
		}
	}
	return out, nil
}

// covers reports whether record a holds everything record b brings to a
// row: a is as new (timestamp, then clock) and sets every field b sets.
func covers(a, b *taskrec.Task) bool {
	return a.Set&b.Set == b.Set && (a.Timestamp > b.Timestamp || a.Timestamp == b.Timestamp && a.Clock >= b.Clock)
}

// takeOver returns the held records due that this replica is to write:
// those whose rows lack something they bring. The others are let go.
func (s *Store) takeOver(ctx context.Context) (due []heldRecord, write []taskrec.Task, err error) {
	due = s.share.due()
	if len(due) == 0 {
		return nil, nil, nil
	}
	write, err = s.uncovered(ctx, due)
	if err != nil {
		s.share.giveBack(due)
		return nil, nil, err
	}
	if len(write) > 0 {
		s.log.Debug("writing records held for other replicas that were not written in time",
			slog.Int("records", len(write)), slog.Int("checked", len(due)))
	}
	return due, write, nil
}

// memberHash is a replica's part of the rendezvous hash.
func memberHash(id string) uint64 {
	h := fnv.New64a()
	h.Write([]byte(id))
	return h.Sum64()
}

// owns reports whether the replica of selfHash owns task id among itself
// and the peers: the one whose mix with the id's hash is highest (a tie,
// which needs two equal mixes, makes both owners: the row is written
// twice rather than not at all).
func owns(id string, selfHash uint64, peers []uint64) bool {
	h := fnv.New64a()
	h.Write([]byte(id))
	key := h.Sum64()
	mine := mix(key ^ selfHash)
	for _, p := range peers {
		if mix(key^p) > mine {
			return false
		}
	}
	return true
}

// mix is splitmix64's finalizer: every bit of x moves every bit of the
// result, so that the replicas' shares are even.
func mix(x uint64) uint64 {
	x ^= x >> 30
	x *= 0xbf58476d1ce4e5b9
	x ^= x >> 27
	x *= 0x94d049bb133111eb
	x ^= x >> 31
	return x
}

// Leave is a replica's goodbye, after its last flush: it writes the
// records it holds for the others that their rows still lack, without
// waiting out the grace period (an owner killed a moment before would
// otherwise lose them with this replica), and deletes its row, so that
// the others own its share from their next flush rather than once its
// stamp is stale.
func (s *Store) Leave(ctx context.Context) error {
	sh := s.share
	if !sh.on {
		return nil
	}
	sh.mu.Lock()
	recs := make([]heldRecord, 0, len(sh.held))
	for _, h := range sh.held {
		recs = append(recs, *h)
	}
	sh.held, sh.queue = map[string]*heldRecord{}, nil
	sh.mu.Unlock()
	write, err := s.uncovered(ctx, recs)
	if err == nil {
		err = s.writeTasks(ctx, write, history.Batch{}, nil)
	}
	if err != nil {
		return fmt.Errorf("leave the fleet: %w", err)
	}
	s.written.Add(int64(len(write)))
	s.takenOver.Add(int64(len(write)))
	return s.write(ctx, true, func(ctx context.Context) error {
		_, err := s.pool.Exec(ctx, `DELETE FROM stamen_replicas WHERE id = $1`, sh.self)
		return err
	})
}
