package ui_test

import (
	"encoding/csv"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/cdproto/input"
	"github.com/chromedp/chromedp"
	"github.com/redis/go-redis/v9"

	"github.com/stamen-dev/stamen/internal/app"
	"github.com/stamen-dev/stamen/internal/auth"
	"github.com/stamen-dev/stamen/internal/testcluster"
)

// setText replaces a text field's value the way typing does, so that the
// page's input handler sees it.
func setText(b *browser, selector, value string) {
	b.t.Helper()
	eval[bool](b, fmt.Sprintf(`(e => { e.value = %s; e.dispatchEvent(new Event("input", {bubbles: true})); return true })(document.querySelector(%s))`, js(value), js(selector)))
}

// TestInsightsFailuresAuditRetry drives the charts, the failures inbox, the
// audit page, the export and the retry with edited arguments against a
// real Celery worker on Redis: the charts' figures, read from the page,
// are what the worker ran, follow a new task live, and a click on a bucket
// (in the chart or its figures) opens its tasks; "Retry all" of a group of
// failed tasks asks with the dry run's count, then makes the worker run
// that many new tasks with the same arguments; "Revoke pending" revokes
// the tasks a worker holds, which it then discards; the audit page lists the
// bulk action with its count; the export link gives the filtered tasks as
// CSV; a retry with edited kwargs runs on the worker with the new kwargs;
// what workers sent stays text.
func TestInsightsFailuresAuditRetry(t *testing.T) {
	testcluster.Require(t)
	testcluster.RequireChromium(t)
	const db = 8
	testcluster.FlushRedisDB(t, db)
	broker := testcluster.RedisURL(db)
	_, srv := startStamen(t, app.Config{BrokerURL: broker})
	base := srv.URL
	w := testcluster.StartWorker(t, testcluster.WorkerOptions{Name: "insights", Broker: broker})
	b := newBrowser(t, 3*time.Minute, base, base)

	const n = 6
	var failed []string
	for i := range n {
		failed = append(failed, send(t, base, "stamen.fail", map[string]any{"args": []any{fmt.Sprintf("%s disk %d", hostile, i)}}))
	}
	echoID := send(t, base, "stamen.echo", map[string]any{"args": []any{1}, "kwargs": map[string]any{"k": "old"}})
	testcluster.Eventually(t, 30*time.Second, "the first tasks done", func() bool {
		for _, id := range append(slices.Clone(failed), echoID) {
			if s := taskState(t, base, id); s != "SUCCESS" && s != "FAILURE" {
				return false
			}
		}
		return true
	})

	t.Run("charts", func(t *testing.T) {
		b.t = t
		// The figures as the page shows them, summed over the buckets.
		total := func(state string) string {
			return fmt.Sprintf(`[...document.querySelectorAll("[data-figures] td[data-count=%s]")].reduce((a, e) => a + Number(e.textContent), 0)`, state)
		}
		b.open("/")
		b.wait("the chart's figures", total("failed")+fmt.Sprintf(` === %d && `, n)+total("succeeded")+` === 1 && `+total("received")+fmt.Sprintf(` === %d`, n+1), 15*time.Second)
		b.wait("the two charts drawn", `document.querySelectorAll("[data-charts] canvas").length >= 2`, 5*time.Second)
		b.look("charts")
		b.safe("workers page with charts")
		// Live: a new task shows in the figures without a reload.
		eval[bool](b, `(window.__sameDocument = true)`)
		live := send(t, base, "stamen.add", map[string]any{"args": []any{2, 3}})
		b.wait("the new task in the figures", total("succeeded")+` === 2`, 15*time.Second)
		if !eval[bool](b, `window.__sameDocument === true`) {
			t.Error("the page reloaded")
		}
		testcluster.Eventually(t, 10*time.Second, "the live task done", func() bool { return taskState(t, base, live) == "SUCCESS" })

		b.open("/tasks?taskname=stamen.fail")
		b.wait("the task name's figures", total("failed")+fmt.Sprintf(` === %d && `, n)+total("succeeded")+` === 0`, 15*time.Second)
		// A bucket's failures open the tasks table on its window and state.
		link := `document.querySelector("[data-figures] td[data-count=failed] a")`
		count := eval[int](b, `Number(`+textOf(link)+`)`)
		eval[bool](b, `(document.querySelector("[data-charts] details").open = true)`)
		b.click(`[data-figures] td[data-count=failed] a`)
		b.wait("the bucket's tasks", `location.search.includes("state=FAILURE") && location.search.includes("from=") && document.querySelectorAll("tr[data-task]").length > 0`, 10*time.Second)
		shown := eval[[]string](b, `[...document.querySelectorAll("tr[data-task]")].map(r => r.dataset.task)`)
		for _, id := range shown {
			if !slices.Contains(failed, id) {
				t.Errorf("the bucket's tasks show %s, not one of the failed tasks", id)
			}
		}
		// The chart counts a failure when it happened, the table filters by
		// reception: they differ only for a task received in the minute before.
		t.Logf("the bucket counts %d failures; its window shows %d tasks", count, len(shown))

		// A click on the chart, at the bucket's time, opens the same window.
		b.open("/tasks?taskname=stamen.fail")
		b.wait("the chart", `document.querySelector("[data-charts] .u-over") && document.querySelector("[data-figures] td[data-count=failed] a")`, 15*time.Second)
		want := eval[string](b, `new URL(document.querySelector("[data-figures] td[data-count=failed] a").href).searchParams.get("from")`)
		xy := eval[[]float64](b, `(() => {
			const c = document.querySelector("[data-charts]");
			c.querySelector(".u-over").scrollIntoView({block: "center"});
			const r = c.querySelector(".u-over").getBoundingClientRect();
			const first = Number(c.dataset.first), last = Number(c.dataset.last);
			const at = Date.parse(document.querySelector("[data-figures] td[data-count=failed] a").closest("tr").dataset.bucket) / 1000;
			// Inside the plot's edges, nearer this bucket than any other.
			return [Math.min(r.right - 2, Math.max(r.left + 2, r.left + r.width * (at - first) / (last - first))), r.top + r.height / 2];
		})()`)
		if err := chromedp.Do(b.ctx, chromedp.MouseEvent(input.DispatchMouseEventTypeMouseMoved, xy[0], xy[1]), chromedp.MouseClickXY(xy[0], xy[1])); err != nil {
			t.Fatal(err)
		}
		b.wait("the tasks of the bucket clicked", `new URLSearchParams(location.search).get("from") === `+js(want)+` && location.search.includes("taskname=stamen.fail")`, 10*time.Second)
		b.safe("tasks page with charts")
	})

	t.Run("failures inbox", func(t *testing.T) {
		b.t = t
		b.open("/failures")
		group := `document.querySelector("[data-group^='stamen.fail ']")`
		b.wait("the group of failures", textOf(group+`?.querySelector("[data-field=count]")`)+fmt.Sprintf(` === "%d"`, n), 15*time.Second)
		if got := eval[string](b, textOf(group+`.querySelector("[data-field=traceback]")`)); !strings.Contains(got, hostileImg) {
			t.Errorf("the traceback shown is %q", got)
		}
		// The group's activity chart, drawn when opened.
		b.click(`[data-group^='stamen.fail '] [data-activity] summary`)
		b.wait("the group's chart", fmt.Sprintf(`[...document.querySelectorAll("[data-activity] [data-figures] td[data-count=failed]")].reduce((a, e) => a + Number(e.textContent), 0) === %d`, n), 15*time.Second)
		b.look("failures")
		b.safe("failures page")

		question := b.confirm("retry-all")
		if !strings.Contains(question, fmt.Sprintf("This will retry %d tasks", n)) {
			t.Errorf("the confirmation says %q", question)
		}
		b.wait("the bulk retry's result", group+fmt.Sprintf(`.querySelector("[data-answer][data-count='%d']")`, n), 20*time.Second)
		newIDs := eval[[]string](b, `[...`+group+`.querySelectorAll("[data-retried]")].map(e => e.dataset.retried)`)
		if len(newIDs) != n {
			t.Fatalf("the result lists %d new ids, want %d: %q", len(newIDs), n, newIDs)
		}
		// The worker ran every new task, with the arguments of the old.
		var want, got []string
		for _, id := range failed {
			var info map[string]any
			call(t, "GET", base+"/api/task/info/"+id, nil, &info)
			want = append(want, fmt.Sprint(info["args"]))
		}
		testcluster.Eventually(t, 30*time.Second, "the worker to run the retried tasks", func() bool {
			for _, id := range newIDs {
				if taskState(t, base, id) != "FAILURE" {
					return false
				}
			}
			return true
		})
		for _, id := range newIDs {
			var info map[string]any
			call(t, "GET", base+"/api/task/info/"+id, nil, &info)
			if info["name"] != "stamen.fail" || info["worker"] == nil {
				t.Errorf("retried task %s: %v", id, info)
			}
			got = append(got, fmt.Sprint(info["args"]))
		}
		slices.Sort(want)
		slices.Sort(got)
		if !slices.Equal(want, got) {
			t.Errorf("the retried tasks ran with args %q, want %q", got, want)
		}
		b.safe("failures page after the retry")
	})

	t.Run("revoke pending", func(t *testing.T) {
		b.t = t
		// Two tasks the worker (one process) holds while it sleeps: waiting.
		send(t, base, "stamen.sleep", map[string]any{"args": []any{3}})
		var waiting []string
		for i := range 2 {
			waiting = append(waiting, send(t, base, "stamen.fail", map[string]any{"args": []any{fmt.Sprint("waiting ", i)}}))
		}
		testcluster.Eventually(t, 10*time.Second, "the tasks received", func() bool {
			return taskState(t, base, waiting[0]) == "RECEIVED" && taskState(t, base, waiting[1]) == "RECEIVED"
		})
		b.open("/failures")
		group := `document.querySelector("[data-group^='stamen.fail ']")`
		b.wait("the group", group+`?.querySelector("[data-action=revoke-pending]")`, 15*time.Second)
		if question := b.confirm("revoke-pending"); !strings.Contains(question, "This will revoke 2 tasks") {
			t.Errorf("the confirmation says %q", question)
		}
		b.wait("the bulk revoke's result", group+`.querySelector("[data-answer][data-count='2']")`, 20*time.Second)
		// The worker holds both ids as revoked, and discards both when their
		// turn comes.
		revoked, _ := workerInfo(t, base, w.Name)["revoked"].([]any)
		if !slices.Contains(revoked, any(waiting[0])) || !slices.Contains(revoked, any(waiting[1])) {
			t.Errorf("the worker's revoked ids are %v, want %q", revoked, waiting)
		}
		testcluster.Eventually(t, 15*time.Second, "the worker to discard the revoked tasks", func() bool {
			return taskState(t, base, waiting[0]) == "REVOKED" && taskState(t, base, waiting[1]) == "REVOKED"
		})
	})

	t.Run("audit", func(t *testing.T) {
		b.t = t
		b.open("/audit")
		row := fmt.Sprintf(`[...document.querySelectorAll("tr[data-operation=retryTasks]")].find(r => r.querySelector("[data-field=count]").textContent === "%d" && !/"dry_run":(true|"true")/.test(r.textContent))`, n)
		b.wait("the bulk retry in the audit log", row, 15*time.Second)
		b.look("audit")
		b.safe("audit page")
	})

	t.Run("export", func(t *testing.T) {
		b.t = t
		b.open("/tasks?taskname=stamen.fail&state=FAILURE")
		b.wait("the failed tasks", fmt.Sprintf(`document.querySelectorAll("tr[data-task]").length === %d`, 2*n), 15*time.Second)
		u := eval[string](b, `document.querySelector("a[data-format=csv]").href`)
		resp, err := http.Get(u)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		rows, err := csv.NewReader(resp.Body).ReadAll()
		if err != nil || len(rows) != 2*n+1 {
			t.Fatalf("the export %s: %d rows (%v), want a header and %d", u, len(rows), err, 2*n)
		}
		name := slices.Index(rows[0], "name")
		for _, r := range rows[1:] {
			if name < 0 || r[name] != "stamen.fail" {
				t.Errorf("the export has %q (header %q)", r, rows[0])
			}
		}
	})

	t.Run("retry with edited kwargs", func(t *testing.T) {
		b.t = t
		b.open("/task/" + echoID)
		b.wait("the editor", `document.querySelector("[data-edited-retry] textarea[name=kwargs]")`, 15*time.Second)
		b.click("[data-edited-retry] summary")
		if got := eval[string](b, `document.querySelector("textarea[name=kwargs]").value`); got != `{"k":"old"}` {
			t.Errorf("the kwargs editor starts with %q", got)
		}
		setText(b, "textarea[name=kwargs]", `{"k": "new"`)
		b.click("[data-action=retry-edited]")
		b.wait("the inline error", textOf(`document.querySelector("[data-invalid]")`)+`.startsWith("Kwargs is not valid JSON")`, 5*time.Second)
		setText(b, "textarea[name=kwargs]", `["not", "an object"]`)
		b.click("[data-action=retry-edited]")
		b.wait("the type error", textOf(`document.querySelector("[data-invalid]")`)+`.startsWith("Kwargs must be a JSON object")`, 5*time.Second)
		b.look("retry-edited")
		setText(b, "textarea[name=kwargs]", `{"k": "new", "n": 2}`)
		b.click("[data-action=retry-edited]")
		b.wait("the new task's page", textOf(`document.querySelector("[data-field=uuid]")`)+` !== `+js(echoID)+` && `+textOf(`document.querySelector("[data-field=state]")`)+` === "SUCCESS"`, 20*time.Second)
		newID := eval[string](b, textOf(`document.querySelector("[data-field=uuid]")`))
		var info map[string]any
		testcluster.Eventually(t, 10*time.Second, "the edited retry done", func() bool {
			call(t, "GET", base+"/api/task/info/"+newID, nil, &info)
			return info["state"] == "SUCCESS"
		})
		res := fmt.Sprint(info["result"])
		if info["name"] != "stamen.echo" || !strings.Contains(res, `'k': 'new'`) || !strings.Contains(res, `'n': 2`) || !strings.Contains(res, `'args': [1]`) {
			t.Errorf("the edited retry %s ran as %v", newID, info)
		}
		b.safe("task page")
	})
}

