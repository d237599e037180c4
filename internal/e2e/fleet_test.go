package e2e

import (
	"encoding/json"
	"fmt"
	"maps"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stamen-dev/stamen/internal/testcluster"
)

// fleetArgs are a replica's flags: the shared database, the shared broker
// and result backend.
func fleetArgs(db, broker, backend string) []string {
	return []string{"--db", db, "--broker", broker, "--result_backend", backend, "--inspect_timeout", "2000"}
}

// newFleet is what a fleet test starts from: a private Redis whose
// databases 0 and 1 are the broker and the result backend, a PostgreSQL
// database of the test's own, the stamen binary, and the replicas'
// arguments for them (fleetArgs).
func newFleet(t *testing.T) (broker, backend, bin string, args []string) {
	t.Helper()
	testcluster.Require(t)
	redis := testcluster.StartRedis(t)
	broker, backend = redis.URL(0), redis.URL(1)
	db := testcluster.PostgresURL(testcluster.PostgresAddr, testcluster.PostgresDB(t))
	return broker, backend, buildStamen(t), fleetArgs(db, broker, backend)
}

// startReplicas starts the named replicas at once, as a deployment rolls
// them out together: they migrate the schema concurrently.
func startReplicas(t *testing.T, bin string, args []string, names ...string) []*replica {
	t.Helper()
	rs := make([]*replica, len(names))
	var wg sync.WaitGroup
	for i, n := range names {
		wg.Go(func() { rs[i] = newReplica(t, bin, n, args...) })
	}
	wg.Wait()
	for _, r := range rs {
		if r == nil { // newReplica failed the test from its goroutine
			t.FailNow()
		}
	}
	return rs
}

// taskMap decodes a /api/tasks answer.
func taskMap(t *testing.T, body []byte) map[string]map[string]any {
	t.Helper()
	m := response{Status: http.StatusOK, Body: body}.JSON(t)
	out := make(map[string]map[string]any, len(m))
	for id, v := range m {
		rec, ok := v.(map[string]any)
		if !ok {
			t.Fatalf("task %s is not an object: %v", id, v)
		}
		out[id] = rec
	}
	return out
}

// clientTasks has a Celery client (not stamen) send tasks and prints their
// ids, one a line: a add(i, 10) per argv[2] count, then one stamen.fail.
const clientTasks = `
import sys
from stamen_testapp import app
ids = [app.send_task("stamen.add", (i, 10)).id for i in range(int(sys.argv[1]))]
ids.append(app.send_task("stamen.fail", ("from the client",)).id)
print("\n".join(ids))
`

