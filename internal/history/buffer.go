package history

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"sync/atomic"

	"github.com/stamen-dev/stamen/internal/state"
)

// Source is the state whose changes a Buffer writes (*state.State).
type Source interface {
	// DrainInto hands over the changes since the last call, encoded into
	// buf's storage when it is large enough.
	DrainInto(buf []byte) state.Changes
	KnowsWorker(hostname string) bool
	WorkerNames() []string
	TaskTypes() []string
}

// BufferConfig configures a Buffer.
type BufferConfig struct {
	Source Source
	// Write writes one batch to the store.
	Write func(context.Context, Batch) error
	// Shared is set for a history that outlives the hot set (PostgreSQL):
	// a kept batch keeps the records of tasks evicted since (mergeKeep),
	// is bounded to MaxTasks records, the oldest dropped and counted
	// (Lost), and names no forgotten task types, as such a store deletes
	// none.
	Shared   bool
	MaxTasks int
	Logger   *slog.Logger
}

// Buffer writes the state's changes to a store behind ingestion (write
// behind): each Flush drains what changed since the last one and writes
// it as one batch. When the write fails the batch is kept and merged into
// the next flush's, so that a failed write loses nothing.
//
// Its bounds, however long the store stays unwritable: the kept batch
// holds at most one record per live task (the state's MaxTasks: newer
// records of a task replace older ones, and with a store of the state
// alone the records of tasks evicted since go; with a Shared one, beyond
// MaxTasks the oldest go, counted by Lost), one event per worker the state
// keeps, the new task types, and the names to delete only as far as the
// store may hold them (keepForgotten): what the next batch would hold
// anyway.
type Buffer struct {
	cfg BufferConfig
	// mu serializes the flushes.
	mu sync.Mutex
	// unsaved is the last batch whose write failed, merged into the next
	// flush.
	unsaved *Batch
	// stored, while writes fail, holds the names of the workers and task
	// types the store may hold rows of (see keepForgotten); nil once a
	// write succeeds.
	stored *storedNames
	// drainBuf is the buffer the last flush encoded its records in, once
	// they are written: the next flush encodes into it (State.DrainInto).
	drainBuf []byte
	// workerEvents holds each worker's latest event until the next flush.
	workerMu     sync.Mutex
	workerEvents map[string][]byte
	// lost counts the task records dropped from the kept batch (Shared
	// only); failed counts the flushes whose write failed.
	lost, failed atomic.Int64
}

// NewBuffer returns an empty Buffer.
func NewBuffer(cfg BufferConfig) *Buffer {
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	return &Buffer{cfg: cfg, workerEvents: map[string][]byte{}}
}

// NoteWorker keeps raw as the latest event of worker hostname, written
// with the next flush. raw must not change afterwards.
func (b *Buffer) NoteWorker(hostname string, raw []byte) {
	b.workerMu.Lock()
	b.workerEvents[hostname] = raw
	b.workerMu.Unlock()
}

// Lost is how many task records were dropped unwritten from the kept
// batch (Shared only).
func (b *Buffer) Lost() int64 { return b.lost.Load() }

// FailedFlushes is how many flushes failed to write.
func (b *Buffer) FailedFlushes() int64 { return b.failed.Load() }

// Pending returns a copy of the header of the batch kept after a failed
// write (its slices shared), and whether there is one.
func (b *Buffer) Pending() (Batch, bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.unsaved == nil {
		return Batch{}, false
	}
	return *b.unsaved, true
}

