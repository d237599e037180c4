package handlers

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/go-openapi/runtime"
	"github.com/go-openapi/runtime/middleware"

	"github.com/stamen-dev/stamen/internal/history"
	"github.com/stamen-dev/stamen/internal/state"
	"github.com/stamen-dev/stamen/internal/taskrec"
	"github.com/stamen-dev/stamen/restapi/operations/tasks"
	"github.com/stamen-dev/stamen/restapi/operations/workers"
)

// downReader is a store that cannot be reached (a unit-test stand-in:
// the real outage is TestPostgresOutage in internal/app).
type downReader struct{}

var errDown = fmt.Errorf("%w: dial tcp: connection refused", history.ErrUnavailable)

func (downReader) ListTasks(context.Context, state.Query) (TaskCursor, error) { return nil, errDown }
func (downReader) Task(context.Context, string) (taskrec.Task, bool, error) {
	return taskrec.Task{}, false, errDown
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

// failingReader lists n tasks, then fails as a store whose connection
// breaks mid-list.
type failingReader struct {
	downReader
	n int
}

func (r failingReader) ListTasks(context.Context, state.Query) (TaskCursor, error) {
	return &failingCursor{left: r.n}, nil
}

type failingCursor struct {
	left int
	err  error
}

func (c *failingCursor) Next(n int, fn func(t *taskrec.Task)) bool {
	for range n {
		if c.left == 0 {
			c.err = errDown
			return false
		}
		c.left--
		t := taskrec.Task{UUID: fmt.Sprintf("t%d", c.left), State: "SUCCESS"}
		fn(&t)
	}
	return true
}
func (c *failingCursor) Err() error { return c.err }
func (c *failingCursor) Close()     {}

// TestTaskListCutShortByTheStore: a list the store fails to finish is not
// passed off as whole. Failing within the first chunk, before the status
// is sent, it answers 503 JSON; failing later, the body that was sent is
// not closed, so that no JSON client takes it for the complete list.
func TestTaskListCutShortByTheStore(t *testing.T) {
	for _, c := range []struct {
		name     string
		n        int
		wantCode int
	}{
		{"in the first chunk", 3, http.StatusServiceUnavailable},
		{"after the first chunk", taskListChunk + 10, http.StatusOK},
	} {
		t.Run(c.name, func(t *testing.T) {
			h := New(Config{Tasks: failingReader{n: c.n}})
			req := httptest.NewRequest("GET", "/api/tasks", nil)
			rec := httptest.NewRecorder()
			h.listTasks(tasks.ListTasksParams{HTTPRequest: req}, nil).WriteResponse(rec, runtime.JSONProducer())
			body := rec.Body.String()
			if rec.Code != c.wantCode {
				t.Fatalf("status %d, want %d: %.200s", rec.Code, c.wantCode, body)
			}
			if c.wantCode != http.StatusOK {
				if !strings.HasPrefix(body, `{"error":`) || !strings.Contains(body, "unavailable") {
					t.Errorf("body %s, want the store's error", body)
				}
				return
			}
			if json.Valid(rec.Body.Bytes()) || !json.Valid(append(rec.Body.Bytes(), '}')) {
				t.Errorf("the list cut short is not the sent tasks without the closing brace (%d bytes, ends %q)", len(body), body[max(0, len(body)-20):])
			}
			if n := strings.Count(body, `"uuid"`); n != c.n {
				t.Errorf("%d tasks written, want the %d listed before the failure", n, c.n)
			}
		})
	}
}
