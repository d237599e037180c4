package app

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os/exec"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-openapi/loads"
	"github.com/go-openapi/spec"

	"github.com/stamen-dev/stamen/handlers"
	"github.com/stamen-dev/stamen/internal/audit"
	"github.com/stamen-dev/stamen/internal/celery"
	"github.com/stamen-dev/stamen/internal/history"
	"github.com/stamen-dev/stamen/internal/inspect"
	"github.com/stamen-dev/stamen/internal/metrics"
	"github.com/stamen-dev/stamen/internal/state"
	"github.com/stamen-dev/stamen/internal/stream"
	"github.com/stamen-dev/stamen/internal/taskrec"
	"github.com/stamen-dev/stamen/internal/taskstats"
	"github.com/stamen-dev/stamen/internal/testcluster"
	"github.com/stamen-dev/stamen/restapi"
)

// fakeWorker is the one worker fakeBroker answers inspect commands for.
const fakeWorker = "w@h"

// fakeBroker stands in for a broker and a result backend whose failures a
// test chooses: a real broker cannot be made to time out or fail on demand.
// Inspect commands are answered as fakeWorker (registering t.a, consuming
// celery) unless inspectErr is set; every other call fails with err when it
// is set.
type fakeBroker struct {
	mu         sync.Mutex
	err        error
	inspectErr error
	control    []celery.ControlCommand
	// hang makes Publish wait for its context to end, as a broker that
	// does not answer does.
	hang bool
	// events, when set, is the fake server's event hub.
	events *stream.Hub
}

func (f *fakeBroker) fail(err, inspectErr error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.err, f.inspectErr = err, inspectErr
}

func (f *fakeBroker) errs() (error, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.err, f.inspectErr
}

// sent returns the control (not inspect) commands sent so far.
func (f *fakeBroker) sent() []celery.ControlCommand {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.control)
}

func (f *fakeBroker) Publish(ctx context.Context, _ *celery.TaskMessage) error {
	f.mu.Lock()
	hang := f.hang
	f.mu.Unlock()
	if hang {
		<-ctx.Done()
		return ctx.Err()
	}
	err, _ := f.errs()
	return err
}

func (f *fakeBroker) Broadcast(_ context.Context, cmd celery.ControlCommand) ([]celery.ControlReply, error) {
	err, inspectErr := f.errs()
	if slices.Contains(inspect.Methods, cmd.Method) {
		if inspectErr != nil {
			return nil, inspectErr
		}
		if len(cmd.Destination) > 0 && !slices.Contains(cmd.Destination, fakeWorker) {
			return nil, nil
		}
		value := map[string]string{
			"stats": `{}`, "active_queues": `[{"name": "celery"}]`, "registered": `["t.a"]`, "conf": `{}`,
		}[cmd.Method]
		if value == "" {
			value = `[]`
		}
		return []celery.ControlReply{{Hostname: fakeWorker, Value: json.RawMessage(value)}}, nil
	}
	f.mu.Lock()
	f.control = append(f.control, cmd)
	f.mu.Unlock()
	if err != nil {
		return nil, err
	}
	if !cmd.Reply {
		return nil, nil
	}
	return []celery.ControlReply{{Hostname: fakeWorker, Value: json.RawMessage(`{"ok": "done"}`)}}, nil
}

// fakeAuditStore keeps records in memory and fails as the fake broker
// does, so that the audit log's 503 is answered too.
type fakeAuditStore struct {
	fb  *fakeBroker
	mem *audit.Memory
}

func (s fakeAuditStore) Append(ctx context.Context, r audit.Record) error {
	return s.mem.Append(ctx, r)
}

func (s fakeAuditStore) List(ctx context.Context, q audit.Query) ([]audit.Record, error) {
	if err, _ := s.fb.errs(); err != nil {
		return nil, err
	}
	return s.mem.List(ctx, q)
}

