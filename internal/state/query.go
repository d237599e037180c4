package state

import (
	"cmp"
	"container/heap"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/stamen-dev/stamen/internal/pyfmt"
	"github.com/stamen-dev/stamen/internal/taskrec"
	"github.com/stamen-dev/stamen/internal/tasksearch"
)

// NoLimit as Query.Limit returns every match.
const NoLimit = -1

// Query selects tasks as GET /api/tasks does (Flower's ListTasks handler:
// its filters, sort and paging).
type Query struct {
	// Limit caps the result; NoLimit for all. Flower answers {} for a
	// limit of 0 or below, so 0 and negatives other than NoLimit return
	// nothing.
	Limit int
	// Offset skips that many of the ordered matches; negative is 0.
	Offset int
	// Worker, TaskName and State filter by exact, case-insensitive match
	// ("" or "All": no filter). Tasks without a worker never match Worker.
	Worker   string
	TaskName string
	State    string
	// SortBy is name, state, received or started, ascending, or the same
	// prefixed with "-" for descending. Tasks lacking the value come first
	// ascending (last descending); ties go by task id. "" lists newest
	// first: by timestamp descending, ties by id descending.
	SortBy string
	// Search is a query in the search language of package tasksearch.
	Search string
	// ReceivedStart and ReceivedEnd drop tasks received before or after
	// them; tasks never received are kept.
	ReceivedStart *time.Time
	ReceivedEnd   *time.Time
	// IDs, when not nil, keeps only the tasks with one of these ids
	// (exact match), in addition to the other filters; an empty non-nil
	// list selects nothing. The selection is read from the ids, not from
	// the indexes, so its cost is that of len(IDs) lookups: the caller
	// bounds the list.
	IDs []string
}

// filter is a compiled Query, minus ordering and paging.
type filter struct {
	worker, name, state string // folded; "" for no filter
	start, end          float64
	hasStart, hasEnd    bool
	search              *tasksearch.Search
	// ids is Query.IDs as a set; nil for no id filter.
	ids map[string]struct{}
	// v is the record the search and the started sort read, reused from
	// task to task: a record per task would escape to the heap, 400 bytes
	// and its ids allocated and copied each.
	v view

	// The symbols of worker, name and state, resolved under the lock.
	workerSym, nameSym, stateSym uint32
}

func compile(q Query) (*filter, error) {
	search, err := tasksearch.Compile(q.Search)
	if err != nil {
		return nil, err
	}
	f := &filter{search: search}
	if q.IDs != nil {
		f.ids = make(map[string]struct{}, len(q.IDs))
		for _, id := range q.IDs {
			f.ids[id] = struct{}{}
		}
	}
	f.worker, f.name, f.state = foldFilter(q.Worker), foldFilter(q.TaskName), foldFilter(q.State)
	if q.ReceivedStart != nil {
		f.start, f.hasStart = epoch(*q.ReceivedStart), true
	}
	if q.ReceivedEnd != nil {
		f.end, f.hasEnd = epoch(*q.ReceivedEnd), true
	}
	return f, nil
}

func foldFilter(v string) string {
	if v == "All" {
		return ""
	}
	return pyfmt.Fold(v)
}

// resolve looks up the filters' symbols; false when one names something no
// task has, so that nothing can match.
func (f *filter) resolve(y *taskrec.Symbols) bool {
	for _, x := range [3]struct {
		v   string
		sym *uint32
	}{{f.worker, &f.workerSym}, {f.name, &f.nameSym}, {f.state, &f.stateSym}} {
		if x.v == "" {
			continue
		}
		id, ok := y.Lookup(x.v)
		if !ok {
			return false
		}
		*x.sym = id
	}
	return true
}

// sources returns the indexes whose union holds every match: the smallest
// index of a filtered field, or every state's index.
func (s *State) sources(f *filter) []*taskrec.Index {
	var best *taskrec.Index
	for _, x := range [3]struct {
		v   string
		m   map[uint32]*taskrec.Index
		sym uint32
	}{{f.state, s.byState, f.stateSym}, {f.name, s.byName, f.nameSym}, {f.worker, s.byWorker, f.workerSym}} {
		if x.v == "" {
			continue
		}
		idx := x.m[x.sym]
		if idx == nil {
			return nil
		}
		if best == nil || idx.Len() < best.Len() {
			best = idx
		}
	}
	if best != nil {
		return []*taskrec.Index{best}
	}
	all := make([]*taskrec.Index, 0, len(s.byState))
	for _, x := range s.byState {
		all = append(all, x)
	}
	return all
}