// TestFleetSameAnswers runs two replicas on one PostgreSQL database and one
// Redis broker with real workers. Tasks sent through either replica and by
// a Celery client are listed the same by both, for every filter, sort and
// page of /api/tasks, and /api/task/info agrees for each of them. The
// second replica starts only after the first tasks have finished: it can
// know those only from the store. So it must also read /api/failures, the
// selection of the bulk revoke and retry, and the events a retry rebuilds
// a task from there (fleetOperations).
func TestFleetSameAnswers(t *testing.T) {
	broker, backend, bin, args := newFleet(t)

	var w1, w2 *testcluster.Worker
	var wg sync.WaitGroup
	wg.Go(func() {
		w1 = testcluster.StartWorker(t, testcluster.WorkerOptions{Name: "fleet1", Broker: broker, Backend: backend, Concurrency: 2})
	})
	wg.Go(func() {
		w2 = testcluster.StartWorker(t, testcluster.WorkerOptions{Name: "fleet2", Broker: broker, Backend: backend, Concurrency: 2})
	})
	a := newReplica(t, bin, "a", args...)
	wg.Wait()
	if w1 == nil || w2 == nil {
		t.FailNow()
	}
	a.api.awaitWorkerReady(w1.Name)
	a.api.awaitWorkerReady(w2.Name)
	began := time.Now()

	want := map[string]string{} // task id -> final state
	names := map[string]string{}
	send := func(r *replica, task string, args ...any) {
		t.Helper()
		r.api.t = t
		id := fmt.Sprint(r.api.mustOK(r.api.post("/api/task/async-apply/"+task, nil, map[string]any{"args": args}))["task-id"])
		want[id], names[id] = "SUCCESS", task
		if task == "stamen.fail" {
			want[id] = "FAILURE"
		}
	}
	for i := range 4 {
		send(a, "stamen.add", i, 1)
	}
	send(a, "stamen.fail", "through a")
	eventually(t, 30*time.Second, "a's tasks finished in a", func() bool {
		for id, st := range want {
			if a.api.taskState(id) != st {
				return false
			}
		}
		return true
	})

	// A task b never sees the events of: a Celery client's (so neither
	// stamen's sent log nor, without result_extended, the result backend
	// has its arguments), finished before b starts.
	early := strings.TrimSpace(string(testcluster.RunClient(t, testcluster.ClientOptions{Broker: broker, Backend: backend}, clientTasks, "0")))
	want[early], names[early] = "FAILURE", "stamen.fail"
	eventually(t, 30*time.Second, "the client's early task failed in a", func() bool { return a.api.taskState(early) == "FAILURE" })

	b := newReplica(t, bin, "b", args...)
	rs := []*replica{a, b}
	for i := range 4 {
		send(b, "stamen.add", i, 2)
	}
	send(b, "stamen.fail", "through b")
	// A task called with kwargs, which a kwargs:key=value search finds
	// from PostgreSQL (the pair checked on each row its words select).
	b.api.t = t
	kwID := fmt.Sprint(b.api.mustOK(b.api.post("/api/task/async-apply/stamen.add", nil, map[string]any{"kwargs": map[string]any{"x": 7, "y": 30}}))["task-id"])
	want[kwID], names[kwID] = "SUCCESS", "stamen.add"
	out := testcluster.RunClient(t, testcluster.ClientOptions{Broker: broker, Backend: backend}, clientTasks, "4")
	for i, id := range strings.Fields(string(out)) {
		want[id], names[id] = "SUCCESS", "stamen.add"
		if i == 4 {
			want[id], names[id] = "FAILURE", "stamen.fail"
		}
	}
	if len(want) != 17 {
		t.Fatalf("%d task ids, want 17: client printed %q", len(want), out)
	}

	// Every task final, in both, before the filters are compared.
	all := awaitSame(t, rs, 30*time.Second, "/api/tasks", nil, func(body []byte) string {
		got := taskMap(t, body)
		for id, st := range want {
			if got[id] == nil || got[id]["state"] != st {
				return fmt.Sprintf("task %s: %v, want %s", id, got[id]["state"], st)
			}
		}
		return ""
	})
	tasks := taskMap(t, all)
	if len(tasks) != len(want) {
		t.Fatalf("%d tasks listed, want %d: %v", len(tasks), len(want), slices.Sorted(maps.Keys(tasks)))
	}
	byWorker := map[string][]string{}
	for id, rec := range tasks {
		byWorker[fmt.Sprint(rec["worker"])] = append(byWorker[fmt.Sprint(rec["worker"])], id)
	}
	if len(byWorker[w1.Name])+len(byWorker[w2.Name]) != len(want) {
		t.Fatalf("tasks by worker %v, want all on %s and %s", byWorker, w1.Name, w2.Name)
	}

	ids := slices.Sorted(maps.Keys(want))
	frag := ids[3][9:18] // a fragment of one id, across a dash
	window := url.Values{
		"received_start": {began.Add(-time.Minute).Format("2006-01-02 15:04")},
		"received_end":   {time.Now().Add(2 * time.Minute).Format("2006-01-02 15:04")},
	}
	with := func(v url.Values, kv ...string) url.Values {
		out := url.Values{}
		maps.Copy(out, v)
		for i := 0; i+1 < len(kv); i += 2 {
			out.Set(kv[i], kv[i+1])
		}
		return out
	}
	// expect builds an accept func: the answer is exactly these tasks
	// (n of them when ids is nil).
	expect := func(n int, match func(id string) bool) func([]byte) string {
		return func(body []byte) string {
			got := taskMap(t, body)
			if match != nil {
				var wantIDs []string
				for _, id := range ids {
					if match(id) {
						wantIDs = append(wantIDs, id)
					}
				}
				if g := slices.Sorted(maps.Keys(got)); !slices.Equal(g, wantIDs) {
					return fmt.Sprintf("tasks %v, want %v", g, wantIDs)
				}
				return ""
			}
			if len(got) != n {
				return fmt.Sprintf("%d tasks, want %d", len(got), n)
			}
			return ""
		}
	}
	onWorker := func(w string) func(string) bool {
		return func(id string) bool { return slices.Contains(byWorker[w], id) }
	}
	for _, tc := range []struct {
		name   string
		query  url.Values
		accept func([]byte) string
	}{
		{"all", nil, expect(0, func(string) bool { return true })},
		{"state SUCCESS", q("state", "SUCCESS"), expect(0, func(id string) bool { return want[id] == "SUCCESS" })},
		{"state FAILURE", q("state", "FAILURE"), expect(0, func(id string) bool { return want[id] == "FAILURE" })},
		{"taskname", q("taskname", "stamen.fail"), expect(0, func(id string) bool { return names[id] == "stamen.fail" })},
		{"workername 1", q("workername", w1.Name), expect(0, onWorker(w1.Name))},
		{"workername 2", q("workername", w2.Name), expect(0, onWorker(w2.Name))},
		{"received range", window, expect(0, func(string) bool { return true })},
		{"received range and state", with(window, "state", "FAILURE"), expect(0, func(id string) bool { return want[id] == "FAILURE" })},
		{"search id fragment", q("search", frag), expect(0, func(id string) bool { return strings.Contains(id, frag) })},
		{"search state", q("search", "state:FAILURE"), expect(0, func(id string) bool { return want[id] == "FAILURE" })},
		{"search kwargs pair", q("search", "kwargs:y=30"), expect(0, func(id string) bool { return id == kwID })},
		{"search kwargs pair, none", q("search", "kwargs:y=3"), expect(0, func(string) bool { return false })},
		{"sort_by name", q("sort_by", "name"), expect(len(want), nil)},
		{"sort_by -received", q("sort_by", "-received"), expect(len(want), nil)},
		{"sort_by started", q("sort_by", "started"), expect(len(want), nil)},
		{"limit", q("limit", "5"), expect(5, nil)},
		{"limit offset", q("limit", "4", "offset", "3", "sort_by", "received"), expect(4, nil)},
		{"limit offset filtered", q("limit", "2", "offset", "1", "state", "SUCCESS", "sort_by", "-received"), expect(2, nil)},
		{"offset past the end", q("offset", "100"), expect(0, nil)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			body := awaitSame(t, rs, 10*time.Second, "/api/tasks", tc.query, tc.accept)
			// Pages are slices of the same order.
			if tc.query.Get("limit") != "" && tc.query.Get("offset") != "" {
				full := with(tc.query)
				full.Del("limit")
				full.Del("offset")
				whole := awaitSame(t, rs, 10*time.Second, "/api/tasks", full, nil)
				keys, err := orderedKeys(whole)
				if err != nil {
					t.Fatal(err)
				}
				page, err := orderedKeys(body)
				if err != nil {
					t.Fatal(err)
				}
				var limit, offset int
				fmt.Sscan(tc.query.Get("limit"), &limit)
				fmt.Sscan(tc.query.Get("offset"), &offset)
				if wantPage := keys[min(offset, len(keys)):min(offset+limit, len(keys))]; !slices.Equal(page, wantPage) {
					t.Errorf("page %v, want %v of %v", page, wantPage, keys)
				}
			}
		})
	}
	for _, id := range ids {
		info := awaitSame(t, rs, 10*time.Second, "/api/task/info/"+id, nil, nil)
		got := response{Status: http.StatusOK, Body: info}.JSON(t)
		if got["state"] != want[id] || got["name"] != names[id] || got["uuid"] != id {
			t.Errorf("info %s: state %v name %v uuid %v, want %s %s", id, got["state"], got["name"], got["uuid"], want[id], names[id])
		}
	}
	// Workers and task types are shared too.
	awaitSame(t, rs, 10*time.Second, "/api/task/types", nil, func(body []byte) string {
		if s := string(body); !strings.Contains(s, "stamen.add") || !strings.Contains(s, "stamen.fail") {
			return "task types lack stamen.add or stamen.fail: " + s
		}
		return ""
	})
	// The bulk operations' selection takes the pair too.
	for _, r := range rs {
		r.api.t = t
		got := r.api.mustOK(r.api.post("/api/tasks/revoke", q("search", "kwargs:y=30", "max", "10", "dry_run", "true"), nil))
		if got["matched"] != float64(1) {
			t.Errorf("%s: dry run of a revoke of kwargs:y=30: %v, want 1 matched", r.name, got)
		}
	}
	fleetOperations(t, rs, want, names, early)
}