// canvasClient sends a chain of three tasks, and a group of four (one of
// which fails) after a first task, and prints their ids as JSON.
const canvasClient = `
import json
from celery import chain, group
from stamen_testapp import app
s = lambda name, *a: app.signature(name, args=a, immutable=True)
c = chain(s("stamen.add", 1, 1), s("stamen.add", 2, 2), s("stamen.add", 3, 3))()
links = [c.parent.parent.id, c.parent.id, c.id]
g = chain(s("stamen.add", 4, 4), group(s("stamen.add", 5, 5), s("stamen.fail", "member"), s("stamen.add", 6, 6), s("stamen.add", 7, 7)))()
print(json.dumps({"chain": links, "head": g.parent.id, "group": [r.id for r in g.results]}))
`

// TestInsightsCanvas shows a chain of three tasks and a group of four, run
// by a real worker, as their graph on a task's page, each node in the
// state the worker left it.
func TestInsightsCanvas(t *testing.T) {
	testcluster.Require(t)
	testcluster.RequireChromium(t)
	const db = 7
	testcluster.FlushRedisDB(t, db)
	broker := testcluster.RedisURL(db)
	_, srv := startStamen(t, app.Config{BrokerURL: broker})
	base := srv.URL
	w := testcluster.StartWorker(t, testcluster.WorkerOptions{Name: "canvas", Broker: broker})
	b := newBrowser(t, 2*time.Minute, base, base)
	var ids struct {
		Chain []string
		Head  string
		Group []string
	}
	out := testcluster.RunClient(t, testcluster.ClientOptions{Broker: broker, Backend: w.Backend}, canvasClient)
	if err := json.Unmarshal(out, &ids); err != nil || len(ids.Chain) != 3 || len(ids.Group) != 4 {
		t.Fatalf("the client printed %s (%v)", out, err)
	}
	all := append(append(slices.Clone(ids.Chain), ids.Head), ids.Group...)
	testcluster.Eventually(t, 30*time.Second, "the canvas run", func() bool {
		for _, id := range all {
			if s := taskState(t, base, id); s != "SUCCESS" && s != "FAILURE" {
				return false
			}
		}
		return true
	})
	// parentNode is the node drawn above id's, as JavaScript.
	parentNode := func(id string) string {
		return `(document.querySelector('[data-graph] [data-node=' + ` + jsAttr(id) + ` + ']').closest("li").parentElement.closest("li")?.querySelector("[data-node]")?.dataset.node || "")`
	}
	check := func(open string, nodes []string, parent map[string]string) {
		t.Helper()
		b.open("/task/" + open)
		b.wait("the graph", fmt.Sprintf(`document.querySelectorAll("[data-graph] [data-node]").length === %d`, len(nodes)), 15*time.Second)
		for _, id := range nodes {
			shown := eval[string](b, `document.querySelector('[data-graph] [data-node=' + `+jsAttr(id)+` + ']').dataset.state`)
			if want := taskState(t, base, id); shown != want {
				t.Errorf("node %s shown %q, the task is %q", id, shown, want)
			}
			if got := eval[string](b, parentNode(id)); got != parent[id] {
				t.Errorf("node %s drawn under %q, want %q", id, got, parent[id])
			}
		}
	}
	check(ids.Chain[2], ids.Chain, map[string]string{ids.Chain[0]: "", ids.Chain[1]: ids.Chain[0], ids.Chain[2]: ids.Chain[1]})
	eval[bool](b, `(document.querySelector("[data-graph]").scrollIntoView(), true)`)
	b.look("canvas-chain")
	groupParents := map[string]string{ids.Head: ""}
	for _, id := range ids.Group {
		groupParents[id] = ids.Head
	}
	check(ids.Group[1], append([]string{ids.Head}, ids.Group...), groupParents)
	if got := taskState(t, base, ids.Group[1]); got != "FAILURE" {
		t.Errorf("the failing member is %s", got)
	}
	eval[bool](b, `(document.querySelector("[data-graph]").scrollIntoView(), true)`)
	b.look("canvas-group")
	b.safe("task canvas")
}

