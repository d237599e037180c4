package ui_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/stamen-dev/stamen/internal/app"
	"github.com/stamen-dev/stamen/internal/testcluster"
)

// The hostile strings: each calls the page's hook (pwn) if it ever runs as
// script or markup. No quotes, so that Python's repr keeps them as they are.
const (
	hostileImg    = `<img src=x onerror=pwn(1)>`
	hostileScript = `</script><script>pwn(2)</script>`
	hostileSVG    = `<svg onload=pwn(3)>`
	hostile       = hostileImg + hostileScript + hostileSVG
)

// js quotes s as a JavaScript (and CSS) string literal.
func js(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}

// sel is the element matching a CSS attribute selector, as JavaScript.
func sel(attr, value string, rest ...string) string {
	return fmt.Sprintf(`document.querySelector('[%s=' + %s + '] %s')`, attr, jsAttr(value), strings.Join(rest, " "))
}

// jsAttr is a JavaScript expression giving value as a quoted CSS string.
func jsAttr(value string) string { return "JSON.stringify(" + js(value) + ")" }

// textOf is the text of the element expr finds ("" when none), as a
// JavaScript expression in parentheses, so that a comparison or a method
// call appended to it applies to the text.
func textOf(expr string) string { return "(((" + expr + ") || {}).textContent || '')" }

// workerInfo is the worker's latest inspection, refreshed.
func workerInfo(t *testing.T, base, name string) map[string]any {
	t.Helper()
	var ws map[string]map[string]any
	call(t, "GET", base+"/api/workers?refresh=true&workername="+name, nil, &ws)
	return ws[name]
}

func poolSize(t *testing.T, base, name string) float64 {
	stats, _ := workerInfo(t, base, name)["stats"].(map[string]any)
	pool, _ := stats["pool"].(map[string]any)
	procs, _ := pool["processes"].([]any)
	return float64(len(procs))
}

func consumes(t *testing.T, base, name, queue string) bool {
	qs, _ := workerInfo(t, base, name)["active_queues"].([]any)
	for _, q := range qs {
		if m, _ := q.(map[string]any); m["name"] == queue {
			return true
		}
	}
	return false
}

func taskState(t *testing.T, base, id string) string {
	var task struct{ State string }
	resp, err := http.Get(base + "/api/task/info/" + id)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	_ = json.NewDecoder(resp.Body).Decode(&task)
	return task.State
}