func (s fakeAuditStore) Prune(ctx context.Context, before time.Time, n int) (int, error) {
	return s.mem.Prune(ctx, before, n)
}

func (f *fakeBroker) Purge(context.Context, string) (int64, error) {
	if err, _ := f.errs(); err != nil {
		return 0, err
	}
	return 0, nil
}

func (f *fakeBroker) QueueLengths(_ context.Context, queues []string) (map[string]int64, error) {
	if err, _ := f.errs(); err != nil {
		return nil, err
	}
	out := map[string]int64{}
	for _, q := range queues {
		out[q] = 0
	}
	return out, nil
}

func (f *fakeBroker) Result(_ context.Context, id string) (*celery.Result, error) {
	if err, _ := f.errs(); err != nil {
		return nil, err
	}
	if id == "nope" {
		return celery.PendingResult(id), nil
	}
	return &celery.Result{Status: "SUCCESS", Result: json.RawMessage(`2`)}, nil
}

func (f *fakeBroker) WaitResult(ctx context.Context, id string) (*celery.Result, error) {
	return f.Result(ctx, id)
}

func (f *fakeBroker) Abort(context.Context, string) error {
	err, _ := f.errs()
	return err
}

// fakeTasks reads the history from the state, and fails as a PostgreSQL
// store out of reach does (history.ErrUnavailable) while the fake broker is
// unavailable, so that the reads' 503 is answered too. (A store's timeout
// is ErrUnavailable as well: while the broker times out the store works,
// so that the operations reach the broker's 504.)
type fakeTasks struct {
	handlers.StateReader
	fb *fakeBroker
}

func (f fakeTasks) down() error {
	if err, _ := f.fb.errs(); errors.Is(err, celery.ErrUnavailable) {
		return fmt.Errorf("%w: fake: %v", history.ErrUnavailable, err)
	}
	return nil
}

// TaskStats answers from an empty aggregate, or fails as the store does.
func (f fakeTasks) TaskStats(ctx context.Context, q taskstats.Query) (taskstats.Result, error) {
	if err := f.down(); err != nil {
		return taskstats.Result{}, err
	}
	return handlers.AggregateStats{Aggregate: taskstats.New(taskstats.Config{})}.TaskStats(ctx, q)
}

func (f fakeTasks) ListTasks(ctx context.Context, q state.Query) (handlers.TaskCursor, error) {
	if err := f.down(); err != nil {
		return nil, err
	}
	return f.StateReader.ListTasks(ctx, q)
}

func (f fakeTasks) Task(ctx context.Context, id string) (taskrec.Task, bool, error) {
	if err := f.down(); err != nil {
		return taskrec.Task{}, false, err
	}
	return f.StateReader.Task(ctx, id)
}

func (f fakeTasks) TaskTypes(ctx context.Context) ([]string, error) {
	if err := f.down(); err != nil {
		return nil, err
	}
	return f.StateReader.TaskTypes(ctx)
}

func (f fakeTasks) Workers(ctx context.Context) ([]state.Worker, error) {
	if err := f.down(); err != nil {
		return nil, err
	}
	return f.StateReader.Workers(ctx)
}

func (f fakeTasks) MatchTasks(ctx context.Context, q state.Query, max int) ([]string, bool, error) {
	if err := f.down(); err != nil {
		return nil, false, err
	}
	return f.StateReader.MatchTasks(ctx, q, max)
}

func (f fakeTasks) Failures(ctx context.Context, q state.Query) ([]state.FailureGroup, error) {
	if err := f.down(); err != nil {
		return nil, err
	}
	return f.StateReader.Failures(ctx, q)
}

// newFakeServer serves the whole HTTP stack (middleware, generated API,
// handlers) over fb, with a state that holds one task, "id-1".
func newFakeServer(t *testing.T, fb *fakeBroker) *httptest.Server {
	t.Helper()
	return newFakeServerLogging(t, fb, slog.New(slog.DiscardHandler))
}