// TestInsightsRoles: the failures inbox and the tasks table (its row
// checkboxes and bulk bar) offer their bulk actions to an operator only,
// not to a viewer nor under --read_only, and the audit page is an
// operator's.
func TestInsightsRoles(t *testing.T) {
	testcluster.Require(t)
	testcluster.RequireChromium(t)
	const db = 6
	testcluster.FlushRedisDB(t, db)
	broker := testcluster.RedisURL(db)
	var authn auth.Authenticator
	const token = "insights-operator-token-0123456789"
	for _, err := range []error{authn.AddBasic("viewer:viewer-secret", auth.Viewer), authn.AddBasic("op:op-secret", auth.Operator), authn.AddTokens(token, auth.Operator)} {
		if err != nil {
			t.Fatal(err)
		}
	}
	_, withAuth := startStamen(t, app.Config{BrokerURL: broker, Auth: &authn})
	_, readOnly := startStamen(t, app.Config{BrokerURL: broker, ReadOnly: true})

	// A failed task, from events.
	const host = "ghost@insights"
	id := fmt.Sprintf("insights-%d", time.Now().UnixNano())
	now := float64(time.Now().UnixMicro()) / 1e6
	recv := map[string]any{"type": "task-received", "uuid": id, "hostname": host, "timestamp": now, "clock": 1, "pid": 1, "utcoffset": 0,
		"name": "stamen.fail", "args": "('x',)", "kwargs": "{}", "retries": 0}
	fail := map[string]any{"type": "task-failed", "uuid": id, "hostname": host, "timestamp": now + 0.01, "clock": 2, "pid": 1, "utcoffset": 0,
		"exception": "ValueError('x')", "traceback": "Traceback (most recent call last):\nValueError: x"}
	rdb := redis.NewClient(&redis.Options{Addr: testcluster.RedisAddr(), DB: db})
	defer rdb.Close()
	testcluster.PublishUntil(t, rdb, fmt.Sprintf("/%d.celeryev/task.multi", db), testcluster.EventsEnvelope(host, id, recv, fail), func() bool {
		return stateAs(t, withAuth.URL, id, "op", "op-secret") == "FAILURE" && stateAs(t, readOnly.URL, id, "", "") == "FAILURE"
	})

	check := func(t *testing.T, b *browser, operator, write bool, who string) {
		b.t = t
		t.Helper()
		b.open("/failures")
		b.wait("the group", `document.querySelector("[data-group='stamen.fail ValueError']") && document.querySelector("[data-session]")`, 15*time.Second)
		got := eval[[]string](b, controls)
		if write && !strings.Contains(strings.Join(got, " "), `data-action="retry-all"`) {
			t.Errorf("%s sees no retry-all: %q", who, got)
		}
		if !write && len(got) > 0 {
			t.Errorf("%s sees controls %q", who, got)
		}
		if nav := eval[bool](b, `!!document.querySelector("nav a[href$='/audit']")`); nav != operator {
			t.Errorf("%s: the audit link shown: %v", who, nav)
		}
		b.open("/audit")
		b.wait("the audit page", `document.querySelector("h1") && document.querySelector("[data-session]")`, 15*time.Second)
		if form := eval[bool](b, `!!document.querySelector("input[name=operation]")`); form != operator {
			t.Errorf("%s: the audit page shows its filters: %v%s", who, form, b.pageText())
		}
		// The tasks table: row checkboxes and the bulk bar for operators
		// only.
		b.open("/tasks?state=FAILURE")
		b.wait("the failed task's row", sel("data-task", id)+` && document.querySelector("[data-session]")`, 15*time.Second)
		boxes := eval[int](b, `document.querySelectorAll("tr input[type=checkbox]").length`)
		bar := eval[bool](b, `!!document.querySelector("[data-bulk], [data-action^=bulk-], [data-action=select-matching]")`)
		if write && (boxes < 2 || !bar) {
			t.Errorf("%s: the tasks table shows %d checkboxes, bulk bar %v; want a row's and the page's, and the bar", who, boxes, bar)
		}
		if !write && (boxes > 0 || bar) {
			t.Errorf("%s: the tasks table shows %d checkboxes, bulk bar %v; want none", who, boxes, bar)
		}
	}
	t.Run("operator", func(t *testing.T) {
		b := newBrowser(t, time.Minute, withAuth.URL, withAuth.URL)
		b.answerLogin(withAuth.URL+"/api/*", "op", "op-secret")
		check(t, b, true, true, "an operator")
	})
	t.Run("viewer", func(t *testing.T) {
		b := newBrowser(t, time.Minute, withAuth.URL, withAuth.URL)
		b.answerLogin(withAuth.URL+"/api/*", "viewer", "viewer-secret")
		check(t, b, false, false, "a viewer")
	})
	t.Run("read_only", func(t *testing.T) {
		b := newBrowser(t, time.Minute, readOnly.URL, readOnly.URL)
		check(t, b, true, false, "--read_only")
	})
	// A plain link cannot carry a bearer token: the export is fetched with
	// it and saved from a Blob.
	t.Run("bearer export", func(t *testing.T) {
		b := newBrowser(t, time.Minute, withAuth.URL, withAuth.URL)
		b.answerLogin(withAuth.URL+"/api/*", "", "") // cancels the browser's prompt
		b.open("/tasks?state=FAILURE")
		b.wait("the sign-in form", `document.querySelector("input[name=token]")`, 15*time.Second)
		b.setValue("input[name=token]", token)
		b.click(".signin button[type=submit]")
		b.wait("the failed task", sel("data-task", id), 15*time.Second)
		eval[bool](b, `(() => { const o = URL.createObjectURL; URL.createObjectURL = (blob) => { blob.text().then((t) => (window.__export = t)); return o.call(URL, blob); }; return true; })()`)
		b.click("a[data-format=csv]")
		b.wait("the exported file", `typeof window.__export === "string"`, 15*time.Second)
		got := eval[string](b, `window.__export`)
		if header, _, _ := strings.Cut(got, "\n"); !strings.Contains(header, "name") || !strings.Contains(got, id) {
			t.Errorf("the export with the token: %q", got)
		}
		if p := eval[string](b, `location.pathname`); !strings.HasSuffix(p, "/tasks") {
			t.Errorf("the page went to %s", p)
		}
	})
}