// Flush writes the state's changes since the last flush, with the batch
// kept after a failed write. When the write fails the batch is kept for
// the next flush.
func (b *Buffer) Flush(ctx context.Context) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	src := b.cfg.Source
	c := src.DrainInto(b.drainBuf)
	b.drainBuf = nil
	b.workerMu.Lock()
	workers := b.workerEvents
	b.workerEvents = map[string][]byte{}
	b.workerMu.Unlock()
	for w := range workers {
		// Only the workers the state keeps: not one forgotten since its
		// event was noted, nor one it never kept (a worker-offline is all
		// it sent), which no later Drain would name for deletion.
		if !src.KnowsWorker(w) {
			delete(workers, w)
		}
	}
	batch := Batch{
		FirstSeq: c.FirstSeq, Workers: workers, ForgottenWorkers: c.ForgottenWorkers,
		Types: c.Types, ForgottenTypes: c.ForgottenTypes, Tasks: make([]Task, len(c.Tasks)),
	}
	for i, t := range c.Tasks {
		batch.Tasks[i] = Task{Seq: t.Seq, Data: t.Data}
	}
	if b.stored != nil && b.stored.open {
		// The names forgotten between the drain of the first failed
		// flush and keepForgotten's look at the state: the store may
		// hold them too.
		b.stored.add(c.ForgottenWorkers, c.ForgottenTypes)
		b.stored.open = false
	}
	if b.unsaved != nil {
		if b.cfg.Shared {
			batch = mergeKeep(*b.unsaved, batch)
		} else {
			batch = mergeBatches(*b.unsaved, batch)
		}
		b.unsaved = nil
	}
	if err := b.cfg.Write(ctx, batch); err != nil {
		b.failed.Add(1)
		if b.cfg.Shared {
			var lost int
			batch, lost = trimOldest(batch, b.cfg.MaxTasks)
			if lost > 0 {
				b.lost.Add(int64(lost))
				b.cfg.Logger.Error("PostgreSQL unreachable longer than the write buffer lasts: task records dropped",
					slog.Int("records", lost), slog.Int("buffer", b.cfg.MaxTasks))
			}
		}
		batch = b.keepForgotten(batch)
		b.unsaved = &batch
		return fmt.Errorf("%w (%d task records kept for the next flush)", err, len(batch.Tasks))
	}
	b.stored = nil
	// Written: nothing refers to the records any more. A buffer grown by a
	// burst is let go rather than kept for good.
	if cap(c.Buf) <= maxDrainBuf {
		b.drainBuf = c.Buf
	}
	return nil
}

// storedNames are the names of the workers and task types the store may
// hold rows of while its writes fail.
type storedNames struct {
	workers, types map[string]bool
	// open: the next flush's forgotten names are added too.
	open bool
}

func (s *storedNames) add(workers, types []string) {
	for _, w := range workers {
		s.workers[w] = true
	}
	if s.types != nil {
		for _, t := range types {
			s.types[t] = true
		}
	}
}

// keepForgotten bounds the forgotten names of a batch kept after a failed
// write. They are unioned at every merge, and while the store cannot be
// written, every worker hostname or task name forgotten (autoscaled pods,
// a publisher inventing task names: names from outside) would join them,
// for as long as the outage lasts. But a forgotten name needs deleting
// only if the store holds it, and the store holds only names written by
// the writes before the outage: a name that came and went during it was
// never written (mergeBatches drops the record of a worker forgotten
// since, and a type that came and went cancels out). Those are the names
// the state knew when the last write succeeded, which are the ones it
// knows at the first failure plus those it forgot since: the first failed
// batch's forgotten names and, for the moment between its drain and the
// look at the state here, the next batch's (Flush adds them). So from the
// first failure on, the kept lists hold only those names: at most the
// state's bound of workers (MaxWorkers) and its task types (at most one a
// task), plus what two flushes forgot, however long the outage. Nothing
// the store must delete is dropped: once a write succeeds it holds
// exactly what the state keeps. (A PostgreSQL write that failed after
// its commit is the exception: a worker it wrote that was new and is
// then forgotten in the same outage keeps its row; it comes back, as an
// offline worker, to the next replica that starts and reads it, and goes
// again when that replica forgets it. With PostgreSQL, the rows of
// workers other replicas wrote are theirs to delete: they heard those
// workers, and forget them too.)
//
// A Shared store (PostgreSQL) deletes no task type (its Write ignores
// ForgottenTypes): the kept batch holds no forgotten types at all.
func (b *Buffer) keepForgotten(batch Batch) Batch {
	if b.stored == nil {
		b.stored = &storedNames{workers: map[string]bool{}, open: true}
		for _, w := range b.cfg.Source.WorkerNames() {
			b.stored.workers[w] = true
		}
		if !b.cfg.Shared {
			b.stored.types = map[string]bool{}
			for _, t := range b.cfg.Source.TaskTypes() {
				b.stored.types[t] = true
			}
		}
		b.stored.add(batch.ForgottenWorkers, batch.ForgottenTypes)
	}
	batch.ForgottenWorkers = slices.DeleteFunc(batch.ForgottenWorkers, func(w string) bool { return !b.stored.workers[w] })
	if b.cfg.Shared {
		batch.ForgottenTypes = nil
	} else {
		batch.ForgottenTypes = slices.DeleteFunc(batch.ForgottenTypes, func(t string) bool { return !b.stored.types[t] })
	}
	return batch
}