// newFakeServerLogging is newFakeServer logging to log.
func newFakeServerLogging(t *testing.T, fb *fakeBroker, log *slog.Logger) *httptest.Server {
	t.Helper()
	st := state.New(state.Config{MaxTasks: 10})
	// id-1 has no args in its events (it cannot be retried), id-2 has
	// complete ones and a route (it can).
	evs, err := celery.DecodeEvents([]byte(`[{"type": "task-received", "uuid": "id-1", "name": "t.a",
		"hostname": "` + fakeWorker + `", "timestamp": 1700000000.5, "clock": 1},
		{"type": "task-sent", "uuid": "id-2", "name": "t.b", "args": "(1,)", "kwargs": "{}", "exchange": "",
		"routing_key": "celery", "hostname": "c@h", "timestamp": 1700000001.5, "clock": 2}]`))
	if err != nil {
		t.Fatal(err)
	}
	st.Apply(evs...)
	insp := inspect.New(fb, time.Second, 0, log)
	if err := insp.Refresh(context.Background(), ""); err != nil {
		t.Fatal(err)
	}
	var handler http.Handler
	auditLog := &audit.Log{Store: fakeAuditStore{fb: fb, mem: &audit.Memory{}}, Logger: log}
	h := handlers.New(handlers.Config{
		State: st, Tasks: fakeTasks{StateReader: handlers.StateReader{State: st}, fb: fb},
		Inspector: insp, Broker: fb, Results: fb, Logger: log,
		ControlTimeout: time.Second, BrokerTimeout: time.Second, ApplyTimeout: time.Second,
		Audit: auditLog, Events: fb.events, Stats: fakeTasks{fb: fb},
	})
	handler, err = newHTTPHandler(h, metrics.New(nil), auditLog, Config{MaxBodyBytes: 1 << 20, Logger: log})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(handler)
	t.Cleanup(srv.Close)
	return srv
}

// declaredStatuses returns, per operation id, the status codes swagger.yaml
// declares.
func declaredStatuses(t *testing.T) map[string]map[int]bool {
	t.Helper()
	doc := analyzedSpec(t)
	out := map[string]map[int]bool{}
	for _, item := range doc.Spec().Paths.Paths {
		for _, op := range []*spec.Operation{item.Get, item.Post} {
			if op == nil {
				continue
			}
			out[op.ID] = map[int]bool{}
			for code := range op.Responses.StatusCodeResponses {
				out[op.ID][code] = true
			}
		}
	}
	return out
}

// specRequests returns a request for each operation of swagger.yaml not in
// listed: its path with every path parameter "x", its required query
// parameters a value of their type.
func specRequests(t *testing.T, listed map[string]bool) []statusRequest {
	t.Helper()
	doc := analyzedSpec(t)
	var out []statusRequest
	for method, paths := range doc.Analyzer.Operations() {
		for path, op := range paths {
			if listed[op.ID] {
				continue
			}
			q := url.Values{}
			for _, p := range doc.Analyzer.ParamsFor(method, path) {
				switch {
				case p.In == "path":
					path = strings.ReplaceAll(path, "{"+p.Name+"}", "x")
				case p.In == "query" && p.Required:
					q.Set(p.Name, exampleValue(p))
				}
			}
			if len(q) > 0 {
				path += "?" + q.Encode()
			}
			out = append(out, statusRequest{op: op.ID, method: method, path: path})
		}
	}
	return out
}