// fleetOperations checks that the operations reading the history beyond
// the task list answer the same on every replica, though only rs[0] holds
// every task in memory: /api/failures, the bulk operations' matches, and a
// retry of early, a task whose arguments only the events kept and that
// rs[1] never saw.
func fleetOperations(t *testing.T, rs []*replica, want, names map[string]string, early string) {
	t.Helper()
	var failed []string
	for id, st := range want {
		if st == "FAILURE" {
			failed = append(failed, id)
		}
	}
	slices.Sort(failed)
	awaitSame(t, rs, 10*time.Second, "/api/failures", nil, func(body []byte) string {
		var f struct {
			Groups []struct {
				Taskname      string   `json:"taskname"`
				ExceptionType string   `json:"exception_type"`
				Count         int      `json:"count"`
				Examples      []string `json:"examples"`
			} `json:"groups"`
		}
		if err := json.Unmarshal(body, &f); err != nil {
			return err.Error()
		}
		if len(f.Groups) != 1 || f.Groups[0].Taskname != "stamen.fail" || f.Groups[0].ExceptionType != "ValueError" ||
			f.Groups[0].Count != len(failed) || !slices.Equal(slices.Sorted(slices.Values(f.Groups[0].Examples)), failed) {
			return fmt.Sprintf("failures %s, want one group stamen.fail ValueError of %v", body, failed)
		}
		return ""
	})

	// The bulk operations match the same tasks on every replica: the
	// count of a dry run, the refusal over max, the ids revoked.
	failures := func(kv ...string) url.Values { return q(append([]string{"state", "FAILURE"}, kv...)...) }
	for _, path := range []string{"/api/tasks/revoke", "/api/tasks/retry"} {
		for _, r := range rs {
			r.api.t = t
			got := r.api.mustOK(r.api.post(path, failures("max", "10", "dry_run", "true"), nil))
			if got["matched"] != float64(len(failed)) || got["dry_run"] != true {
				t.Errorf("%s: dry run of %s: %v, want %d matched", r.name, path, got, len(failed))
			}
			if resp := r.api.post(path, failures("max", fmt.Sprint(len(failed)-1), "dry_run", "true"), nil); resp.Status != http.StatusBadRequest {
				t.Errorf("%s: %s with max=%d under %d matches: %d %s, want 400", r.name, path, len(failed)-1, len(failed), resp.Status, resp.Body)
			}
		}
	}
	for _, r := range rs {
		// Revoking finished tasks only adds them to the workers' revoked
		// sets.
		got := r.api.mustOK(r.api.post("/api/tasks/revoke", failures("max", "10"), nil))
		var ids []string
		for _, id := range got["revoked"].([]any) {
			ids = append(ids, fmt.Sprint(id))
		}
		if slices.Sort(ids); !slices.Equal(ids, failed) {
			t.Errorf("%s: bulk revoke of the failures revoked %v, want %v", r.name, ids, failed)
		}
	}

	// rs[1] sends early again from the events the other replica stored.
	b := rs[len(rs)-1]
	got := b.api.mustOK(b.api.post("/api/task/retry/"+early, nil, nil))
	newID, _ := got["task-id"].(string)
	if newID == "" || got["retry-of"] != early || got["source"] != "events" {
		t.Fatalf("%s: retry of %s: %v, want a new id from the events", b.name, early, got)
	}
	info := awaitSame(t, rs, 30*time.Second, "/api/task/info/"+newID, nil, func(body []byte) string {
		var i map[string]any
		if err := json.Unmarshal(body, &i); err != nil {
			return err.Error()
		}
		if i["state"] != "FAILURE" {
			return fmt.Sprintf("retry %s: state %v", newID, i["state"])
		}
		return ""
	})
	var i map[string]any
	if err := json.Unmarshal(info, &i); err != nil {
		t.Fatal(err)
	}
	if i["name"] != names[early] || !strings.Contains(fmt.Sprint(i["args"]), "from the client") {
		t.Errorf("the retry of %s ran as %v%v, want %s with the original args", early, i["name"], i["args"], names[early])
	}
}

