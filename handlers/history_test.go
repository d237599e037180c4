package handlers

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/go-openapi/runtime"
	"github.com/go-openapi/runtime/middleware"

	"github.com/stamen-dev/stamen/internal/state"
	"github.com/stamen-dev/stamen/internal/store"
	"github.com/stamen-dev/stamen/restapi/operations/tasks"
	"github.com/stamen-dev/stamen/restapi/operations/workers"
)

// downReader is a store that cannot be reached (a unit-test stand-in:
// the real outage is TestPostgresOutage in internal/app).
type downReader struct{}

var errDown = fmt.Errorf("%w: dial tcp: connection refused", store.ErrUnavailable)

func (downReader) ListTasks(context.Context, state.Query) (TaskCursor, error) { return nil, errDown }
func (downReader) Task(context.Context, string) (state.Task, bool, error) {
	return state.Task{}, false, errDown
}
func (downReader) TaskTypes(context.Context) ([]string, error)     { return nil, errDown }
func (downReader) Workers(context.Context) ([]state.Worker, error) { return nil, errDown }
func (downReader) MatchTasks(context.Context, state.Query, int) ([]string, bool, error) {
	return nil, false, errDown
}
func (downReader) Failures(context.Context, state.Query) ([]state.FailureGroup, error) {
	return nil, errDown
}

// TestReadsAnswer503WhenTheStoreIsDown: every read through TaskReader
// (the failures, the bulk operations' selection and a retry's look-up of
// the events included) answers 503 JSON when the store is unavailable,
// and bad input still 400.
func TestReadsAnswer503WhenTheStoreIsDown(t *testing.T) {
	h := New(Config{Tasks: downReader{}})
	req := httptest.NewRequest("GET", "/api/tasks", nil)
	yes := true
	bad := "bogus"
	for _, c := range []struct {
		name string
		r    middleware.Responder
		code int
	}{
		{"tasks", h.listTasks(tasks.ListTasksParams{HTTPRequest: req}, nil), http.StatusServiceUnavailable},
		{"info", h.getTaskInfo(tasks.GetTaskInfoParams{HTTPRequest: req, Taskid: "x"}, nil), http.StatusServiceUnavailable},
		{"types", h.listTaskTypes(tasks.ListTaskTypesParams{HTTPRequest: req}, nil), http.StatusServiceUnavailable},
		{"workers", h.listWorkers(workers.ListWorkersParams{HTTPRequest: req, Status: &yes}, nil), http.StatusServiceUnavailable},
		{"failures", h.listFailures(tasks.ListFailuresParams{HTTPRequest: req}, nil), http.StatusServiceUnavailable},
		{"bulk revoke", h.revokeTasks(tasks.RevokeTasksParams{HTTPRequest: req, Max: 10, DryRun: &yes}, nil), http.StatusServiceUnavailable},
		{"bulk retry", h.retryTasks(tasks.RetryTasksParams{HTTPRequest: req, Max: 10, DryRun: &yes}, nil), http.StatusServiceUnavailable},
		// Not in the sent log, no result backend: the events are asked.
		{"retry", h.retryTask(tasks.RetryTaskParams{HTTPRequest: req, Taskid: "x"}, nil), http.StatusServiceUnavailable},
		{"bad received_start", h.listTasks(tasks.ListTasksParams{HTTPRequest: req, ReceivedStart: &bad}, nil), http.StatusBadRequest},
		{"bad failures received_end", h.listFailures(tasks.ListFailuresParams{HTTPRequest: req, ReceivedEnd: &bad}, nil), http.StatusBadRequest},
	} {
		rec := httptest.NewRecorder()
		c.r.WriteResponse(rec, runtime.JSONProducer())
		if rec.Code != c.code || !strings.HasPrefix(rec.Body.String(), `{"error":`) {
			t.Errorf("%s: %d %s, want %d JSON", c.name, rec.Code, rec.Body, c.code)
		}
	}
}
