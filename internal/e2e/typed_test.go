package e2e

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/stamen-dev/stamen/internal/testcluster"
)

// What a datetime, a date, a UUID and a Decimal read as, on every release:
// the strings kombu 5.2 wrote (kombu >= 5.3 writes them as typed JSON).
var (
	typedPlain = map[string]any{
		"dt": "2024-01-02T03:04:05.678901Z", "d": "2024-01-02T00:00:00",
		"u": "12345678-1234-5678-1234-567812345678", "dec": "1.10",
	}
	typedPlainRepr = "{'dt': '2024-01-02T03:04:05.678901Z', 'd': '2024-01-02T00:00:00', " +
		"'u': '12345678-1234-5678-1234-567812345678', 'dec': '1.10'}"
	typedException = "ValueError('2024-01-02T03:04:05.678901Z')"
)

// typedClient is a Celery client snippet: it sends stamen.echo with the
// typed values as kwargs, and stamen.fail with the datetime, and prints the
// two task ids.
const typedClient = `
import datetime, decimal, uuid
from stamen_testapp import app
dt = datetime.datetime(2024, 1, 2, 3, 4, 5, 678901, tzinfo=datetime.timezone.utc)
echo = app.send_task("stamen.echo", kwargs={"dt": dt, "d": datetime.date(2024, 1, 2),
    "u": uuid.UUID("12345678-1234-5678-1234-567812345678"), "dec": decimal.Decimal("1.10")})
fail = app.send_task("stamen.fail", kwargs={"message": dt})
print(echo.id, fail.id)
`

// typedInspectClient sends stamen.sleep with a Decimal (running while
// /api/workers is read: active) and stamen.echo with the typed values as
// kwargs and a countdown (waiting on a worker: scheduled), and prints the
// two task ids.
const typedInspectClient = `
import datetime, decimal, uuid
from stamen_testapp import app
dt = datetime.datetime(2024, 1, 2, 3, 4, 5, 678901, tzinfo=datetime.timezone.utc)
sleep = app.send_task("stamen.sleep", args=[decimal.Decimal("8")])
echo = app.send_task("stamen.echo", countdown=10, kwargs={"dt": dt, "d": datetime.date(2024, 1, 2),
    "u": uuid.UUID("12345678-1234-5678-1234-567812345678"), "dec": decimal.Decimal("1.10")})
print(sleep.id, echo.id)
`

// inspectedTask finds task id among the workers' replies to method in an
// /api/workers body: the request object (scheduled nests it under
// "request"), or nil.
func inspectedTask(workers map[string]any, method, id string) map[string]any {
	for _, w := range workers {
		info, _ := w.(map[string]any)
		list, _ := info[method].([]any)
		for _, item := range list {
			req, _ := item.(map[string]any)
			if inner, ok := req["request"].(map[string]any); ok {
				req = inner
			}
			if req != nil && req["id"] == id {
				return req
			}
		}
	}
	return nil
}