// TestDashboardRedis drives the dashboard in headless Chromium against a
// real Celery worker on Redis: every page shows the cluster's data, the
// tasks table follows new tasks live, the controls act on the worker, the
// hostile strings stay text, and it works under --url_prefix and behind a
// path-mapping proxy, asking no other host for anything.
func TestDashboardRedis(t *testing.T) {
	testcluster.Require(t)
	testcluster.RequireChromium(t)
	const db = 9
	testcluster.FlushRedisDB(t, db)
	broker := testcluster.RedisURL(db)
	_, srv := startStamen(t, app.Config{BrokerURL: broker})
	base := srv.URL
	w := testcluster.StartWorker(t, testcluster.WorkerOptions{Name: "dash", Broker: broker, PoolRestarts: true})
	b := newBrowser(t, 5*time.Minute, base, base)
	// Some history for the pages to show.
	var history []string
	for _, task := range []struct {
		name string
		args []any
	}{{"stamen.add", []any{1, 2}}, {"stamen.echo", []any{"hello", 42}}, {"stamen.add", []any{40, 2}}, {"stamen.fail", []any{"the disk is full"}}, {"stamen.sleep", []any{0.2}},
		// Fails twice, is retried each time, succeeds on its third attempt.
		{"stamen.retry", []any{3}}} {
		history = append(history, send(t, base, task.name, map[string]any{"args": task.args}))
	}
	testcluster.Eventually(t, 30*time.Second, "the first tasks done", func() bool {
		for _, id := range history {
			if s := taskState(t, base, id); s != "SUCCESS" && s != "FAILURE" {
				return false
			}
		}
		return true
	})
	failID := history[3]

	t.Run("workers", func(t *testing.T) {
		b.t = t
		b.open("/")
		b.wait("the worker online", textOf(sel("data-worker", w.Name, "[data-status]"))+` === "Online"`, 20*time.Second)
		b.wait("the online card", textOf(`document.querySelector("[data-card=online]")`)+` === "1"`, 5*time.Second)
		// The tasks run before the page opened are counted: 5 succeeded
		// (the retried one too), 1 failed, 2 retries.
		cell := func(k string) string { return textOf(sel("data-worker", w.Name, "[data-count="+k+"]")) }
		counts := func() string {
			return eval[string](b, `"failed=" + `+cell("failed")+` + " succeeded=" + `+cell("succeeded")+` + " retried=" + `+cell("retried"))
		}
		b.wait("the worker's counts since stamen started", `"failed=" + `+cell("failed")+` + " succeeded=" + `+cell("succeeded")+` + " retried=" + `+cell("retried")+
			` === "failed=1 succeeded=5 retried=2"`, 10*time.Second)
		if text := eval[string](b, `document.body.innerText`); strings.Contains(text, "since this page opened") || !strings.Contains(text, "since stamen started") {
			t.Errorf("the page says what the counts count as %q", text)
		}
		b.look("workers")
		b.safe("workers page")

		// One more failure after the page loaded adds to its cell live.
		eval[bool](b, `(window.__sameDocument = true)`)
		id := send(t, base, "stamen.fail", map[string]any{"args": []any{"once more"}})
		b.wait("the failure counted live", cell("failed")+` === "2"`, 15*time.Second)
		testcluster.Eventually(t, 10*time.Second, "the failure known to stamen", func() bool { return taskState(t, base, id) == "FAILURE" })
		if got := counts(); got != "failed=2 succeeded=5 retried=2" || !eval[bool](b, `window.__sameDocument === true`) {
			t.Errorf("after one more failure the row counts %s (the page reloaded: %v)", got, !eval[bool](b, `window.__sameDocument === true`))
		}

		// A worker that comes and goes while the page is open.
		eval[bool](b, `(window.__sameDocument = true)`)
		w2 := testcluster.StartWorker(t, testcluster.WorkerOptions{Name: "dash-2", Broker: broker})
		start := time.Now()
		b.wait("the new worker online", textOf(sel("data-worker", w2.Name, "[data-status]"))+` === "Online"`, 5*time.Second)
		t.Logf("the new worker shown online %s after it answered a ping", time.Since(start))
		w2.Stop()
		start = time.Now()
		b.wait("the stopped worker offline", textOf(sel("data-worker", w2.Name, "[data-status]"))+` === "Offline"`, 5*time.Second)
		t.Logf("the stopped worker shown offline %s after it exited", time.Since(start))
		if !eval[bool](b, `window.__sameDocument === true`) {
			t.Error("the page reloaded")
		}
	})

	t.Run("tasks live", func(t *testing.T) {
		b.t = t
		b.open("/tasks")
		b.wait("the live stream", `(document.querySelector("span.live") || {}).textContent === "Live" && document.querySelector("table[aria-label=Tasks]")`, 15*time.Second)
		eval[bool](b, `(window.__sameDocument = true)`)
		start := time.Now()
		id := send(t, base, "stamen.sleep", map[string]any{"args": []any{1.5}})
		row := sel("data-task", id)
		b.wait("the new task in the table", row, 5*time.Second)
		t.Logf("task %s shown %s after it was sent", id, time.Since(start))
		first := eval[string](b, row+".dataset.state")
		if first == "SUCCESS" {
			t.Errorf("the task was first shown as SUCCESS: no state change seen live")
		}
		b.wait("the task's state to become SUCCESS", row+`.dataset.state === "SUCCESS"`, 10*time.Second)
		if !eval[bool](b, `window.__sameDocument === true`) {
			t.Error("the page reloaded")
		}
		if got := eval[string](b, textOf(row+`.querySelector(".c-name")`)); got != "stamen.sleep" {
			t.Errorf("name shown %q", got)
		}
		b.look("tasks")
		b.safe("tasks page")

		// The search of /api/tasks, and sorting, both in the URL.
		b.open("/tasks?search=" + url.QueryEscape("name:stamen.fail"))
		b.wait("the search's rows", sel("data-task", failID), 10*time.Second)
		names := eval[[]string](b, `[...document.querySelectorAll("tr[data-task] .c-name")].map(e => e.textContent)`)
		if len(names) == 0 || slices.ContainsFunc(names, func(n string) bool { return n != "stamen.fail" }) {
			t.Errorf("name:stamen.fail shows %q", names)
		}
		if got := eval[string](b, `document.querySelector("input[name=search]").value`); got != "name:stamen.fail" {
			t.Errorf("the search box shows %q", got)
		}
		// The received-time window.
		b.open("/tasks?from=2999-01-01T00:00")
		b.wait("no task received after 2999", textOf(`document.querySelector("main")`)+`.includes("No task matches")`, 10*time.Second)
		b.open("/tasks?from=2000-01-01T00:00&to=2999-01-01T00:00")
		b.wait("the tasks received in the window", sel("data-task", failID), 10*time.Second)
		if got := eval[string](b, `document.querySelector("input[type=datetime-local]").value`); got != "2000-01-01T00:00" {
			t.Errorf("the window's start shows %q", got)
		}
		b.open("/tasks")
		b.wait("the table", `document.querySelectorAll("tr[data-task]").length >= 6`, 10*time.Second)
		b.click(`th button.sort`) // Name, descending first
		b.wait("sorted by name", `location.search.includes("sort=-name")`, 5*time.Second)
		b.wait("the rows sorted by name, descending", `(() => { const n = [...document.querySelectorAll("tr[data-task] .c-name")].map(e => e.textContent);
			return n.length >= 6 && n[0] === "stamen.sleep" && n.every((x, i) => i === 0 || n[i-1] >= x); })()`, 10*time.Second)
		b.open("/task/" + failID)
		b.wait("the traceback", textOf(`document.querySelector("pre[data-field=traceback]")`)+`.includes("the disk is full")`, 10*time.Second)
		b.look("task")
		// Retry sends it again, and the page follows the new task.
		b.confirm("retry")
		b.wait("the new task's page", `!location.pathname.endsWith(`+js(failID)+`) && `+textOf(`document.querySelector("[data-field=state]")`)+` === "FAILURE"`, 20*time.Second)
		newID := eval[string](b, textOf(`document.querySelector("[data-field=uuid]")`))
		var info map[string]any
		call(t, "GET", base+"/api/task/info/"+newID, nil, &info)
		if newID == failID || info["name"] != "stamen.fail" || info["args"] != "('the disk is full',)" {
			t.Errorf("the retry %s of %s: %v", newID, failID, info)
		}
	})

	t.Run("stream drop", func(t *testing.T) {
		b.t = t
		proxy := testcluster.StartProxy(t, srv.Listener.Addr().String())
		origin := "http://" + proxy.Addr()
		pb := newBrowser(t, 2*time.Minute, origin, origin)
		pb.open("/tasks")
		pb.wait("the live stream", `(document.querySelector("span.live") || {}).textContent === "Live" && document.querySelector("table[aria-label=Tasks]")`, 15*time.Second)
		proxy.Cut()
		pb.wait("the banner saying the stream dropped", textOf(`document.querySelector(".banner")`)+`.includes("dropped")`, 10*time.Second)
		// A task that runs while the page is cut off from stamen.
		id := send(t, base, "stamen.add", map[string]any{"args": []any{7, 8}})
		testcluster.Eventually(t, 20*time.Second, "the task succeeds", func() bool { return taskState(t, base, id) == "SUCCESS" })
		proxy.Start()
		pb.wait("the page back live, caught up", `!document.querySelector(".banner") && (document.querySelector("span.live") || {}).textContent === "Live" && `+
			sel("data-task", id)+` && `+sel("data-task", id)+`.dataset.state === "SUCCESS"`, 20*time.Second)
		pb.safe("the page after the drop")
	})

	var failedID string
	t.Run("hostile task from a worker", func(t *testing.T) {
		b.t = t
		failedID = send(t, base, "stamen.echo_fail", map[string]any{"args": []any{hostile}, "kwargs": map[string]any{"k": hostile}})
		testcluster.Eventually(t, 20*time.Second, "the task fails", func() bool { return taskState(t, base, failedID) == "FAILURE" })
		b.open("/task/" + failedID)
		b.wait("the traceback", textOf(`document.querySelector("pre[data-field=traceback]")`)+`.includes("ValueError")`, 15*time.Second)
		for _, field := range []string{"args", "kwargs", "exception", "traceback"} {
			got := eval[string](b, textOf(`document.querySelector("pre[data-field=`+field+`]")`))
			if !strings.Contains(got, hostileImg) || !strings.Contains(got, hostileScript) || !strings.Contains(got, hostileSVG) {
				t.Errorf("%s shown %q, want the hostile string as text", field, got)
			}
		}
		if got := eval[string](b, textOf(`document.querySelector("[data-field=worker]")`)); got != w.Name {
			t.Errorf("worker shown %q, want %s", got, w.Name)
		}
		b.safe("task page")
		b.open("/tasks?state=FAILURE")
		b.wait("the failed task's row", sel("data-task", failedID), 10*time.Second)
		if got := eval[string](b, textOf(sel("data-task", failedID, ".c-args"))); !strings.Contains(got, hostile) {
			t.Errorf("args cell %q", got)
		}
		b.safe("tasks page with hostile args")
	})

	t.Run("hostile events", func(t *testing.T) {
		b.t = t
		rdb := redis.NewClient(&redis.Options{Addr: testcluster.RedisAddr(), DB: db})
		defer rdb.Close()
		host := hostileImg + "@" + hostileScript
		id := "hostile-" + fmt.Sprint(time.Now().UnixNano())
		id2 := id + "-ok"
		now := float64(time.Now().UnixMicro()) / 1e6
		common := func(typ, uuid string) map[string]any {
			return map[string]any{"type": typ, "uuid": uuid, "hostname": host, "timestamp": now, "clock": 1, "pid": 1, "utcoffset": 0}
		}
		hb := map[string]any{"type": "worker-heartbeat", "hostname": host, "timestamp": now, "clock": 1, "freq": 60.0, "active": 0, "processed": 1,
			"loadavg": []float64{0.1, 0.2, 0.3}, "sw_ident": hostile, "sw_ver": hostile, "sw_sys": hostile, "utcoffset": 0, "pid": 1}
		recv := common("task-received", id)
		recv["name"], recv["args"], recv["kwargs"], recv["retries"] = hostile, hostile, hostile, 0
		recv["exchange"], recv["routing_key"], recv["eta"], recv["expires"] = hostile, hostile, hostile, hostile
		failed := common("task-failed", id)
		failed["exception"], failed["traceback"] = hostile, hostile
		recv2 := common("task-received", id2)
		recv2["name"], recv2["args"], recv2["kwargs"] = hostile, hostile, hostile
		ok := common("task-succeeded", id2)
		ok["result"], ok["runtime"] = hostile, 0.5
		env := testcluster.EventsEnvelope(host, id, hb, recv, failed, recv2, ok)
		testcluster.PublishUntil(t, rdb, fmt.Sprintf("/%d.celeryev/task.multi", db), env, func() bool {
			return taskState(t, base, id) == "FAILURE" && taskState(t, base, id2) == "SUCCESS"
		})

		b.open("/task/" + id)
		b.wait("the hostile task", textOf(`document.querySelector("pre[data-field=traceback]")`)+` === `+js(hostile), 10*time.Second)
		for _, f := range []string{"[data-field=name]", "pre[data-field=args]", "pre[data-field=kwargs]", "pre[data-field=exception]", "[data-field=worker]", "[data-field=exchange]", "[data-field=routing_key]", "[data-field=eta]", "[data-field=expires]"} {
			want := hostile
			if f == "[data-field=worker]" {
				want = host
			}
			if got := eval[string](b, textOf(`document.querySelector("`+f+`")`)); got != want {
				t.Errorf("%s shown %q, want %q", f, got, want)
			}
		}
		b.safe("task page of hostile events")
		b.open("/task/" + id2)
		b.wait("the hostile task ok", `document.querySelector("[data-field=state]")`, 10*time.Second)
		if got := eval[string](b, textOf(`document.querySelector("pre[data-field=result]")`)); got != hostile {
			t.Errorf("result shown %q, want %q", got, hostile)
		}
		b.safe("task page of a hostile result")

		b.open("/tasks")
		b.wait("the hostile row", sel("data-task", id), 10*time.Second)
		eval[bool](b, `(document.querySelector("details.chooser").open = true, true)`)
		// Every column shown.
		for _, c := range []string{"exchange", "routing_key", "revoked", "exception", "expires", "eta", "retries"} {
			b.click(fmt.Sprintf(`details.chooser input[value=%q]`, c))
		}
		b.wait("17 columns", `document.querySelectorAll("table[aria-label=Tasks] thead th:not(.sel)").length === 17`, 5*time.Second)
		for _, c := range []string{"name", "args", "kwargs", "worker", "exchange", "routing_key", "exception", "expires", "eta"} {
			want := hostile
			if c == "worker" {
				want = host
			}
			if got := eval[string](b, textOf(sel("data-task", id, ".c-"+c))); got != want {
				t.Errorf("column %s shown %q, want %q", c, got, want)
			}
		}
		b.safe("tasks page of hostile events")
		// The chooser is remembered.
		b.open("/tasks")
		b.wait("17 columns after a reload", `document.querySelectorAll("table[aria-label=Tasks] thead th:not(.sel)").length === 17`, 10*time.Second)
		eval[bool](b, `(localStorage.removeItem("stamen.tasks.columns"), true)`)

		b.open("/")
		b.wait("the hostile worker", sel("data-worker", host), 10*time.Second)
		if got := eval[string](b, textOf(sel("data-worker", host, "a"))); got != host {
			t.Errorf("worker name shown %q", got)
		}
		b.safe("workers page with a hostile worker")
		eval[bool](b, `(`+sel("data-worker", host, "a")+`.click(), true)`)
		b.wait("the hostile worker's page", textOf(`document.querySelector("h1")`)+`.includes(`+js(host)+`)`, 10*time.Second)
		b.safe("the hostile worker's page")
	})

	t.Run("pool grow", func(t *testing.T) {
		b.t = t
		b.open("/worker/" + w.Name)
		b.wait("the pool size", textOf(`document.querySelector("[data-pool-size]")`)+` === "1"`, 15*time.Second)
		b.look("worker")
		b.click("[data-action=grow]")
		if a := b.answer(); !strings.Contains(a, "pool will grow") && !strings.Contains(strings.ToLower(a), "grow") {
			t.Errorf("answer %q", a)
		}
		testcluster.Eventually(t, 15*time.Second, "the worker's pool grows to 2", func() bool { return poolSize(t, base, w.Name) == 2 })
		b.wait("the new pool size shown", textOf(`document.querySelector("[data-pool-size]")`)+` === "2"`, 10*time.Second)
		b.safe("worker page")

		// A command the worker refuses: its answer shows in place.
		b.open("/worker/" + w.Name)
		b.click("[data-action=autoscale]")
		b.wait("the worker's refusal", textOf(`document.querySelector(".error")`)+`.toLowerCase().includes("autoscale")`, 20*time.Second)

		b.open("/worker/" + w.Name + "?tab=limits")
		b.wait("the limits tab", `document.querySelector("select[name=task] option[value='stamen.add']")`, 15*time.Second)
		eval[bool](b, `(() => { const s = document.querySelector("select[name=task]"); s.value = "stamen.add"; s.dispatchEvent(new Event("change", {bubbles: true})); return true; })()`)
		b.setValue("input[name=rate]", "10/m")
		b.click("[data-action=rate-limit]")
		if a := b.answer(); !strings.Contains(a, "rate limit") {
			t.Errorf("rate-limit answer %q", a)
		}
		b.open("/worker/" + w.Name + "?tab=limits")
		b.wait("the limits tab", `document.querySelector("select[name=task] option[value='stamen.add']")`, 15*time.Second)
		eval[bool](b, `(() => { const s = document.querySelector("select[name=task]"); s.value = "stamen.add"; s.dispatchEvent(new Event("change", {bubbles: true})); return true; })()`)
		b.setValue("input[name=soft]", "10")
		b.setValue("input[name=hard]", "20")
		b.click("[data-action=timeout]")
		if a := b.answer(); !strings.Contains(a, "time limits") {
			t.Errorf("time-limit answer %q", a)
		}
		b.safe("limits tab")
	})

	t.Run("consumers and queues", func(t *testing.T) {
		b.t = t
		const q = "dash-q"
		b.open("/worker/" + w.Name + "?tab=queues")
		b.wait("the queues tab", sel("data-queue", "celery"), 15*time.Second)
		b.setValue("input[name=queue]", q)
		b.click("[data-action=add-consumer]")
		if a := b.answer(); !strings.Contains(a, q) {
			t.Errorf("add-consumer answer %q", a)
		}
		testcluster.Eventually(t, 15*time.Second, "the worker consumes "+q, func() bool { return consumes(t, base, w.Name, q) })
		b.wait("the new queue listed", sel("data-queue", q), 10*time.Second)
		id := send(t, base, "stamen.add", map[string]any{"args": []any{2, 3}, "queue": q})
		testcluster.Eventually(t, 20*time.Second, "the worker runs the task sent to "+q, func() bool { return taskState(t, base, id) == "SUCCESS" })

		b.click(fmt.Sprintf(`[data-queue=%s] [data-action=cancel-consumer]`, js(q)))
		b.answer()
		testcluster.Eventually(t, 15*time.Second, "the worker stops consuming "+q, func() bool { return !consumes(t, base, w.Name, q) })
		for range 3 {
			send(t, base, "stamen.add", map[string]any{"args": []any{1, 1}, "queue": q})
		}
		b.open("/queues")
		b.wait("3 messages in "+q, textOf(sel("data-queue", q, "[data-messages]"))+` === "3"`, 15*time.Second)
		if got := eval[string](b, textOf(sel("data-queue", "celery", "td:nth-child(3)"))); !strings.Contains(got, w.Name) {
			t.Errorf("consumers of celery shown %q, want %s", got, w.Name)
		}
		b.look("queues")
		b.click(fmt.Sprintf(`[data-queue=%s] [data-action=purge]`, js(q)))
		b.wait("the confirmation", `document.querySelector("dialog[open]")`, 5*time.Second)
		question := eval[string](b, `document.querySelector("dialog[open] p").textContent`)
		if !strings.Contains(question, q) || !strings.Contains(question, "3 messages") {
			t.Errorf("the purge confirmation says %q, want the queue and the count", question)
		}
		b.click(`dialog[open] [data-confirm=purge]`)
		if a := b.answer(); a != "Purged 3 messages from "+q {
			t.Errorf("purge answer %q", a)
		}
		b.wait("0 messages", textOf(sel("data-queue", q, "[data-messages]"))+` === "0"`, 10*time.Second)
		b.safe("queues page")
	})

	t.Run("revoke", func(t *testing.T) {
		b.t = t
		id := send(t, base, "stamen.add", map[string]any{"args": []any{4, 4}, "countdown": 3})
		b.open("/task/" + id)
		b.wait("the task received", textOf(`document.querySelector("[data-field=state]")`)+` === "RECEIVED"`, 15*time.Second)
		if eval[bool](b, `!!document.querySelector("[data-action=terminate], [data-action=retry]")`) {
			t.Error("terminate or retry offered for a task not started")
		}
		question := b.confirm("revoke")
		if !strings.Contains(question, id) {
			t.Errorf("the revoke confirmation %q does not name the task", question)
		}
		if a := b.answer(); !strings.Contains(strings.ToLower(a), "revok") {
			t.Errorf("revoke answer %q", a)
		}
		b.wait("the task revoked", textOf(`document.querySelector("[data-field=state]")`)+` === "REVOKED"`, 20*time.Second)
		// The worker discards it when its countdown ends: it never runs.
		var info map[string]any
		testcluster.Eventually(t, 15*time.Second, "the worker's task-revoked event", func() bool {
			call(t, "GET", base+"/api/task/info/"+id, nil, &info)
			return info["state"] == "REVOKED" && info["revoked"] != nil
		})
		time.Sleep(time.Second) // a success would come right after: give it the chance to show
		call(t, "GET", base+"/api/task/info/"+id, nil, &info)
		if info["state"] != "REVOKED" || info["started"] != nil || info["succeeded"] != nil {
			t.Errorf("the revoked task ran: %v", info)
		}
		b.wait("retry offered for the revoked task", `document.querySelector("[data-action=retry]")`, 5*time.Second)
	})

	t.Run("settings", func(t *testing.T) {
		b.t = t
		b.open("/settings")
		b.click(`input[value=utc]`)
		b.click(`input[value=dark]`)
		if got := eval[string](b, `document.documentElement.dataset.theme + " " + localStorage.getItem("stamen.tz")`); got != "dark utc" {
			t.Errorf("theme and zone %q", got)
		}
		b.click(`input[value=system]`)
		// The system theme follows the browser's.
		for dark, want := range map[bool]string{true: "rgb(15, 23, 42)", false: "rgb(255, 255, 255)"} {
			b.emulateDark(dark)
			if got := eval[string](b, `getComputedStyle(document.body).backgroundColor`); got != want {
				t.Errorf("system theme, dark %v: background %s, want %s", dark, got, want)
			}
		}
		b.look("settings")
		b.open("/task/" + failedID)
		b.wait("a time in UTC", `[...document.querySelectorAll("time")].some(e => e.textContent.endsWith(" UTC"))`, 10*time.Second)
		b.click(`a[href$="/settings"]`)
		b.click(`input[value=relative]`)
		b.click(`input[value=local]`)
		b.open("/task/" + failedID)
		b.wait("a relative time", `[...document.querySelectorAll("time")].some(e => e.textContent.endsWith(" ago"))`, 10*time.Second)
	})

	t.Run("url_prefix and proxy", func(t *testing.T) {
		b.t = t
		_, prefixed := startStamen(t, app.Config{BrokerURL: broker, URLPrefix: "flower"})
		proxy := pathProxy(t, "/ops/stamen", prefixed.URL+"/flower")
		// This stamen has seen only the tasks sent since it started.
		id := send(t, prefixed.URL+"/flower", "stamen.add", map[string]any{"args": []any{5, 6}})
		testcluster.Eventually(t, 20*time.Second, "the task succeeds", func() bool { return taskState(t, prefixed.URL+"/flower", id) == "SUCCESS" })
		for _, root := range []string{prefixed.URL + "/flower", proxy.URL + "/ops/stamen"} {
			pb := newBrowser(t, 2*time.Minute, root, prefixed.URL, proxy.URL)
			pb.open("/")
			pb.wait("the worker at "+root, sel("data-worker", w.Name), 20*time.Second)
			pb.click(`nav a[href$="/tasks"]`)
			pb.wait("the tasks page", `location.pathname.endsWith("/tasks") && `+sel("data-task", id), 15*time.Second)
			pb.open("/task/" + id)
			pb.wait("the task page", textOf(`document.querySelector("[data-field=name]")`)+` === "stamen.add"`, 15*time.Second)
			pb.wait("the live stream", `(document.querySelector("span.live") || {}).textContent === "Live"`, 10*time.Second)
			pb.open("/worker/" + w.Name + "?tab=system")
			pb.wait("the worker page", `document.querySelector("table[aria-label=System]")`, 15*time.Second)
			if got := pb.foreignRequests(); len(got) > 0 {
				t.Errorf("the page at %s asked other hosts: %q", root, got)
			}
			pb.safe(root)
			checkCSP(t, root, "/", "/tasks", "/task/"+id, "/worker/"+w.Name, "/queues", "/settings", "/no/such/page")
		}
	})

	t.Run("shutdown", func(t *testing.T) {
		b.t = t
		b.open("/worker/" + w.Name)
		b.wait("the worker online", textOf(`document.querySelector("[data-status]")`)+` === "Online"`, 15*time.Second)
		b.confirm("shutdown")
		b.answer()
		testcluster.Eventually(t, 30*time.Second, "the worker process exits", func() bool { return !w.Alive() })
		b.wait("the worker shown offline", textOf(`document.querySelector("[data-status]")`)+` === "Offline"`, 10*time.Second)
	})

	b.t = t
	if got := b.foreignRequests(); len(got) > 0 {
		t.Errorf("the page asked other hosts: %q", got)
	}
	checkCSP(t, base, "/", "/workers", "/tasks?state=FAILURE", "/task/"+failedID, "/worker/"+w.Name, "/queues", "/settings", "/nope")
}
