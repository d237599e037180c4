package state

import (
	"time"
)

// What a store outside this package needs to hold the history and answer
// GET /api/tasks with the state's own rules (internal/store/pg):
// Celery's state precedence, the filters and the sort. The record format
// is taskrec's, the search language tasksearch's.

// Precedence is Celery's state precedence (celery.events.state), lower is
// stronger; custom states rank between FAILURE and REVOKED.
func Precedence(state string) int { return precedence(state) }

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