// match applies the filters, then the search, to slot i. Flower indexes
// only non-empty names, workers and states, so an empty one never matches.
func (s *State) match(f *filter, i uint32) bool {
	sl := s.slots.At(i)
	if f.ids != nil {
		if _, ok := f.ids[s.taskID(i)]; !ok {
			return false
		}
	}
	if f.worker != "" && s.workerKey(sl) != f.workerSym {
		return false
	}
	if f.name != "" && s.nameKey(sl) != f.nameSym {
		return false
	}
	if f.state != "" && s.stateKey(sl) != f.stateSym {
		return false
	}
	if sl.Set&taskrec.FieldReceived != 0 && (f.hasStart || f.hasEnd) {
		if r := s.receivedOf(sl); f.hasStart && r < f.start || f.hasEnd && r > f.end {
			return false
		}
	}
	if f.search == nil {
		return true
	}
	// A view is enough: the record is only read under the lock.
	return f.search.Match(s.view(&f.v, i, false))
}

// newestFirst walks the union of indexes from the newest item, calling
// fn until it returns false.
func (s *State) newestFirst(xs []*taskrec.Index, fn func(slot uint32) bool) {
	cs := make([]taskrec.Cursor, len(xs))
	for i, x := range xs {
		cs[i] = x.Newest()
	}
	for {
		best, bestIt := -1, taskrec.Item{}
		for i := range cs {
			it, ok := cs[i].Peek()
			if ok && (best < 0 || s.less(bestIt, it)) {
				best, bestIt = i, it
			}
		}
		if best < 0 || !fn(bestIt.Slot) {
			return
		}
		cs[best].Next()
	}
}

// sortSpec is a parsed SortBy.
type sortSpec struct {
	field string // "" for the default order
	desc  bool
}

func parseSort(s string) (sortSpec, error) {
	spec := sortSpec{field: strings.TrimPrefix(s, "-"), desc: strings.HasPrefix(s, "-")}
	switch spec.field {
	case "name", "state", "received", "started":
		return spec, nil
	case "":
		if !spec.desc {
			return spec, nil
		}
	}
	return sortSpec{}, fmt.Errorf("invalid sort_by %q: want name, state, received or started, optionally prefixed with -", s)
}

// sortKey is Flower's (has value, value, id) sort key, in 16 bytes: a
// sorted page's heap holds one per task it keeps.
type sortKey struct {
	num  float64 // the value of a time field
	slot uint32
	// val is 0 for a task without the value; otherwise 1 for a time
	// field, or 1 + the casefolded symbol of the name or state, which
	// compare as their strings (read under the lock).
	val uint32
}

func (s *State) keyOf(i uint32, field string, v *view) sortKey {
	sl := s.slots.At(i)
	k := sortKey{slot: i}
	switch field {
	case "name":
		if sl.Set&taskrec.FieldName != 0 {
			k.val = 1 + s.sym.Folded[sl.Name]
		}
	case "state":
		k.val = 1 + s.sym.Folded[sl.State]
	case "received":
		if sl.Set&taskrec.FieldReceived != 0 {
			k.val, k.num = 1, s.receivedOf(sl)
		}
	case "started":
		if sl.Set&taskrec.FieldStarted != 0 {
			k.val, k.num = 1, s.view(v, i, false).Started
		}
	}
	return k
}

func (s *State) compareKeys(a, b sortKey) int {
	switch {
	case (a.val == 0) != (b.val == 0):
		if a.val != 0 {
			return 1
		}
		return -1
	case a.num != b.num:
		return cmp.Compare(a.num, b.num)
	case a.val != b.val:
		return strings.Compare(s.sym.Str(a.val-1), s.sym.Str(b.val-1))
	}
	return s.compareIDs(a.slot, b.slot)
}

