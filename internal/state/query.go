package state

import (
	"cmp"
	"fmt"
	"slices"
	"strings"
	"time"
)

// NoLimit as Query.Limit returns every match.
const NoLimit = -1

// Query selects tasks as GET /api/tasks does (flower-api.md §2.1).
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
	// Search is a query in the search language described in search.go.
	Search string
	// ReceivedStart and ReceivedEnd drop tasks received before or after
	// them; tasks never received are kept.
	ReceivedStart *time.Time
	ReceivedEnd   *time.Time
}

// filter is a compiled Query, minus ordering and paging.
type filter struct {
	worker, name, state string // folded; "" for no filter
	start, end          float64
	hasStart, hasEnd    bool
	search              expr
	m                   matcher
}

func compile(q Query) (*filter, error) {
	search, err := parseSearch(q.Search)
	if err != nil {
		return nil, err
	}
	f := &filter{search: search}
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
	return fold(v)
}

// match applies the filters, then the search. Flower indexes only
// non-empty names, workers and states, so an empty one never matches.
func (f *filter) match(t *Task) bool {
	if f.worker != "" && (!t.Has(FieldWorker) || t.Worker == "" || !foldEqual(t.Worker, f.worker)) {
		return false
	}
	if f.name != "" && (!t.Has(FieldName) || t.Name == "" || !foldEqual(t.Name, f.name)) {
		return false
	}
	if f.state != "" && (t.State == "" || !foldEqual(t.State, f.state)) {
		return false
	}
	if t.Has(FieldReceived) {
		if f.hasStart && t.Received < f.start || f.hasEnd && t.Received > f.end {
			return false
		}
	}
	if f.search == nil {
		return true
	}
	f.m.reset(t)
	return f.search.match(&f.m)
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

// sortKey is Flower's (has value, value, id) sort key.
type sortKey struct {
	e   *entry
	has bool
	num float64
	str string
}

func keyOf(e *entry, field string) sortKey {
	t := &e.t
	k := sortKey{e: e}
	switch field {
	case "name":
		k.has, k.str = t.Has(FieldName), fold(t.Name)
	case "state":
		k.has, k.str = true, fold(t.State)
	case "received":
		k.has, k.num = t.Has(FieldReceived), t.Received
	case "started":
		k.has, k.num = t.Has(FieldStarted), t.Started
	}
	if !k.has {
		k.num, k.str = 0, ""
	}
	return k
}

func compareKeys(a, b sortKey) int {
	switch {
	case a.has != b.has:
		if a.has {
			return 1
		}
		return -1
	case a.num != b.num:
		return cmp.Compare(a.num, b.num)
	case a.str != b.str:
		return strings.Compare(a.str, b.str)
	}
	return strings.Compare(a.e.t.UUID, b.e.t.UUID)
}

// Tasks returns the tasks q selects, in order: filters, then search, then
// sort, then offset and limit. An invalid search is a *SearchError; an
// invalid SortBy a plain error.
//
// The default order walks the state's timestamp index and stops after
// offset+limit matches, so the usual "latest 100" page costs microseconds
// at any size; other orders sort every match.
func (s *State) Tasks(q Query) ([]Task, error) {
	spec, err := parseSort(q.SortBy)
	if err != nil {
		return nil, err
	}
	f, err := compile(q)
	if err != nil {
		return nil, err
	}
	offset, limit := max(q.Offset, 0), q.Limit
	if limit == 0 || limit < NoLimit {
		return []Task{}, nil
	}

	s.mu.RLock()
	defer s.mu.RUnlock()
	out := []Task{}
	if spec.field == "" {
		skipped := 0
		for e := s.order.first(); e != nil; e = e.next[0] {
			if !f.match(&e.t) {
				continue
			}
			if skipped < offset {
				skipped++
				continue
			}
			out = append(out, e.snapshot())
			if len(out) == limit {
				break
			}
		}
		return out, nil
	}

	var keys []sortKey
	for e := s.order.first(); e != nil; e = e.next[0] {
		if f.match(&e.t) {
			keys = append(keys, keyOf(e, spec.field))
		}
	}
	slices.SortFunc(keys, func(a, b sortKey) int {
		if spec.desc {
			return compareKeys(b, a)
		}
		return compareKeys(a, b)
	})
	if offset >= len(keys) {
		return out, nil
	}
	keys = keys[offset:]
	if limit != NoLimit && limit < len(keys) {
		keys = keys[:limit]
	}
	for _, k := range keys {
		out = append(out, k.e.snapshot())
	}
	return out, nil
}
