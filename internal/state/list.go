package state

import (
	"sync"

	"github.com/stamen-dev/stamen/internal/taskrec"
	"github.com/stamen-dev/stamen/internal/tasksearch"
)

// TaskList is the answer to a Query, held as the sequence numbers of its
// tasks, 8 bytes a task, for GET /api/tasks to write in chunks: Flower
// lists every task when no limit is given, and copying a million records
// out at once, about a kilobyte each, takes gigabytes. Each chunk is
// copied out under a short read lock and handed over after it, so that
// ingestion goes on between chunks and while they are formatted; a task
// evicted or purged meanwhile is skipped, one changed meanwhile is
// written as it is then.
type TaskList struct {
	s    *State
	p    *plan // until the first Next selects the tasks
	seqs []uint64
	next int
	v    view

	// The search of an unpaged list, and the offset after it, are applied
	// chunk by chunk rather than under the selection's lock: matching a
	// million records takes a second, which ingestion would wait for.
	search *tasksearch.Search
	sv     view
	skip   int

	// c is the chunk copied out under the lock, from chunks while the
	// list is read.
	c *copiedChunk
}

// copiedChunk is a chunk of a list copied out of the state: the records,
// their strings and their children's ids, reused from chunk to chunk and,
// once the list is closed, by the next list: made per request they would
// be most of a page's garbage.
type copiedChunk struct {
	recs []taskrec.Task
	text textBuf
	kids []string
}

var copiedChunks = sync.Pool{New: func() any { return new(copiedChunk) }}

// List returns the tasks q selects, in the order and with the errors of
// Tasks, to be read with Next. The selection is made by the first Next,
// under the read lock of its chunk: one lock for a page (a limit of up to
// a chunk) rather than two. Under ingestion each read lock may wait
// behind a writer, and that wait, not the work, was the task list's tail
// at a million tasks (bench/RESULTS.md).
func (s *State) List(q Query) (*TaskList, error) {
	p, err := newPlan(q)
	if err != nil {
		return nil, err
	}
	l := &TaskList{s: s}
	if p.limit == NoLimit && p.f.search != nil {
		// With a limit the selection stops after offset+limit matches,
		// which may be far fewer records than the candidates.
		l.search, p.f.search = p.f.search, nil
		l.skip, p.offset = p.offset, 0
	}
	l.p = p
	return l, nil
}

// selectLocked makes the selection, once; the caller holds the read lock.
func (l *TaskList) selectLocked() {
	if l.p != nil {
		l.seqs = l.s.plan(l.p)
		l.p = nil
	}
}

// Len is the number of tasks the list selected (some may be gone since),
// or, with a search, of candidates for it.
func (l *TaskList) Len() int {
	if l.p != nil {
		l.s.mu.RLock()
		l.selectLocked()
		l.s.mu.RUnlock()
	}
	return len(l.seqs)
}

// Next calls fn with each of the next n tasks of the list that are still
// in the state, in order. It reports whether tasks remain. The records
// are copied out under the state's read lock and fn is called after it:
// formatting a page took four fifths of the time a reader held the lock,
// and the single writer waited for every reader inside (bench/RESULTS.md,
// readers and the writer). A record is copied whole under one lock, so
// fn never sees it half-updated. The task and its strings are the list's:
// valid only during the call, and not to be kept.
//
// At most ReadersAtOnce lists copy and format a chunk at a time; the others
// wait for their turn, not for the writer: closed-loop readers would
// otherwise take every core, and the ingest loop, one goroutine among
// them, would get its share of the cores, not what it needs.
func (l *TaskList) Next(n int, fn func(t *taskrec.Task)) bool {
	if l.c == nil {
		l.c = copiedChunks.Get().(*copiedChunk)
	}
	l.s.turns <- struct{}{}
	defer func() { <-l.s.turns }()
	more := l.copyChunk(n)
	for i := range l.c.recs {
		fn(&l.c.recs[i])
	}
	return more
}

// Close hands the list's buffers on to the next list; the list is not to
// be read after it. A list that is not closed leaves them to the
// collector.
func (l *TaskList) Close() {
	c := l.c
	l.c = nil
	// A chunk that a huge record or page grew is left to the collector.
	if c != nil && len(c.text.blocks) <= 4 && cap(c.recs) <= 1024 {
		clear(c.recs) // its strings would keep blocks of text alive
		copiedChunks.Put(c)
	}
}

// copyChunk copies the next n tasks still in the state into the chunk, under
// the read lock, and reports whether tasks remain.
func (l *TaskList) copyChunk(n int) bool {
	s, c := l.s, l.c
	c.recs = c.recs[:0]
	c.kids = c.kids[:0]
	c.text.reset()
	s.mu.RLock()
	defer s.mu.RUnlock()
	l.selectLocked()
	end := min(l.next+n, len(l.seqs))
	for ; l.next < end; l.next++ {
		i, ok := s.liveSlot(l.seqs[l.next])
		if !ok {
			continue
		}
		if l.search != nil {
			if !l.search.Match(s.view(&l.sv, i, false)) {
				continue
			}
		}
		if l.skip > 0 {
			l.skip--
			continue
		}
		c.recs = append(c.recs, taskrec.Task{})
		c.copyTask(&c.recs[len(c.recs)-1], s.view(&l.v, i, true))
	}
	return l.next < len(l.seqs)
}