// specBadRequests returns, for each operation of swagger.yaml, one request
// for each bound its parameters declare (required, type, maxLength,
// minimum, maximum, enum) that breaks that bound and is otherwise as
// specRequests builds it: each must be refused with 400, which the
// operation must then declare. An operation's 400 for its parameters is
// so checked from the spec alone.
func specBadRequests(t *testing.T) []statusRequest {
	t.Helper()
	doc := analyzedSpec(t)
	var out []statusRequest
	for method, paths := range doc.Analyzer.Operations() {
		for tmpl, op := range paths {
			params := doc.Analyzer.ParamsFor(method, tmpl)
			// build is the request with every parameter valid but bad's,
			// which gets value (absent when omit).
			build := func(bad spec.Parameter, value string, omit bool) statusRequest {
				path, q := tmpl, url.Values{}
				for _, p := range params {
					v := exampleValue(p)
					if p.Name == bad.Name && p.In == bad.In {
						if omit {
							continue
						}
						v = value
					}
					switch {
					case p.In == "path":
						path = strings.ReplaceAll(path, "{"+p.Name+"}", url.PathEscape(v))
					case p.In == "query" && (p.Required || p.Name == bad.Name):
						q.Set(p.Name, v)
					}
				}
				if len(q) > 0 {
					path += "?" + q.Encode()
				}
				return statusRequest{op: op.ID, method: method, path: path, want: http.StatusBadRequest}
			}
			for _, p := range params {
				if p.In != "path" && p.In != "query" {
					continue
				}
				if p.In == "query" && p.Required {
					out = append(out, build(p, "", true))
				}
				for _, v := range badValues(p) {
					out = append(out, build(p, v, false))
				}
			}
		}
	}
	return out
}

// badValues are values of a parameter that break one of its bounds each.
func badValues(p spec.Parameter) []string {
	num := func(f float64) string { return strconv.FormatFloat(f, 'f', -1, 64) }
	var out []string
	switch p.Type {
	case "integer", "number":
		out = append(out, "x")
		if p.Minimum != nil {
			out = append(out, num(*p.Minimum-1))
		}
		if p.Maximum != nil {
			out = append(out, num(*p.Maximum+1))
		}
	case "boolean":
		out = append(out, "perhaps")
	case "string":
		if p.MaxLength != nil {
			out = append(out, strings.Repeat("x", int(*p.MaxLength)+1))
		}
		if len(p.Enum) > 0 {
			out = append(out, "none-of-the-enum")
		}
	}
	return out
}

// exampleValue is a valid value of a query parameter, as far as its type,
// default, enum and minimum tell.
func exampleValue(p spec.Parameter) string {
	switch {
	case p.Default != nil:
		return fmt.Sprint(p.Default)
	case len(p.Enum) > 0:
		return fmt.Sprint(p.Enum[0])
	case p.Type == "boolean":
		return "false"
	case p.Type == "integer" || p.Type == "number":
		if p.Minimum != nil {
			return fmt.Sprint(*p.Minimum)
		}
		return "1"
	}
	return "x"
}

// statusRequest is one request of TestAnsweredStatusesAreDeclared.
type statusRequest struct {
	op, method, path string
	body             string
	// chunked sends the body without a Content-Length.
	chunked bool
	// want, when set, is the only right answer.
	want int
	// full, when set, is an event hub the request is sent with every
	// subscription taken.
	full *stream.Hub
}

func (r statusRequest) String() string {
	return fmt.Sprintf("%s %.80s (%d-byte body, chunked %v)", r.method, r.path, len(r.body), r.chunked)
}

// do sends the request and returns its status and up to 4 KiB of its body;
// an event stream is cut after its headers.
func (r statusRequest) do(t *testing.T, base string) (int, []byte, http.Header) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	var body io.Reader
	if r.body != "" {
		body = strings.NewReader(r.body)
		if r.chunked {
			// A reader of unknown length: net/http sends it chunked.
			body = io.MultiReader(body)
		}
	}
	req, err := http.NewRequestWithContext(ctx, r.method, base+r.path, body)
	if err != nil {
		t.Fatal(err)
	}
	if r.body != "" && !strings.HasPrefix(r.path, "/api/task/") {
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	}
	if r.full != nil {
		// The streams of earlier requests end when their server side sees
		// the client gone, which may come after this request fills the hub:
		// a slot freed then would let this request in. Wait for them first.
		testcluster.Eventually(t, 10*time.Second, "the earlier event streams closed", func() bool {
			return r.full.Subscribers() == 0
		})
		for {
			sub, err := r.full.Subscribe(stream.Filter{}, 1)
			if err != nil {
				break
			}
			defer r.full.Unsubscribe(sub)
		}
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("%s: %v", r, err)
	}
	defer resp.Body.Close()
	if strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
		return resp.StatusCode, nil, resp.Header
	}
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
	return resp.StatusCode, b, resp.Header
}

