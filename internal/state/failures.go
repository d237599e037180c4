package state

import (
	"sort"
	"strings"
	"unicode"

	"github.com/stamen-dev/stamen/internal/taskrec"
)

// FailureGroup is the failed tasks of one task name and exception type, as
// GET /api/failures shows them.
type FailureGroup struct {
	// Name is the task name ("" when the events gave none).
	Name string
	// ExceptionType is ExceptionType of the tasks' exception reprs.
	ExceptionType string
	Count         int64
	// First and Last are the earliest and the latest FailedAt.
	First, Last float64
	// Examples are up to FailureExamples task ids, newest failure first;
	// ties go in the order of the default list (newest timestamp, then
	// greatest id, first).
	Examples []string
	// Traceback is Examples[0]'s ("" when it has none).
	Traceback string
}

// FailureExamples is how many task ids a FailureGroup keeps.
const FailureExamples = 5

// ExceptionType is the class name of an exception repr: "ValueError('x')"
// is "ValueError", "mod.Error()" "mod.Error", an empty one "unknown".
func ExceptionType(repr string) string {
	name, _, _ := strings.Cut(repr, "(")
	if name = strings.TrimSpace(name); name == "" {
		return "unknown"
	}
	return name
}

// Spaces are the characters strings.TrimSpace (so ExceptionType) trims,
// for a store that computes ExceptionType in SQL.
var Spaces = func() string {
	var b strings.Builder
	for _, r16 := range unicode.White_Space.R16 {
		for r := rune(r16.Lo); r <= rune(r16.Hi); r += rune(r16.Stride) {
			b.WriteRune(r)
		}
	}
	for _, r32 := range unicode.White_Space.R32 {
		for r := rune(r32.Lo); r <= rune(r32.Hi); r += rune(r32.Stride) {
			b.WriteRune(r)
		}
	}
	return b.String()
}()

// FailedAt is when t failed: its failed time, else its timestamp.
func FailedAt(t *taskrec.Task) float64 {
	if t.Has(taskrec.FieldFailed) {
		return t.Failed
	}
	return t.Timestamp
}

// Failures groups the tasks q selects (Limit, Offset and SortBy aside) by
// task name and ExceptionType, in no particular order. The caller puts
// State: "FAILURE" in q. The groups are bounded by the tasks the state
// holds, which MaxTasks bounds.
func (s *State) Failures(q Query) ([]FailureGroup, error) {
	q.Limit, q.Offset, q.SortBy = NoLimit, 0, ""
	list, err := s.List(q)
	if err != nil {
		return nil, err
	}
	groups := map[[2]string]*failures{}
	for more := true; more; {
		// The list's default order is the examples' tie order.
		more = list.Next(listChunk, func(t *taskrec.Task) {
			key := [2]string{t.Name, ExceptionType(t.Exception)}
			g := groups[key]
			if g == nil {
				g = &failures{FailureGroup: FailureGroup{Name: strings.Clone(key[0]), ExceptionType: strings.Clone(key[1])}}
				groups[[2]string{g.Name, g.ExceptionType}] = g
			}
			var tb string
			if t.Has(taskrec.FieldTraceback) {
				tb = t.Traceback
			}
			g.add(t.UUID, FailedAt(t), tb)
		})
	}
	out := make([]FailureGroup, 0, len(groups))
	for _, g := range groups {
		g.Examples = make([]string, len(g.examples))
		for i, e := range g.examples {
			g.Examples[i] = e.id
		}
		out = append(out, g.FailureGroup)
	}
	return out, nil
}

// listChunk is how many tasks Failures and Match read per read lock.
const listChunk = 256

type failures struct {
	FailureGroup
	examples []failureExample // newest first
}

type failureExample struct {
	id string
	at float64
}

// add counts one failure at time at, the tasks coming in the list's
// default order. id and traceback are the state's (valid during the call
// only): what is kept is copied.
func (g *failures) add(id string, at float64, traceback string) {
	g.Count++
	if g.Count == 1 || at < g.First {
		g.First = at
	}
	if g.Count == 1 || at > g.Last {
		g.Last = at
	}
	// After the examples newer or as new: a tie keeps the list's order.
	i := sort.Search(len(g.examples), func(i int) bool { return g.examples[i].at < at })
	if i >= FailureExamples {
		return
	}
	if i == 0 {
		g.Traceback = strings.Clone(traceback)
	}
	g.examples = append(g.examples, failureExample{})
	copy(g.examples[i+1:], g.examples[i:])
	g.examples[i] = failureExample{id: strings.Clone(id), at: at}
	if len(g.examples) > FailureExamples {
		g.examples = g.examples[:FailureExamples]
	}
}

// Match returns the ids of the first max tasks q selects, in q's order (its
// Limit and Offset aside), and whether more than max match: a bulk
// operation's selection, which reads at most max+1 matches.
func (s *State) Match(q Query, max int) (ids []string, more bool, err error) {
	q.Limit, q.Offset = max+1, 0
	list, err := s.List(q)
	if err != nil {
		return nil, false, err
	}
	for next := true; next; {
		next = list.Next(listChunk, func(t *taskrec.Task) {
			if len(ids) < max {
				ids = append(ids, strings.Clone(t.UUID))
			} else {
				more = true
			}
		})
	}
	return ids, more, nil
}