// copyTask copies the view v into t, its strings into the list's buffer:
// the view's point into the arena and the view's own buffer, which the
// writer and the next record reuse. The name, state and worker are the
// symbol table's own strings, which nothing changes, and need no copy.
func (c *copiedChunk) copyTask(t, v *taskrec.Task) {
	b := &c.text
	*t = *v
	for _, f := range [...]*string{&t.UUID, &t.Args, &t.Kwargs, &t.ETA, &t.Expires, &t.Result, &t.Exception, &t.Traceback, &t.Exchange, &t.RoutingKey, &t.Client,
		&t.RootID, &t.ParentID} {
		*f = b.str(*f)
	}
	start := len(c.kids)
	for _, k := range v.Children {
		c.kids = append(c.kids, b.str(k))
	}
	// Full slices: a later record's children must not append over them.
	t.Children = c.kids[start:len(c.kids):len(c.kids)]
}

// textBuf holds copies of strings in blocks that never move: a block that
// is full is followed by a new one, not grown, so that the strings made
// so far stay valid. reset reuses the blocks once those strings are no
// longer needed.
type textBuf struct {
	blocks [][]byte
	cur    int
}

const textBlock = 32 << 10

func (b *textBuf) reset() {
	for i := range b.blocks[:min(b.cur+1, len(b.blocks))] {
		b.blocks[i] = b.blocks[i][:0]
	}
	b.cur = 0
}

func (b *textBuf) str(v string) string {
	if v == "" {
		return ""
	}
	for b.cur < len(b.blocks) && cap(b.blocks[b.cur])-len(b.blocks[b.cur]) < len(v) {
		b.cur++
	}
	if b.cur == len(b.blocks) {
		b.blocks = append(b.blocks, make([]byte, 0, max(textBlock, len(v))))
	}
	blk := &b.blocks[b.cur]
	start := len(*blk)
	*blk = append(*blk, v...)
	return taskrec.ViewText((*blk)[start:])
}

// slotOf is the slot of the task numbered seq (see seqOf).
func (s *State) slotOf(seq uint64) uint32 { return uint32(seq % uint64(s.maxTasks)) }

// liveSlot is the slot of the task numbered seq, if it is still in the
// state: the slot is live and holds that task, not a later one.
func (s *State) liveSlot(seq uint64) (uint32, bool) {
	if seq >= s.created {
		return 0, false
	}
	i := s.slotOf(seq)
	if int(i) >= len(s.slots.Pages)<<taskrec.PageBits || !s.slots.At(i).Live() || s.seqOf(i) != seq {
		return 0, false
	}
	return i, true
}

// view is a record read without copying, for writing or matching under
// the lock: its strings point into the arena, the symbols and the view's
// own buffer, and are valid until the next read. Reading a million
// records this way allocates nothing, where a copy per record would leave
// hundreds of megabytes of garbage for the collector to catch up with.
type view struct {
	t    taskrec.Task
	ids  []byte // the formatted ids the strings of t point into
	kids []string
}

// view reads slot i into v, with its children when children is set.
func (s *State) view(v *view, i uint32, children bool) *taskrec.Task {
	sl := s.slots.At(i)
	var kids []uint32
	if children {
		// The lookup needs the id as text; m[string(b)] does not copy b.
		if sl.HasTextID() {
			kids = s.children[s.textIDs[i]]
		} else {
			var b [36]byte
			kids = s.children[string(taskrec.AppendUUID(b[:0], *s.slots.ID(i)))]
		}
	}
	// Room for the task's, the root's, the parent's and the children's
	// ids: the buffer must not grow while strings point into it.
	if need := 36 * (3 + len(kids)); cap(v.ids) < need {
		v.ids = make([]byte, 0, max(need, 2*cap(v.ids)))
	}
	v.ids = v.ids[:0]
	var uuid string
	if sl.HasTextID() {
		uuid = s.textIDs[i]
	} else {
		uuid = taskrec.FormatID(*s.slots.ID(i), &v.ids)
	}
	s.loadInto(&v.t, i, uuid, taskrec.ViewText, &v.ids)
	if children {
		v.kids = v.kids[:0]
		for _, k := range kids {
			if ks := s.slots.At(k); ks.HasTextID() {
				v.kids = append(v.kids, s.textIDs[k])
			} else {
				v.kids = append(v.kids, taskrec.FormatID(*s.slots.ID(k), &v.ids))
			}
		}
		v.t.Children = v.kids
	}
	return &v.t
}