// clientStream has a Celery client send argv[1] stamen.add tasks as fast as
// it can and print their ids, one a line.
const clientStream = `
import sys
from stamen_testapp import app
ids = [app.send_task("stamen.add", (i, 1)).id for i in range(int(sys.argv[1]))]
print("\n".join(ids))
`

// TestFleetReplicaKilled SIGKILLs one of two replicas in the middle of a
// stream of 2,000 tasks run by real workers. The other keeps ingesting
// while it is down; once it restarts, all 2,000 tasks show their final
// state in both, and a third replica started after the stream serves all of
// it too.
func TestFleetReplicaKilled(t *testing.T) {
	broker, backend, bin, args := newFleet(t)
	const total = 2000

	var w *testcluster.Worker
	var wg sync.WaitGroup
	wg.Go(func() {
		w = testcluster.StartWorker(t, testcluster.WorkerOptions{Name: "stream", Broker: broker, Backend: backend, Concurrency: 4})
	})
	rs := startReplicas(t, bin, args, "a", "b")
	wg.Wait()
	if w == nil {
		t.FailNow()
	}
	a, b := rs[0], rs[1]
	a.api.awaitWorkerReady(w.Name)
	b.api.awaitWorkerReady(w.Name)

	// The kill happens on a goroutine of its own while the test's runs the
	// client: once a has ingested a quarter of the stream's task events
	// (sent, received, started, succeeded: four a task).
	const series = `stamen_events_ingested_total{kind="task"}`
	type killed struct {
		aEvents, bEvents float64
		err              error
	}
	killedAt := make(chan killed, 1)
	go func() {
		deadline := time.Now().Add(2 * time.Minute)
		for time.Now().Before(deadline) {
			n, err := a.metric(series)
			if err != nil {
				killedAt <- killed{err: err}
				return
			}
			if n >= total {
				a.kill()
				nb, err := b.metric(series)
				killedAt <- killed{aEvents: n, bEvents: nb, err: err}
				return
			}
			time.Sleep(20 * time.Millisecond)
		}
		killedAt <- killed{err: fmt.Errorf("a did not ingest %d task events within 2 minutes", total)}
	}()
	out := testcluster.RunClient(t, testcluster.ClientOptions{Broker: broker, Backend: backend, Timeout: 2 * time.Minute}, clientStream, fmt.Sprint(total))
	ids := strings.Fields(string(out))
	if len(ids) != total {
		t.Fatalf("the client printed %d ids, want %d", len(ids), total)
	}
	k := <-killedAt
	if k.err != nil {
		t.Fatal(k.err)
	}
	t.Logf("a SIGKILLed after ingesting %.0f task events (b had %.0f) of about %d", k.aEvents, k.bEvents, 4*total)

	// b goes on ingesting while a is down: its count grows past what it
	// had when a was killed.
	eventually(t, 30*time.Second, "b ingesting while a is down", func() bool {
		n, err := b.metric(series)
		return err == nil && n > k.bEvents
	})
	during, err := b.metric(series)
	if err != nil {
		t.Fatal(err)
	}
	if during >= 4*total {
		t.Logf("b had ingested the whole stream (%.0f events) before a restarted", during)
	}
	a.start()

	// Every task final in both, and the same list.
	final := func(body []byte) string {
		got := taskMap(t, body)
		if len(got) != total {
			return fmt.Sprintf("%d tasks listed, want %d", len(got), total)
		}
		for _, id := range ids {
			if got[id] == nil || got[id]["state"] != "SUCCESS" {
				return fmt.Sprintf("task %s: %v", id, got[id]["state"])
			}
		}
		return ""
	}
	awaitSame(t, []*replica{a, b}, 90*time.Second, "/api/tasks", q("taskname", "stamen.add"), final)

	c := newReplica(t, bin, "c", args...)
	all := []*replica{a, b, c}
	awaitSame(t, all, 30*time.Second, "/api/tasks", q("taskname", "stamen.add"), final)
	awaitSame(t, all, 10*time.Second, "/api/tasks", q("state", "SUCCESS", "sort_by", "-received", "limit", "100", "offset", "1000"), func(body []byte) string {
		if n := len(taskMap(t, body)); n != 100 {
			return fmt.Sprintf("%d tasks on the page, want 100", n)
		}
		return ""
	})
	for _, id := range []string{ids[0], ids[total/2], ids[total-1]} {
		body := awaitSame(t, all, 10*time.Second, "/api/task/info/"+id, nil, nil)
		if info := (response{Status: http.StatusOK, Body: body}).JSON(t); info["state"] != "SUCCESS" || info["result"] == nil {
			t.Errorf("info %s: %v", id, info)
		}
	}
}
