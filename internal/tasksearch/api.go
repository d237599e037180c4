package tasksearch

import (
	"github.com/stamen-dev/stamen/internal/taskrec"
)

// Node is a parsed search query: Op is "and" or "or" with Children,
// or "term" with Field ("" for every field, else name, state, worker,
// args, kwargs or result), Value (case-folded) and, for kwargs:key=value,
// Pair ("key=value", both sides trimmed and folded).
type Node struct {
	Op       string
	Children []*Node
	Field    string
	Value    string
	Pair     string
}

// Parse parses a search query, with its errors (*Error); the empty query
// gives nil.
func Parse(query string) (*Node, error) {
	e, err := parseSearch(query)
	if err != nil || e == nil {
		return nil, err
	}
	return nodeOf(e), nil
}

func nodeOf(e expr) *Node {
	switch x := e.(type) {
	case andExpr:
		n := &Node{Op: "and"}
		for _, c := range x {
			n.Children = append(n.Children, nodeOf(c))
		}
		return n
	case orExpr:
		n := &Node{Op: "or"}
		for _, c := range x {
			n.Children = append(n.Children, nodeOf(c))
		}
		return n
	case term:
		return &Node{Op: "term", Field: x.field, Value: x.value, Pair: x.pair}
	}
	panic("tasksearch: unknown search expression")
}

// PairWords are the parts of a Node's Pair that every kwargs repr
// holding the pair contains, case-folded ("" for a part that may be
// written otherwise): a store can select a superset of the matches by
// them, and check each with a Search.
func PairWords(pair string) [2]string { return pairWords(pair) }

// Search is a compiled search query: the state matches its records with
// it, and a store the tasks it selected by a superset of it (the
// kwargs:key=value pairs, which need the repr parsed). A nil Search, the
// empty query's, matches every task. It is not safe for concurrent use.
type Search struct {
	e expr
	m matcher
}

// Compile compiles query, with the errors of Parse; the empty query gives
// nil.
func Compile(query string) (*Search, error) {
	e, err := parseSearch(query)
	if err != nil || e == nil {
		return nil, err
	}
	return &Search{e: e}, nil
}

// Match reports whether t matches the search.
func (s *Search) Match(t *taskrec.Task) bool {
	if s == nil {
		return true
	}
	s.m.reset(t)
	return s.e.match(&s.m)
}