// TestAnsweredStatusesAreDeclared sends requests to every operation, good
// ones and bad ones, while the fake broker works, is unavailable, times
// out (the task store failing with it) and refuses (an ACL's NOPERM), and checks both ways that the spec tells the truth: every status
// answered is declared for its operation, and every declared 400, 404, 413,
// 502, 503 and 504 is answered by some request. (401 and 403 need credentials:
// the security tests cover them.)
func TestAnsweredStatusesAreDeclared(t *testing.T) {
	fb := &fakeBroker{events: stream.NewHub(64)}
	srv := newFakeServer(t, fb)
	declared := declaredStatuses(t)

	long := strings.Repeat("a", 256)
	big := `{"args": ["` + strings.Repeat("x", 2<<20) + `"]}`
	bigForm := "queue=" + strings.Repeat("x", 2<<20)
	w := url.PathEscape(fakeWorker)
	var reqs []statusRequest
	add := func(op, method string, paths ...string) {
		for _, p := range paths {
			reqs = append(reqs, statusRequest{op: op, method: method, path: p})
		}
	}
	// Every POST refuses an oversized body, declared or chunked.
	addPost := func(op string, paths ...string) {
		add(op, "POST", paths...)
		b := bigForm
		if strings.HasPrefix(paths[0], "/api/task/") {
			b = big
		}
		reqs = append(reqs, statusRequest{op: op, method: "POST", path: paths[0], body: b, want: 413},
			statusRequest{op: op, method: "POST", path: paths[0], body: b, chunked: true, want: 413})
	}
	add("listTasks", "GET", "/api/tasks", "/api/tasks?limit=abc", "/api/tasks?limit=", "/api/tasks?sort_by=x")
	// refresh is no parameter of these: ignored, as Flower ignores it.
	add("listTaskTypes", "GET", "/api/task/types", "/api/task/types?refresh=perhaps")
	add("getQueueLengths", "GET", "/api/queues/length", "/api/queues/length?limit=")
	add("getTaskInfo", "GET", "/api/task/info/id-1", "/api/task/info/nope", "/api/task/info/"+long)
	add("getTaskResult", "GET", "/api/task/result/id-1", "/api/task/result/id-1?timeout=1",
		"/api/task/result/id-1?timeout=soon", "/api/task/result/a%20b", "/api/task/result/"+long)
	add("listWorkers", "GET", "/api/workers", "/api/workers?refresh=1", "/api/workers?refresh=perhaps",
		"/api/workers?workername=nobody")
	add("listAudit", "GET", "/api/audit", "/api/audit?limit=5&offset=1&operation=purgeQueue&user=u",
		"/api/audit?since=yesterday", "/api/audit?limit=", "/api/audit?limit=0")
	addPost("purgeQueue", "/api/queues/purge/q?force=true", "/api/queues/purge/nosuchqueue",
		"/api/queues/purge/a%20b", "/api/queues/purge/q?force=perhaps")
	add("getSession", "GET", "/api/session", "/api/session?refresh=perhaps")
	add("streamEvents", "GET", "/api/events", "/api/events?type="+strings.Repeat("x", 600))
	reqs = append(reqs, statusRequest{op: "streamEvents", method: "GET", path: "/api/events", full: fb.events, want: 503})
	for _, op := range []struct{ id, path string }{
		{"applyTask", "/api/task/apply/"},
		{"asyncApplyTask", "/api/task/async-apply/"},
	} {
		addPost(op.id, op.path+"t.a", op.path+"no.such", op.path+"a%20b", op.path+long)
	}
	addPost("applyTask", "/api/task/apply/t.a?timeout=soon")
	addPost("sendTask", "/api/task/send-task/t.a", "/api/task/send-task/a%20b", "/api/task/send-task/"+long)
	addPost("abortTask", "/api/task/abort/id-1", "/api/task/abort/a%20b", "/api/task/abort/"+long)
	addPost("revokeTask", "/api/task/revoke/id-1", "/api/task/revoke/id-1?terminate=true&signal=KILL",
		"/api/task/revoke/id-1?signal=SIGBOGUS", "/api/task/revoke/id-1?terminate=perhaps")
	addPost("retryTask", "/api/task/retry/id-2", "/api/task/retry/id-1", "/api/task/retry/nope",
		"/api/task/retry/a%20b", "/api/task/retry/"+long)
	reqs = append(reqs, statusRequest{op: "retryTask", method: "POST", path: "/api/task/retry/id-2", body: `{"args": [1]}`})
	addPost("revokeTasks", "/api/tasks/revoke?max=10", "/api/tasks/revoke?max=1", "/api/tasks/revoke?max=0",
		"/api/tasks/revoke?max=10&dry_run=true", "/api/tasks/revoke?max=10&received_start=2020-01-01")
	addPost("retryTasks", "/api/tasks/retry?max=10&taskname=t.b", "/api/tasks/retry?max=1", "/api/tasks/retry",
		"/api/tasks/retry?max=10&dry_run=true")
	add("getTaskStats", "GET", "/api/stats/tasks", "/api/stats/tasks?window=86400&step=3600&taskname=t.a",
		"/api/stats/tasks?step=90", "/api/stats/tasks?window=60&step=120")
	add("getWorkerStats", "GET", "/api/stats/workers")
	add("listTasks", "GET", "/api/tasks?format=csv", "/api/tasks?format=jsonl&limit=1", "/api/tasks?format=xml")
	add("listFailures", "GET", "/api/failures", "/api/failures?taskname=t.a", "/api/failures?received_end=yesterday")
	addPost("setTaskTimeout", "/api/task/timeout/t.a?workername="+w+"&soft=1",
		"/api/task/timeout/t.a?soft=1", "/api/task/timeout/no.such?workername="+w,
		"/api/task/timeout/t.a?workername=nobody&soft=1")
	addPost("setTaskRateLimit", "/api/task/rate-limit/t.a?workername="+w+"&rateLimit=1/s",
		"/api/task/rate-limit/t.a?workername="+w+"&rateLimit=xx", "/api/task/rate-limit/no.such?workername="+w+"&rateLimit=1")
	addPost("shutdownWorker", "/api/worker/shutdown/"+w, "/api/worker/shutdown/nobody", "/api/worker/shutdown/a%20b")
	addPost("restartWorkerPool", "/api/worker/pool/restart/"+w, "/api/worker/pool/restart/nobody", "/api/worker/pool/restart/a%20b")
	addPost("growWorkerPool", "/api/worker/pool/grow/"+w, "/api/worker/pool/grow/nobody", "/api/worker/pool/grow/"+w+"?n=0")
	addPost("shrinkWorkerPool", "/api/worker/pool/shrink/"+w, "/api/worker/pool/shrink/nobody", "/api/worker/pool/shrink/"+w+"?n=x")
	addPost("autoscaleWorkerPool", "/api/worker/pool/autoscale/"+w+"?min=1&max=2",
		"/api/worker/pool/autoscale/nobody?min=1&max=2", "/api/worker/pool/autoscale/"+w+"?max=2")
	addPost("addConsumer", "/api/worker/queue/add-consumer/"+w+"?queue=q",
		"/api/worker/queue/add-consumer/nobody?queue=q", "/api/worker/queue/add-consumer/"+w)
	addPost("cancelConsumer", "/api/worker/queue/cancel-consumer/"+w+"?queue=q",
		"/api/worker/queue/cancel-consumer/nobody?queue=q", "/api/worker/queue/cancel-consumer/"+w+"?queue=a%20b")

	// An operation the list above has no request for gets one built from
	// the spec, and every operation one for each bound of its parameters,
	// so that a new operation is checked from the start; what it declares
	// beyond 200 and its parameters' 400 then needs requests of its own,
	// and the check at the end says which.
	listed := map[string]bool{}
	for _, r := range reqs {
		listed[r.op] = true
	}
	reqs = append(reqs, specRequests(t, listed)...)
	reqs = append(reqs, specBadRequests(t)...)

	answered := map[string]map[int]bool{}
	for _, mode := range []struct {
		name string
		err  error
	}{
		{"broker up", nil},
		{"broker unavailable", fmt.Errorf("fake: %w", celery.ErrUnavailable)},
		{"broker wait expired", fmt.Errorf("fake: %w", context.DeadlineExceeded)},
		{"broker refuses", fmt.Errorf("fake: %w", &celery.RefusedError{Reply: "NOPERM this user has no permissions to run the 'llen' command"})},
	} {
		fb.fail(mode.err, mode.err)
		for _, r := range reqs {
			status, body, header := r.do(t, srv.URL)
			if answered[r.op] == nil {
				answered[r.op] = map[int]bool{}
			}
			answered[r.op][status] = true
			if r.want != 0 && status != r.want {
				t.Errorf("%s, %s: %s answered %d, want %d: %s", mode.name, r.op, r, status, r.want, body)
			}
			if !declared[r.op][status] {
				t.Errorf("%s, %s: %s answered %d, which the spec does not declare: %s", mode.name, r.op, r, status, body)
			}
			if status < 400 {
				continue
			}
			var e struct {
				Error *string `json:"error"`
			}
			if header.Get("Content-Type") != "application/json" || json.Unmarshal(body, &e) != nil || e.Error == nil || *e.Error == "" {
				t.Errorf("%s, %s: %d without a JSON error (%s): %s", mode.name, r, status, header.Get("Content-Type"), body)
			}
		}
	}
	fb.fail(nil, nil)

	ops := make([]string, 0, len(declared))
	for op := range declared {
		ops = append(ops, op)
	}
	sort.Strings(ops)
	for _, op := range ops {
		if answered[op] == nil {
			t.Errorf("%s: no request in the test", op)
			continue
		}
		for code := range declared[op] {
			switch code {
			case 400, 404, 413, 502, 503, 504, 200:
				if !answered[op][code] {
					t.Errorf("%s declares %d, which no request got: add one that gets it to the list of TestAnsweredStatusesAreDeclared", op, code)
				}
			}
		}
	}
}

