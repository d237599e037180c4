package ui_test

import (
	"encoding/json"
	"fmt"
	"net/url"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/stamen-dev/stamen/internal/app"
	"github.com/stamen-dev/stamen/internal/testcluster"
)

// TestTasksBulk drives the tasks table's selection and bulk actions against
// a real Celery worker on Redis. Three of five failed tasks, ticked in the
// table (one with the keyboard), stay ticked while a new task reloads the
// rows; Retry asks with a dry run's count of 3, and the worker then runs
// exactly three new tasks with the arguments of those three, whose ids the
// page lists and links. A new filter clears the selection. "Everything
// matching this filter" over tasks queued for a queue no worker consumes
// revokes them all: once the worker consumes that queue it discards each
// (REVOKED) and runs none.
func TestTasksBulk(t *testing.T) {
	testcluster.Require(t)
	testcluster.RequireChromium(t)
	const db = 13
	testcluster.FlushRedisDB(t, db)
	broker := testcluster.RedisURL(db)
	_, srv := startStamen(t, app.Config{BrokerURL: broker})
	base := srv.URL
	w := testcluster.StartWorker(t, testcluster.WorkerOptions{Name: "bulk", Broker: broker})
	b := newBrowser(t, 3*time.Minute, base, base)

	var failed []string
	for i := range 5 {
		failed = append(failed, send(t, base, "stamen.fail", map[string]any{"args": []any{fmt.Sprintf("%s bulk %d", hostile, i)}}))
	}
	testcluster.Eventually(t, 30*time.Second, "the five tasks failed", func() bool {
		for _, id := range failed {
			if taskState(t, base, id) != "FAILURE" {
				return false
			}
		}
		return true
	})
	argsOf := func(id string) string {
		var info map[string]any
		call(t, "GET", base+"/api/task/info/"+id, nil, &info)
		return fmt.Sprint(info["args"])
	}
	countFail := func() int {
		var list map[string]any
		call(t, "GET", base+"/api/tasks?taskname=stamen.fail", nil, &list)
		return len(list)
	}

	t.Run("retry selected rows", func(t *testing.T) {
		b.t = t
		b.open("/tasks?taskname=stamen.fail&state=FAILURE")
		b.wait("the failed tasks", `document.querySelectorAll("tr[data-task]").length === 5 && document.querySelector("[data-bulk]")`, 15*time.Second)
		picked := []string{failed[0], failed[2], failed[3]}
		b.click(fmt.Sprintf(`input[data-select=%q]`, picked[0]))
		b.click(fmt.Sprintf(`input[data-select=%q]`, picked[1]))
		// The checkbox is a labelled control a keyboard reaches.
		if label := eval[string](b, fmt.Sprintf(`document.querySelector('input[data-select=%q]').getAttribute("aria-label")`, picked[2])); label != "Select task "+picked[2] {
			t.Errorf("the row's checkbox is labelled %q", label)
		}
		if err := chromedp.Do(b.ctx, chromedp.Focus(fmt.Sprintf(`input[data-select=%q]`, picked[2])), chromedp.KeyEvent(" ")); err != nil {
			t.Fatal(err)
		}
		b.wait("three selected", `document.querySelector("[data-selected='3']")`, 5*time.Second)

		// A new failure reloads the rows live: the ticks stay.
		extra := send(t, base, "stamen.fail", map[string]any{"args": []any{"bulk extra"}})
		b.wait("the new task's row", sel("data-task", extra), 20*time.Second)
		ticked := eval[[]string](b, `[...document.querySelectorAll("input[data-select]:checked")].map(e => e.dataset.select)`)
		slices.Sort(ticked)
		want := slices.Clone(picked)
		slices.Sort(want)
		if !slices.Equal(ticked, want) || !eval[bool](b, `!!document.querySelector("[data-selected='3']")`) {
			t.Fatalf("after a live reload the ticked rows are %q, want %q", ticked, want)
		}
		before := countFail()

		question := b.confirm("bulk-retry")
		if !strings.Contains(question, "This will retry 3 tasks") {
			t.Errorf("the confirmation says %q", question)
		}
		b.wait("the bulk retry's result", `document.querySelector("[data-answer][data-count='3']")`, 20*time.Second)
		newIDs := eval[[]string](b, `[...document.querySelectorAll("[data-answer] [data-retried]")].map(e => e.dataset.retried)`)
		if len(newIDs) != 3 {
			t.Fatalf("the result lists %d new ids, want 3: %q", len(newIDs), newIDs)
		}
		for _, id := range newIDs {
			if !eval[bool](b, fmt.Sprintf(`[...document.querySelectorAll("[data-answer] a")].some(a => a.textContent === %s && new URL(a.href).pathname.endsWith("/task/" + encodeURIComponent(%s)))`, js(id), js(id))) {
				t.Errorf("the new id %s is not linked to its page", id)
			}
		}
		testcluster.Eventually(t, 30*time.Second, "the worker to run the three new tasks", func() bool {
			for _, id := range newIDs {
				if taskState(t, base, id) != "FAILURE" {
					return false
				}
			}
			return true
		})
		var wantArgs, gotArgs []string
		for _, id := range picked {
			wantArgs = append(wantArgs, argsOf(id))
		}
		for _, id := range newIDs {
			var info map[string]any
			call(t, "GET", base+"/api/task/info/"+id, nil, &info)
			if info["name"] != "stamen.fail" || info["worker"] != w.Name {
				t.Errorf("retried task %s: %v", id, info)
			}
			gotArgs = append(gotArgs, fmt.Sprint(info["args"]))
		}
		slices.Sort(wantArgs)
		slices.Sort(gotArgs)
		if !slices.Equal(wantArgs, gotArgs) {
			t.Errorf("the new tasks ran with args %q, want %q", gotArgs, wantArgs)
		}
		// Exactly three: no other task of the name appeared.
		if n := countFail(); n != before+3 {
			t.Errorf("%d stamen.fail tasks after the retry, want %d", n, before+3)
		}
		b.safe("tasks page after the bulk retry")

		// A new filter clears the selection.
		b.click(`[data-select='` + failed[1] + `']`)
		b.wait("one selected", `document.querySelector("[data-selected='1']")`, 5*time.Second)
		b.click(`.chips button:first-child`)
		b.wait("the selection cleared", `document.querySelector("[data-selected='0']") && !location.search.includes("state=")`, 5*time.Second)
	})

	t.Run("revoke everything matching", func(t *testing.T) {
		b.t = t
		queue := fmt.Sprintf("later-%d", time.Now().UnixNano())
		// A Celery client sends them, with task-sent events: pending in
		// the state, queued for a queue nobody consumes yet.
		out := testcluster.RunClient(t, testcluster.ClientOptions{Broker: broker}, `
import json, sys
from stamen_testapp import app
print(json.dumps([app.send_task("stamen.echo", args=(i,), queue=sys.argv[1]).id for i in range(4)]))
app.close()
`, queue)
		var pending []string
		if err := json.Unmarshal(out, &pending); err != nil || len(pending) != 4 {
			t.Fatalf("the client printed %q: %v", out, err)
		}
		testcluster.Eventually(t, 20*time.Second, "the four tasks pending", func() bool {
			for _, id := range pending {
				if taskState(t, base, id) != "PENDING" {
					return false
				}
			}
			return true
		})
		b.open("/tasks?taskname=stamen.echo&state=PENDING")
		b.wait("the pending tasks", `document.querySelectorAll("tr[data-task]").length === 4`, 15*time.Second)
		// The activity charts above the bar may be drawn after the rows,
		// moving the button from under a click already aimed (seen once:
		// nothing selected). Choosing "everything matching" twice is the
		// same as once, so click again until it took.
		const allSelected = `!!document.querySelector("[data-selected=all]") && document.querySelectorAll("input[data-select]:checked").length === 4`
		testcluster.Eventually(t, 10*time.Second, "everything matching selected", func() bool {
			if eval[bool](b, allSelected) {
				return true
			}
			b.click(`[data-action=select-matching]`)
			return false
		})
		question := b.confirm("bulk-revoke")
		if !strings.Contains(question, "This will revoke 4 tasks") {
			t.Errorf("the confirmation says %q", question)
		}
		b.wait("the bulk revoke's result", `document.querySelector("[data-answer][data-count='4']")`, 20*time.Second)
		revoked, _ := workerInfo(t, base, w.Name)["revoked"].([]any)
		for _, id := range pending {
			if !slices.Contains(revoked, any(id)) {
				t.Errorf("the worker's revoked ids %v lack %s", revoked, id)
			}
		}
		// Now the worker consumes the queue: it discards every one.
		call(t, "POST", base+"/api/worker/queue/add-consumer/"+url.PathEscape(w.Name)+"?queue="+url.QueryEscape(queue), nil, nil)
		testcluster.Eventually(t, 30*time.Second, "the worker to discard the revoked tasks", func() bool {
			for _, id := range pending {
				if taskState(t, base, id) != "REVOKED" {
					return false
				}
			}
			return true
		})
		for _, id := range pending {
			var info map[string]any
			call(t, "GET", base+"/api/task/info/"+id, nil, &info)
			if info["started"] != nil || info["succeeded"] != nil {
				t.Errorf("revoked task %s ran: %v", id, info)
			}
		}
	})
}