// maxDrainBuf is the largest flush buffer kept for the next flush: a
// second's changes at 50,000 events a second take a few megabytes.
const maxDrainBuf = 16 << 20

// mergeBatches is older then newer as one batch: newer's records win,
// and older's records of tasks evicted since (below newer.FirstSeq) go.
func mergeBatches(older, newer Batch) Batch {
	out := Batch{FirstSeq: newer.FirstSeq, Workers: newer.Workers}
	if out.Workers == nil {
		out.Workers = map[string][]byte{}
	}
	// A store deletes the forgotten workers before it puts the kept ones,
	// and puts the kept task names before it deletes the forgotten ones:
	// what newer forgot must leave older's kept, and what newer keeps
	// must leave older's forgotten names.
	forgot := func(names []string) map[string]bool {
		m := make(map[string]bool, len(names))
		for _, n := range names {
			m[n] = true
		}
		return m
	}
	gone := forgot(newer.ForgottenWorkers)
	for w, e := range older.Workers {
		if _, ok := out.Workers[w]; !ok && !gone[w] {
			out.Workers[w] = e
		}
	}
	out.ForgottenWorkers = union(older.ForgottenWorkers, newer.ForgottenWorkers, nil)
	out.Types = union(newer.Types, older.Types, forgot(newer.ForgottenTypes))
	out.ForgottenTypes = union(older.ForgottenTypes, newer.ForgottenTypes, forgot(newer.Types))
	out.Tasks = make([]Task, 0, len(older.Tasks)+len(newer.Tasks))
	i, j := 0, 0
	for i < len(older.Tasks) || j < len(newer.Tasks) {
		switch {
		case j == len(newer.Tasks) || (i < len(older.Tasks) && older.Tasks[i].Seq < newer.Tasks[j].Seq):
			if older.Tasks[i].Seq >= newer.FirstSeq {
				out.Tasks = append(out.Tasks, older.Tasks[i])
			}
			i++
		case i == len(older.Tasks) || newer.Tasks[j].Seq < older.Tasks[i].Seq:
			out.Tasks = append(out.Tasks, newer.Tasks[j])
			j++
		default: // the same task: the newer record
			out.Tasks = append(out.Tasks, newer.Tasks[j])
			i++
			j++
		}
	}
	return out
}

// union is a then b without repeats, leaving out the names in except.
func union(a, b []string, except map[string]bool) []string {
	seen := make(map[string]bool, len(a)+len(b))
	var out []string
	for _, l := range [][]string{a, b} {
		for _, n := range l {
			if !seen[n] && !except[n] {
				seen[n] = true
				out = append(out, n)
			}
		}
	}
	return out
}

// mergeKeep is older then newer as one batch for a Shared store: newer's
// records win, and, unlike mergeBatches, records of tasks evicted from the
// hot set since are kept: the history outlives the hot set.
func mergeKeep(older, newer Batch) Batch {
	// mergeBatches drops older's records below newer.FirstSeq: with it
	// zeroed, it drops none.
	n := newer
	n.FirstSeq = 0
	b := mergeBatches(older, n)
	b.FirstSeq = newer.FirstSeq
	return b
}

// trimOldest bounds a batch kept for the next flush to max task records
// (one per hot-set task), dropping the oldest, and returns how many went.
func trimOldest(b Batch, max int) (Batch, int) {
	if max <= 0 || len(b.Tasks) <= max {
		return b, 0
	}
	lost := len(b.Tasks) - max
	b.Tasks = slices.Clone(b.Tasks[lost:]) // in sequence order: the oldest go
	return b, lost
}
