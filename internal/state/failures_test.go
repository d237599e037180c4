package state

import (
	"fmt"
	"slices"
	"testing"
)

func TestExceptionType(t *testing.T) {
	for repr, want := range map[string]string{
		"ValueError('x')":               "ValueError",
		"KeyError('a (b)')":             "KeyError",
		"mod.CustomError()":             "mod.CustomError",
		"":                              "unknown",
		" \u00a0(x)":                    "unknown",
		"\tOSError\u2003(1)":            "OSError",
		"TimeLimitExceeded(60,)":        "TimeLimitExceeded",
		"WorkerLostError('Worker exi')": "WorkerLostError",
	} {
		if got := ExceptionType(repr); got != want {
			t.Errorf("ExceptionType(%q) = %q, want %q", repr, got, want)
		}
	}
}

// TestFailureGroupAdd keeps the count, the first and last times, the
// newest traceback and the 5 newest ids whatever the order of arrival; a
// tie keeps the order of arrival, and the traceback is the first example's.
func TestFailureGroupAdd(t *testing.T) {
	var g failures
	for _, at := range []float64{5, 1, 9, 3, 7, 2, 8} {
		g.add(fmt.Sprint("t", at), at, fmt.Sprint("tb", at))
	}
	g.add("u9", 9, "tb-u9")
	var ids []string
	for _, e := range g.examples {
		ids = append(ids, e.id)
	}
	if g.Count != 8 || g.First != 1 || g.Last != 9 || g.Traceback != "tb9" || !slices.Equal(ids, []string{"t9", "u9", "t8", "t7", "t5"}) {
		t.Errorf("group %+v, examples %v", g.FailureGroup, ids)
	}
}