// Tasks returns the tasks q selects, in order: filters, then search, then
// sort, then offset and limit. An invalid search is a *tasksearch.Error; an
// invalid SortBy a plain error. It copies every record out at once; List
// answers the same in chunks.
func (s *State) Tasks(q Query) ([]taskrec.Task, error) {
	p, err := newPlan(q)
	if err != nil {
		return nil, err
	}
	s.mu.RLock()
	defer s.mu.RUnlock()
	seqs := s.plan(p)
	out := make([]taskrec.Task, 0, len(seqs))
	for _, seq := range seqs {
		// A sorted selection may release the lock (sortDetached).
		if i, ok := s.liveSlot(seq); ok {
			out = append(out, s.snapshot(i))
		}
	}
	return out, nil
}

// plan is a compiled Query.
type plan struct {
	spec          sortSpec
	f             *filter
	offset, limit int
	// oneLock makes a sorted page select under one lock, as it does
	// after a chunked selection could not stand (see sortedInChunks).
	oneLock bool
}

func newPlan(q Query) (*plan, error) {
	spec, err := parseSort(q.SortBy)
	if err != nil {
		return nil, err
	}
	f, err := compile(q)
	if err != nil {
		return nil, err
	}
	return &plan{spec: spec, f: f, offset: max(q.Offset, 0), limit: q.Limit}, nil
}

// plan returns the sequence numbers of the tasks p selects, in order; the
// caller holds the read lock, which a sorted selection may release and
// take again: a page over many tasks between chunks (sortedInChunks), an
// unpaged list for its sort (sortDetached).
//
// The default order walks the smallest index that holds every match,
// newest first, and stops after offset+limit matches, so the usual
// "latest 100" page costs microseconds at any size; other orders sort
// every match.
func (s *State) plan(p *plan) []uint64 {
	spec, f, offset, limit := p.spec, p.f, p.offset, p.limit
	out := []uint64{}
	if limit == 0 || limit < NoLimit {
		return out
	}
	if !f.resolve(&s.sym) {
		return out
	}
	if f.ids != nil {
		return s.byIDs(f, spec, offset, limit)
	}
	xs := s.sources(f)
	// The indexes hold every match: sized from them, the answer is
	// allocated once, where growing it to a million would leave four
	// times its size as garbage.
	total := 0
	for _, x := range xs {
		total += x.Len()
	}
	if limit == NoLimit && spec.field != "" && spec.field != "received" {
		return s.sortDetached(p, xs, total)
	}
	bound := max(total-offset, 0)
	if limit != NoLimit {
		bound = min(bound, limit)
	}
	out = make([]uint64, 0, bound)
	if spec.field == "" && f.search != nil && s.searchCandidates(f, offset, limit, &out) {
		return out
	}
	if spec.field == "" && (f.hasStart || f.hasEnd) && s.receivedFirst(f, xs, offset, limit, &out) {
		return out
	}
	if spec.field == "" {
		skipped := 0
		s.newestFirst(xs, func(i uint32) bool {
			if !s.match(f, i) {
				return true
			}
			if skipped < offset {
				skipped++
				return true
			}
			out = append(out, s.seqOf(i))
			return len(out) != limit
		})
		return out
	}
	if spec.field == "received" {
		s.byReceivedTime(f, spec.desc, offset, limit, &out)
		return out
	}

	if offset+limit <= maxChunkedPage && total > minChunkedChunks*selectChunk && !p.oneLock {
		if seqs, ok := s.sortedInChunks(p); ok {
			return seqs
		}
		p.oneLock = true
		return s.plan(p)
	}
	order := func(a, b sortKey) int {
		if spec.desc {
			return s.compareKeys(b, a)
		}
		return s.compareKeys(a, b)
	}
	// Only the first offset+limit are listed: keep those in a heap whose
	// root is the last of them, so a million matches cost a pass and no
	// million-entry sort.
	top := &keyHeap[sortKey]{order: order, max: offset + limit}
	s.newestFirst(xs, func(i uint32) bool {
		if s.match(f, i) {
			top.offer(s.keyOf(i, spec.field, &f.v))
		}
		return true
	})
	keys := top.sorted()
	if offset >= len(keys) {
		return out
	}
	keys = keys[offset:]
	keys = keys[:min(limit, len(keys))]
	out = slices.Grow(out, len(keys))
	for _, k := range keys {
		out = append(out, s.seqOf(k.slot))
	}
	return out
}

