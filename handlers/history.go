package handlers

import (
	"context"

	"github.com/stamen-dev/stamen/internal/history"
	"github.com/stamen-dev/stamen/internal/state"
	"github.com/stamen-dev/stamen/internal/taskrec"
)

// TaskReader is where the operations find the task history: GET
// /api/tasks, /api/task/info, /api/task/types, /api/failures, the workers
// of /api/workers?status=1, the selection of the bulk revoke and retry,
// and the tasks other operations look up (the events' arguments of a
// retry, the state shown with an unreadable result). The in-memory state
// is one (the default); a shared store (PostgreSQL, for a fleet of
// replicas) is another, so that every replica answers the same. A reader
// renders nothing: tasks come back as taskrec.Task and are written by the
// same code whatever the store, so bodies are byte-identical.
//
// Errors: a *tasksearch.Error or another error for bad input answers
// 400; one that wraps history.ErrUnavailable answers 503. The methods are
// documented on history.TaskReader.
type TaskReader = history.TaskReader

// TaskCursor is a ListTasks answer, read in chunks as the body is written
// (history.TaskCursor).
type TaskCursor = history.TaskCursor

// StateReader serves the history from the in-memory state.
type StateReader struct{ State *state.State }

// ListTasks implements TaskReader.
func (r StateReader) ListTasks(_ context.Context, q state.Query) (TaskCursor, error) {
	l, err := r.State.List(q)
	if err != nil {
		return nil, err
	}
	return stateCursor{l}, nil
}

// Task implements TaskReader.
func (r StateReader) Task(_ context.Context, id string) (taskrec.Task, bool, error) {
	t, ok := r.State.Task(id)
	return t, ok, nil
}

// TaskTypes implements TaskReader.
func (r StateReader) TaskTypes(context.Context) ([]string, error) { return r.State.TaskTypes(), nil }

// Workers implements TaskReader.
func (r StateReader) Workers(context.Context) ([]state.Worker, error) { return r.State.Workers(), nil }

// MatchTasks implements TaskReader.
func (r StateReader) MatchTasks(_ context.Context, q state.Query, max int) ([]string, bool, error) {
	return r.State.Match(q, max)
}

// Failures implements TaskReader.
func (r StateReader) Failures(_ context.Context, q state.Query) ([]state.FailureGroup, error) {
	return r.State.Failures(q)
}

type stateCursor struct{ *state.TaskList }

func (stateCursor) Err() error { return nil }
