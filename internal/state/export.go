package state

import (
	"time"

	"github.com/stamen-dev/stamen/internal/taskrec"
)

// What a store outside this package needs to hold the history and answer
// GET /api/tasks with the state's own rules (internal/store/pgstore):
// Celery's state precedence, and the search language and sort as trees it
// can translate. The record format is taskrec's.

// Precedence is Celery's state precedence (celery.events.state), lower is
// stronger; custom states rank between FAILURE and REVOKED.
func Precedence(state string) int { return precedence(state) }

// SearchNode is a parsed search query: Op is "and" or "or" with Children,
// or "term" with Field ("" for every field, else name, state, worker,
// args, kwargs or result), Value (case-folded) and, for kwargs:key=value,
// Pair ("key=value", both sides trimmed and folded).
type SearchNode struct {
	Op       string
	Children []*SearchNode
	Field    string
	Value    string
	Pair     string
}

// ParseSearch parses a search query with the rules and errors
// (*SearchError) of Query.Search; the empty query gives nil.
func ParseSearch(query string) (*SearchNode, error) {
	e, err := parseSearch(query)
	if err != nil || e == nil {
		return nil, err
	}
	return nodeOf(e), nil
}

func nodeOf(e expr) *SearchNode {
	switch x := e.(type) {
	case andExpr:
		n := &SearchNode{Op: "and"}
		for _, c := range x {
			n.Children = append(n.Children, nodeOf(c))
		}
		return n
	case orExpr:
		n := &SearchNode{Op: "or"}
		for _, c := range x {
			n.Children = append(n.Children, nodeOf(c))
		}
		return n
	case term:
		return &SearchNode{Op: "term", Field: x.field, Value: x.value, Pair: x.pair}
	}
	panic("state: unknown search expression")
}

// PairWords are the parts of a SearchNode's Pair that every kwargs repr
// holding the pair contains, case-folded ("" for a part that may be
// written otherwise): a store can select a superset of the matches by
// them, and check each with a Search.
func PairWords(pair string) [2]string { return pairWords(pair) }

// Search is a compiled search query, to check tasks a store selected by a
// superset of it (the kwargs:key=value pairs, which need the repr parsed).
// It is not safe for concurrent use.
type Search struct {
	e expr
	m matcher
}

// CompileSearch compiles query with the rules and errors of Query.Search.
func CompileSearch(query string) (*Search, error) {
	e, err := parseSearch(query)
	if err != nil {
		return nil, err
	}
	return &Search{e: e}, nil
}

// Match reports whether t matches the search, as List would select it.
func (s *Search) Match(t *taskrec.Task) bool {
	if s.e == nil {
		return true
	}
	s.m.reset(t)
	return s.e.match(&s.m)
}

// ParseSort parses Query.SortBy: field is "" (newest first), name, state,
// received or started; the error is the one List gives.
func ParseSort(sortBy string) (field string, desc bool, err error) {
	s, err := parseSort(sortBy)
	return s.field, s.desc, err
}

// FoldFilter is a Worker, TaskName or State filter as List compares it:
// folded, and "" for none ("" or "All").
func FoldFilter(v string) string { return foldFilter(v) }

// Epoch is t as the records hold times, in seconds.
func Epoch(t time.Time) float64 { return epoch(t) }
