package state

import (
	"cmp"
	"runtime"
	"slices"
	"strings"
	"time"

	"github.com/stamen-dev/stamen/internal/taskrec"
)

// What the state hands to a store, and takes back at start. Every task
// has a sequence number, the order it was created in; the live tasks hold
// a contiguous range of them, because eviction always takes the oldest.
// A store keyed by sequence therefore stays the state's exact copy with
// puts for the changed tasks and one "delete below" for the evicted.

// Record is one task as a store keeps it.
type Record struct {
	Seq  uint64
	Data []byte
}

// Changes is what changed since the previous Drain.
type Changes struct {
	// Tasks are the records of the tasks created or updated.
	Tasks []Record
	// FirstSeq is the oldest live task's sequence number: every record
	// below it is gone.
	FirstSeq uint64
	// Types are the task types that came, and ForgottenTypes those that
	// went with their last task.
	Types, ForgottenTypes []string
	// ForgottenWorkers are the workers the state no longer keeps (purged,
	// or the oldest beyond MaxWorkers), unless one came back since.
	ForgottenWorkers []string
	// Buf is the buffer the records were encoded in (see DrainInto).
	Buf []byte
}

// seqOf is the sequence number of the task in slot i: the ring gives slot
// i to the tasks whose numbers are i modulo MaxTasks, and the live one is
// the latest of them.
func (s *State) seqOf(i uint32) uint64 {
	last := s.created - 1
	return last - (last-uint64(i))%uint64(s.maxTasks)
}

// drainChunk is how many tasks Drain encodes per read lock: a few hundred
// microseconds.
const drainChunk = 256

// Drain returns the changes since the previous call and forgets them, the
// records in sequence order (the order a B+tree appends fastest). It
// returns no records unless Config.TrackChanges was set.
func (s *State) Drain() Changes { return s.DrainInto(nil) }

// DrainInto is Drain encoding the records into buf, from its start;
// Changes.Buf gives it back, grown as needed. A caller that passes it to
// the next DrainInto once no record of these Changes is referred to any
// more spares each flush allocating a second's records anew, growing a
// buffer by doubling: at 50,000 events a second under reads that was 18% of
// the bytes stamen allocated, and so of its collections.
func (s *State) DrainInto(buf []byte) Changes {
	// Swap the change set under the write lock, then encode under the read
	// lock: readers are not held up by the encoding, and a task changed in
	// between is simply in the next set too.
	s.mu.Lock()
	dirty, types, gone, evicted := s.dirty, s.types, s.goneWorkers, s.evicted
	if dirty != nil {
		s.dirty = make(map[uint32]struct{}, len(dirty))
		s.types = make(map[string]bool)
		s.goneWorkers = nil
		s.evicted = nil
	}
	var forgotten []string
	for _, w := range gone {
		if s.workers[w] == nil {
			forgotten = append(forgotten, w)
		}
	}
	s.mu.Unlock()

	s.mu.RLock()
	c := Changes{FirstSeq: s.created - uint64(s.live), ForgottenWorkers: forgotten}
	for name, kept := range types {
		if kept {
			c.Types = append(c.Types, name)
		} else {
			c.ForgottenTypes = append(c.ForgottenTypes, name)
		}
	}
	c.Tasks = make([]Record, 0, len(dirty)+len(evicted))
	c.Tasks = append(c.Tasks, evicted...)
	buf = buf[:0]
	n := 0
	for i := range dirty {
		if n++; n%drainChunk == 0 {
			// A second's changes at full ingestion are tens of thousands
			// of tasks, tens of milliseconds to encode: held as one read
			// lock they keep ingestion out, and every reader queues behind
			// ingestion's waiting write lock. What changes in a
			// gap is in the next set too; a task evicted in a gap is
			// skipped below, and one created in its slot is encoded as it
			// now is, with its own sequence number, at or above FirstSeq.
			s.mu.RUnlock()
			// The flush runs beside the request handlers on as many Ps
			// as cores: let those queued on this P run before the next
			// chunk (see store's yieldEvery).
			runtime.Gosched()
			s.mu.RLock()
		}
		if !s.slots.At(i).Live() {
			continue // evicted since
		}
		t := s.load(i, taskrec.ViewText)
		start := len(buf)
		buf = taskrec.EncodeRecord(buf, &t)
		c.Tasks = append(c.Tasks, Record{Seq: s.seqOf(i), Data: buf[start:len(buf):len(buf)]})
	}
	s.mu.RUnlock()
	slices.SortFunc(c.Tasks, func(a, b Record) int { return cmp.Compare(a.Seq, b.Seq) })
	c.Buf = buf
	return c
}

// Restore adds a task from a record, as the task numbered seq. Records
// must come in increasing order of seq, before any event is applied.
func (s *State) Restore(seq uint64, data []byte) error {
	t, err := taskrec.DecodeRecord(data)
	if err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, known := s.lookup(t.UUID); known || seq < s.created {
		return taskrec.ErrCorrupt
	}
	s.created = seq
	if t.Has(taskrec.FieldWorker) && s.workers[t.Worker] == nil {
		// Known from its tasks; its own latest event, if any, follows.
		s.addWorker(t.Worker).lastEvent = epoch(s.now())
	}
	i := s.addTask(t.UUID)
	s.save(i, &t, false)
	if parent := parentOf(&t); parent != "" {
		s.children[parent] = append(s.children[parent], i)
	}
	s.clock = max(s.clock, t.Clock)
	return nil
}

// RestoreType takes a task type the store kept, after the tasks were
// restored: the restored tasks already brought back the types still in
// use, so a name none of them has is one to forget, in the store too.
func (s *State) RestoreType(name string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if id, ok := s.sym.Lookup(name); ok && s.sym.Named[id] > 0 {
		return
	}
	if s.types != nil {
		s.typeChanged(strings.Clone(name), false)
	}
}

// Expire evicts the tasks whose latest event is older than before, oldest
// created first, and returns how many went. It stops at the first task
// that is not that old: a long-running task keeps the ones created after
// it until it is old too, which keeps eviction strictly oldest first.
func (s *State) Expire(before time.Time) int {
	cut := epoch(before)
	s.mu.Lock()
	defer s.mu.Unlock()
	n := 0
	for s.live > 0 {
		i := uint32((s.created - uint64(s.live)) % uint64(s.maxTasks))
		if s.slots.At(i).Key >= cut {
			break
		}
		s.evict(i)
		n++
	}
	return n
}