// byIDs answers a selection with an id filter from the ids themselves:
// each is looked up, the matches sorted in the selection's order, then
// offset and limit applied. The ids bound the work, however many tasks
// the state holds.
func (s *State) byIDs(f *filter, spec sortSpec, offset, limit int) []uint64 {
	keys := make([]sortKey, 0, len(f.ids))
	for id := range f.ids {
		i, ok := s.lookup(id)
		// lookup reads a UUID in any case; the filter is exact, as in SQL.
		if !ok || s.taskID(i) != id || !s.match(f, i) {
			continue
		}
		if spec.field == "" {
			keys = append(keys, sortKey{slot: i})
		} else {
			keys = append(keys, s.keyOf(i, spec.field, &f.v))
		}
	}
	slices.SortFunc(keys, func(a, b sortKey) int {
		if spec.field == "" {
			// Newest first, as newestFirst walks the indexes.
			x, y := taskrec.Item{Key: s.slots.At(a.slot).Key, Slot: a.slot}, taskrec.Item{Key: s.slots.At(b.slot).Key, Slot: b.slot}
			switch {
			case s.less(y, x):
				return -1
			case s.less(x, y):
				return 1
			}
			return 0
		}
		if spec.desc {
			return s.compareKeys(b, a)
		}
		return s.compareKeys(a, b)
	})
	keys = keys[min(offset, len(keys)):]
	if limit != NoLimit {
		keys = keys[:min(limit, len(keys))]
	}
	out := make([]uint64, 0, len(keys))
	for _, k := range keys {
		out = append(out, s.seqOf(k.slot))
	}
	return out
}

// keyHeap keeps the max first keys in order: a heap with the greatest
// kept key at the root.
type keyHeap[K any] struct {
	keys  []K
	order func(a, b K) int
	max   int
}

func (h *keyHeap[K]) Len() int           { return len(h.keys) }
func (h *keyHeap[K]) Less(i, j int) bool { return h.order(h.keys[i], h.keys[j]) > 0 }
func (h *keyHeap[K]) Swap(i, j int)      { h.keys[i], h.keys[j] = h.keys[j], h.keys[i] }
func (h *keyHeap[K]) Push(x any)         { h.keys = append(h.keys, x.(K)) }
func (h *keyHeap[K]) Pop() any {
	k := h.keys[len(h.keys)-1]
	h.keys = h.keys[:len(h.keys)-1]
	return k
}

func (h *keyHeap[K]) offer(k K) {
	switch {
	case len(h.keys) < h.max:
		heap.Push(h, k)
	case h.max > 0 && h.order(k, h.keys[0]) < 0:
		h.keys[0] = k
		heap.Fix(h, 0)
	}
}

func (h *keyHeap[K]) sorted() []K {
	slices.SortFunc(h.keys, h.order)
	return h.keys
}

// receivedSpan is the part of the received-time index that a received
// range selects, and the number of tasks received after it.
func (s *State) receivedSpan(f *filter) (x *taskrec.Index, p, q taskrec.Pos, after int) {
	x = s.byReceived[received]
	if x == nil {
		return &taskrec.Index{}, taskrec.Pos{}, taskrec.Pos{}, 0
	}
	p, q = x.All()
	end := q
	if f.hasStart {
		p = x.Bound(f.start, false)
	}
	if f.hasEnd {
		q = x.Bound(f.end, true)
	}
	return x, p, q, x.Count(q, end)
}