// TestRevokeSignalsAreCelerys checks that revoke accepts exactly the signal
// names Celery's worker accepts (celery.platforms.signals.signum, as the
// worker's revoke command calls it) and sends a name the worker resolves to
// the same signal. Python lists the candidates: every SIG* name of its signal
// module, without the prefix, in lower case, plus the odd ones below.
func TestRevokeSignalsAreCelerys(t *testing.T) {
	testcluster.Require(t)
	const script = `
import json, signal, sys
from celery.platforms import signals
names = json.load(sys.stdin)
for n in dir(signal):
    if n.startswith("SIG"):
        names += [n, n[3:], n.lower(), n[3:].capitalize()]
out = {}
for n in names:
    try:
        # The worker's revoke: signum(signal or TERM_SIGNAME).
        num = signals.signum(n or "SIGTERM")
        # SIG_DFL, SIG_IGN, SIG_BLOCK... resolve too, but are no signal.
        out[n] = int(num) if isinstance(num, signal.Signals) else None
    except Exception:
        out[n] = None
json.dump(out, sys.stdout)
`
	extra, _ := json.Marshal([]string{"", "9", "15", "-1", "SIGBOGUS", "BOGUS", "SIG", "SIGSIGKILL", "SIGKILL9", "KILL;rm", "SIG_DFL"})
	cmd := exec.Command(testcluster.Python, "-c", script)
	cmd.Stdin = bytes.NewReader(extra)
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("python: %v", err)
	}
	var celerySays map[string]*int
	if err := json.Unmarshal(out, &celerySays); err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	if celerySays["KILL"] == nil || *celerySays["KILL"] != 9 || celerySays["sigkill"] != nil {
		t.Fatalf("unexpected verdicts from Celery: KILL %v, sigkill %v", celerySays["KILL"], celerySays["sigkill"])
	}

	fb := &fakeBroker{}
	srv := newFakeServer(t, fb)
	names := make([]string, 0, len(celerySays))
	for n := range celerySays {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, name := range names {
		want := celerySays[name]
		before := len(fb.sent())
		resp, err := http.Post(srv.URL+"/api/task/revoke/id-1?terminate=true&signal="+url.QueryEscape(name), "", nil)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if want == nil {
			if resp.StatusCode != http.StatusBadRequest {
				t.Errorf("signal %q, which Celery refuses: status %d, want 400: %s", name, resp.StatusCode, body)
			}
			if len(fb.sent()) != before {
				t.Errorf("signal %q: a command was sent", name)
			}
			continue
		}
		if resp.StatusCode != http.StatusOK {
			t.Errorf("signal %q, which Celery takes for %d: status %d: %s", name, *want, resp.StatusCode, body)
			continue
		}
		cmds := fb.sent()
		if len(cmds) != before+1 || cmds[before].Method != "revoke" {
			t.Errorf("signal %q: no revoke sent: %+v", name, cmds[before:])
			continue
		}
		cmd := cmds[before]
		sent, _ := cmd.Arguments["signal"].(string)
		if got := celerySays[sent]; got == nil || *got != *want {
			t.Errorf("signal %q (%d for Celery) sent as %q, which Celery takes for %v", name, *want, sent, got)
		}
	}
}