func typedCases() []suiteCase {
	return []suiteCase{
		{"typed values in the workers' active and scheduled tasks read as plain strings", func(t *testing.T, c *cluster) {
			out := testcluster.RunClient(t, testcluster.ClientOptions{Celery: c.celery, Broker: c.cfg.BrokerURL, Backend: c.cfg.ResultBackend}, typedInspectClient)
			ids := strings.Fields(string(out))
			if len(ids) != 2 {
				t.Fatalf("client printed %q, want two task ids", out)
			}
			sleepID, echoID := ids[0], ids[1]
			var active, scheduled map[string]any
			var body []byte
			eventually(t, 8*time.Second, "the sleep active and the echo scheduled in /api/workers", func() bool {
				r := c.api.get("/api/workers", q("refresh", "1"))
				if r.Status != http.StatusOK {
					return false
				}
				body = r.Body
				workers := r.JSON(t)
				active, scheduled = inspectedTask(workers, "active", sleepID), inspectedTask(workers, "scheduled", echoID)
				return active != nil && scheduled != nil
			})
			if active["args"] != "['8']" {
				t.Errorf("active args %v, want ['8']", active["args"])
			}
			if diff := cmp.Diff(typedPlain, scheduled["kwargs"]); diff != "" {
				t.Errorf("scheduled kwargs (-want +got):\n%s", diff)
			}
			for _, typed := range []string{"__type__", "Decimal(", "datetime.", "UUID("} {
				if strings.Contains(string(body), typed) {
					t.Errorf("/api/workers holds %s: %s", typed, body)
				}
			}
			// Both done, so that no task of this case is left on a worker.
			checkInfo(t, c, sleepID, "SUCCESS", "args", "['8']")
			checkInfo(t, c, echoID, "SUCCESS", "kwargs", typedPlainRepr)
		}},
		{"typed values read as plain strings in apply, result, info and the event stream", func(t *testing.T, c *cluster) {
			stream := openStream(t, c, "stamen.typed")
			applied := c.api.mustOK(c.api.post("/api/task/apply/stamen.typed", nil, map[string]any{}))
			id := fmt.Sprint(applied["task-id"])
			okID := id
			if diff := cmp.Diff(typedPlain, applied["result"]); applied["state"] != "SUCCESS" || diff != "" {
				t.Errorf("apply: state %v, result (-want +got):\n%s", applied["state"], diff)
			}
			res := c.api.mustOK(c.api.get("/api/task/result/"+id, nil))
			if diff := cmp.Diff(typedPlain, res["result"]); diff != "" {
				t.Errorf("result (-want +got):\n%s", diff)
			}
			checkInfo(t, c, id, "SUCCESS", "result", typedPlainRepr)

			failed := c.api.mustOK(c.api.post("/api/task/apply/stamen.typed", nil, map[string]any{"kwargs": map[string]any{"fail": true}}))
			id = fmt.Sprint(failed["task-id"])
			if failed["state"] != "FAILURE" || failed["result"] != typedException {
				t.Errorf("apply of a failing task: %v %v, want FAILURE %s", failed["state"], failed["result"], typedException)
			}
			if res := c.api.mustOK(c.api.get("/api/task/result/"+id, nil)); res["result"] != typedException {
				t.Errorf("result of a failing task: %v, want %s", res["result"], typedException)
			}
			checkInfo(t, c, id, "FAILURE", "exception", typedException)
			if got := stream.await(t, okID, "task-succeeded")["result"]; got != typedPlainRepr {
				t.Errorf("/api/events task-succeeded result %v, want %s", got, typedPlainRepr)
			}
			if got := stream.await(t, id, "task-failed")["exception"]; got != typedException {
				t.Errorf("/api/events task-failed exception %v, want %s", got, typedException)
			}
		}},
		{"typed values sent by a Celery client read as plain strings", func(t *testing.T, c *cluster) {
			// rpc:// sends a result to the client that sent the task only:
			// there stamen shows these tasks through their events (the apply
			// case covers rpc:// results).
			withResults := c.cfg.ResultBackend != "rpc://"
			out := testcluster.RunClient(t, testcluster.ClientOptions{Celery: c.celery, Broker: c.cfg.BrokerURL, Backend: c.cfg.ResultBackend}, typedClient)
			ids := strings.Fields(string(out))
			if len(ids) != 2 {
				t.Fatalf("client printed %q, want two task ids", out)
			}
			echoID, failID := ids[0], ids[1]
			if withResults {
				res := c.api.mustOK(c.api.get("/api/task/result/"+echoID, q("timeout", "20")))
				if diff := cmp.Diff(map[string]any{"args": []any{}, "kwargs": typedPlain}, res["result"]); diff != "" {
					t.Errorf("echo result (-want +got):\n%s", diff)
				}
			}
			info := checkInfo(t, c, echoID, "SUCCESS", "result", "{'args': [], 'kwargs': "+typedPlainRepr+"}")
			if info["kwargs"] != typedPlainRepr {
				t.Errorf("info kwargs %v, want %s", info["kwargs"], typedPlainRepr)
			}
			if withResults {
				if res := c.api.mustOK(c.api.get("/api/task/result/"+failID, q("timeout", "20"))); res["result"] != typedException {
					t.Errorf("result of the failing task: %v, want %s", res["result"], typedException)
				}
			}
			checkInfo(t, c, failID, "FAILURE", "exception", typedException)
		}},
	}
}

// checkInfo waits until /api/task/info has the task in state and checks
// that key reads want, with no kombu typed JSON or Python datetime anywhere
// in the record; it returns the record.
func checkInfo(t *testing.T, c *cluster, id, state, key, want string) map[string]any {
	t.Helper()
	var info map[string]any
	eventually(t, 20*time.Second, "task "+id+" "+state+" in /api/task/info", func() bool {
		r := c.api.get("/api/task/info/"+id, nil)
		if r.Status != 200 {
			return false
		}
		info = r.JSON(t)
		return info["state"] == state && info[key] != nil
	})
	if info[key] != want {
		t.Errorf("info %s = %v, want %s", key, info[key], want)
	}
	for k, v := range info {
		if s := fmt.Sprint(v); strings.Contains(s, "__type__") || strings.Contains(s, "datetime.") {
			t.Errorf("info %s holds a typed value: %s", k, s)
		}
	}
	return info
}

// eventStream is an /api/events client that keeps what it has read.
type eventStream struct {
	sc   *bufio.Scanner
	seen map[string]map[string]any // "<uuid> <type>" -> data
}

// openStream subscribes to /api/events for a task name until the test ends.
func openStream(t *testing.T, c *cluster, taskname string) *eventStream {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	t.Cleanup(cancel)
	req, _ := http.NewRequestWithContext(ctx, "GET", c.api.base+"/api/events?type=task-*&taskname="+taskname, nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { resp.Body.Close() })
	if resp.StatusCode != 200 {
		t.Fatalf("/api/events: status %d", resp.StatusCode)
	}
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	return &eventStream{sc: sc, seen: map[string]map[string]any{}}
}

// await reads the stream until the event typ of task id has come (or the
// stream's 60 s end), checks that no event read holds a typed value, and
// returns the event's data.
func (s *eventStream) await(t *testing.T, id, typ string) map[string]any {
	t.Helper()
	for s.seen[id+" "+typ] == nil && s.sc.Scan() {
		data, ok := strings.CutPrefix(s.sc.Text(), "data: ")
		if !ok {
			continue
		}
		if strings.Contains(data, "__type__") || strings.Contains(data, "datetime.") {
			t.Errorf("/api/events streams a typed value: %s", data)
		}
		var ev map[string]any
		if err := json.Unmarshal([]byte(data), &ev); err != nil {
			t.Fatalf("/api/events data is not JSON: %s", data)
		}
		s.seen[fmt.Sprint(ev["uuid"])+" "+fmt.Sprint(ev["type"])] = ev
	}
	ev := s.seen[id+" "+typ]
	if ev == nil {
		t.Fatalf("/api/events ended (%v) before %s of %s", s.sc.Err(), typ, id)
	}
	return ev
}