// receivedFirst answers a default-order page of a received range from the
// received-time index when that range is the cheaper way in: when walking
// newest first would first pass over more tasks received after the range
// than the range (plus the never-received tasks, which the filter keeps)
// holds. It reports whether it did.
func (s *State) receivedFirst(f *filter, xs []*taskrec.Index, offset, limit int, out *[]uint64) bool {
	x, p, q, after := s.receivedSpan(f)
	inRange := x.Count(p, q)
	never := s.byReceived[notReceived]
	if never != nil {
		inRange += never.Len()
	}
	walk := after
	if len(xs) == 1 && s.live > 0 {
		// A filtered index passes over its share of them.
		walk = int(int64(after) * int64(xs[0].Len()) / int64(s.live))
	}
	if inRange >= walk {
		return false
	}
	want := offset + limit
	if limit == NoLimit {
		want = inRange
	}
	// The newest want matches, newest first. Walking the range from its
	// latest received makes nearly every later candidate older than the
	// ones kept, so insertions stay rare.
	top := make([]taskrec.Item, 0, max(min(want, inRange), 0))
	consider := func(it taskrec.Item) bool {
		if !s.match(f, it.Slot) {
			return true
		}
		c := taskrec.Item{Key: s.slots.At(it.Slot).Key, Slot: it.Slot}
		if len(top) == want && !s.less(top[want-1], c) {
			return true
		}
		i, _ := slices.BinarySearchFunc(top, c, func(e, t taskrec.Item) int {
			if s.less(t, e) {
				return -1
			}
			return 1
		})
		if len(top) == want {
			top = top[:want-1]
		}
		top = slices.Insert(top, i, c)
		return true
	}
	if want > 0 {
		x.Walk(p, q, true, consider)
		if never != nil {
			a, b := never.All()
			never.Walk(a, b, true, consider)
		}
	}
	for _, it := range top[min(offset, len(top)):] {
		*out = append(*out, s.seqOf(it.Slot))
	}
	return true
}

// byReceivedTime answers sort_by=received from the received-time index:
// tasks never received come first ascending (last descending), ordered by
// id, as Flower sorts a missing value.
func (s *State) byReceivedTime(f *filter, desc bool, offset, limit int, out *[]uint64) {
	x, p, q, _ := s.receivedSpan(f)
	var never []uint32
	if nx := s.byReceived[notReceived]; nx != nil {
		a, b := nx.All()
		nx.Walk(a, b, false, func(it taskrec.Item) bool {
			if s.match(f, it.Slot) {
				never = append(never, it.Slot)
			}
			return true
		})
		slices.SortFunc(never, s.compareIDs)
		if desc {
			slices.Reverse(never)
		}
	}
	skipped := 0
	take := func(i uint32) bool {
		if skipped < offset {
			skipped++
			return true
		}
		*out = append(*out, s.seqOf(i))
		return len(*out) != limit
	}
	takeAll := func(slots []uint32) bool {
		for _, i := range slots {
			if !take(i) {
				return false
			}
		}
		return true
	}
	fromIndex := func() bool {
		more := true
		x.Walk(p, q, desc, func(it taskrec.Item) bool {
			if s.match(f, it.Slot) {
				more = take(it.Slot)
			}
			return more
		})
		return more
	}
	if desc {
		_ = fromIndex() && takeAll(never)
	} else {
		_ = takeAll(never) && fromIndex()
	}
}

// searchCandidates answers a default-order page from the candidates of
// its search when there are few: the matches among them, newest first as
// newestFirst walks them, then offset and limit. It reports whether it
// did.
func (s *State) searchCandidates(f *filter, offset, limit int, out *[]uint64) bool {
	slots, ok := f.search.Candidates(tasksearch.Records{Slots: &s.slots, Arena: &s.arena, Symbols: &s.sym, TextIDs: s.textIDs})
	if !ok {
		return false
	}
	items := make([]taskrec.Item, 0, len(slots))
	for _, i := range slots {
		if s.match(f, i) {
			items = append(items, taskrec.Item{Key: s.slots.At(i).Key, Slot: i})
		}
	}
	slices.SortFunc(items, func(a, b taskrec.Item) int {
		switch {
		case s.less(b, a):
			return -1
		case s.less(a, b):
			return 1
		}
		return 0
	})
	items = items[min(offset, len(items)):]
	if limit != NoLimit {
		items = items[:min(limit, len(items))]
	}
	for _, it := range items {
		*out = append(*out, s.seqOf(it.Slot))
	}
	return true
}