// TestClientGoneIsNoError: a client that hangs up while its call waits on
// the broker is not a broker failure, so it is not logged as an error.
func TestClientGoneIsNoError(t *testing.T) {
	var logs bytes.Buffer
	var mu sync.Mutex
	log := slog.New(slog.NewTextHandler(lockedWriter{&mu, &logs}, &slog.HandlerOptions{Level: slog.LevelDebug}))
	srv := newFakeServerLogging(t, &fakeBroker{hang: true}, log)
	ctx, cancel := context.WithTimeout(t.Context(), 200*time.Millisecond)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, srv.URL+"/api/task/send-task/t.a", strings.NewReader("{}"))
	if err != nil {
		t.Fatal(err)
	}
	if resp, err := http.DefaultClient.Do(req); err == nil {
		resp.Body.Close()
		t.Fatalf("the call answered %d with a broker that never does", resp.StatusCode)
	}
	deadline := time.Now().Add(5 * time.Second)
	for {
		mu.Lock()
		out := logs.String()
		mu.Unlock()
		if strings.Contains(out, "abandoned by the client") {
			if strings.Contains(out, "level=ERROR") || strings.Contains(out, "level=WARN") {
				t.Errorf("a client hanging up was logged as a failure:\n%s", out)
			}
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("the abandoned call was never noted:\n%s", out)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// lockedWriter serialises writes to a buffer a test reads meanwhile.
type lockedWriter struct {
	mu  *sync.Mutex
	buf *bytes.Buffer
}

func (w lockedWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.buf.Write(p)
}

// analyzedSpec is swagger.yaml as the server embeds it, analyzed.
func analyzedSpec(t *testing.T) *loads.Document {
	t.Helper()
	doc, err := loads.Analyzed(restapi.SwaggerJSON, "")
	if err != nil {
		t.Fatal(err)
	}
	return doc
}
