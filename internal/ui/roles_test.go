package ui_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/stamen-dev/stamen/internal/app"
	"github.com/stamen-dev/stamen/internal/auth"
	"github.com/stamen-dev/stamen/internal/testcluster"
)

// controls finds, as JavaScript, every control that would change
// something: the buttons and forms of the write operations.
const controls = `[...document.querySelectorAll("[data-action], [data-confirm], input[name=queue], fieldset")].map(e => e.outerHTML.slice(0, 80))
	.concat([...document.querySelectorAll("button")].map(e => e.textContent.trim())
	.filter(t => /^(Revoke|Terminate|Abort|Retry|Purge|Shut down|Restart pool|Grow|Shrink|Autoscale|Add consumer|Cancel consumer|Apply)/.test(t)))`

// TestDashboardRoles: a viewer and --read_only see no control on any page
// where an operator sees them; a bearer-token user signs in, uses the page
// and its live stream, and signs out, the token kept in the tab's
// sessionStorage only.
func TestDashboardRoles(t *testing.T) {
	testcluster.Require(t)
	testcluster.RequireChromium(t)
	const db = 10
	testcluster.FlushRedisDB(t, db)
	broker := testcluster.RedisURL(db)
	const token = "dashboard-operator-token-0123456789"
	var authn auth.Authenticator
	for _, err := range []error{
		authn.AddBasic("viewer:viewer-secret", auth.Viewer),
		authn.AddBasic("op:op-secret", auth.Operator),
		authn.AddTokens(token, auth.Operator),
	} {
		if err != nil {
			t.Fatal(err)
		}
	}
	_, withAuth := startStamen(t, app.Config{BrokerURL: broker, Auth: &authn})
	_, readOnly := startStamen(t, app.Config{BrokerURL: broker, ReadOnly: true})

	// A worker and a task waiting on it, from events: what the pages
	// offer controls for.
	const host = "ghost@roles"
	id := fmt.Sprintf("roles-%d", time.Now().UnixNano())
	now := float64(time.Now().UnixMicro()) / 1e6
	hb := map[string]any{"type": "worker-heartbeat", "hostname": host, "timestamp": now, "clock": 1, "freq": 60.0, "active": 0, "processed": 0, "utcoffset": 0, "pid": 1}
	recv := map[string]any{"type": "task-received", "uuid": id, "hostname": host, "timestamp": now, "clock": 2, "pid": 1, "utcoffset": 0,
		"name": "stamen.add", "args": "(1, 2)", "kwargs": "{}", "retries": 0}
	rdb := redis.NewClient(&redis.Options{Addr: testcluster.RedisAddr(), DB: db})
	defer rdb.Close()
	testcluster.PublishUntil(t, rdb, fmt.Sprintf("/%d.celeryev/task.multi", db), testcluster.EventsEnvelope(host, id, hb, recv), func() bool {
		return stateAs(t, withAuth.URL, id, "op", "op-secret") == "RECEIVED" && stateAs(t, readOnly.URL, id, "", "") == "RECEIVED"
	})

	pages := func(b *browser, want bool, who string) {
		t.Helper()
		for _, p := range []struct{ path, ready, control string }{
			{"/task/" + id, textOf(`document.querySelector("[data-field=state]")`) + ` === "RECEIVED"`, "revoke"},
			{"/worker/" + host, `document.querySelector("h1") && document.querySelector(".tabs")`, "shutdown"},
			{"/queues", `document.querySelector("[data-queue=celery]")`, "purge"},
		} {
			b.open(p.path)
			b.wait(p.path, p.ready+` && document.querySelector("[data-session]")`, 15*time.Second)
			got := eval[[]string](b, controls)
			if want && !strings.Contains(strings.Join(got, " "), `data-action="`+p.control+`"`) {
				t.Errorf("%s: %s sees no %s control: %q%s", who, p.path, p.control, got, b.pageText())
			}
			if !want && len(got) > 0 {
				t.Errorf("%s: %s shows controls %q", who, p.path, got)
			}
		}
	}

	t.Run("operator", func(t *testing.T) {
		b := newBrowser(t, 2*time.Minute, withAuth.URL, withAuth.URL)
		b.answerLogin(withAuth.URL+"/api/*", "op", "op-secret")
		pages(b, true, "an operator")
	})
	t.Run("viewer", func(t *testing.T) {
		b := newBrowser(t, 2*time.Minute, withAuth.URL, withAuth.URL)
		b.answerLogin(withAuth.URL+"/api/*", "viewer", "viewer-secret")
		pages(b, false, "a viewer")
		if got := eval[string](b, textOf(`document.querySelector("[data-session]")`)); !strings.Contains(got, "viewer") {
			t.Errorf("session shown %q", got)
		}
	})
	t.Run("read_only", func(t *testing.T) {
		b := newBrowser(t, 2*time.Minute, readOnly.URL, readOnly.URL)
		pages(b, false, "--read_only")
		if got := eval[string](b, textOf(`document.querySelector("[data-session]")`)); !strings.Contains(got, "read-only") {
			t.Errorf("session shown %q", got)
		}
	})
	t.Run("bearer sign in and out", func(t *testing.T) {
		b := newBrowser(t, 2*time.Minute, withAuth.URL, withAuth.URL)
		b.answerLogin(withAuth.URL+"/api/*", "", "") // cancels the browser's prompt
		b.open("/task/" + id)
		b.wait("the sign-in form", `document.querySelector("input[name=token]")`, 15*time.Second)
		b.look("signin")
		b.setValue("input[name=token]", token)
		b.click(".signin button[type=submit]")
		b.wait("signed in", textOf(`document.querySelector("[data-session]")`)+`.includes("operator")`, 15*time.Second)
		b.wait("the task page", textOf(`document.querySelector("[data-field=state]")`)+` === "RECEIVED"`, 15*time.Second)
		b.wait("the live stream with the token", `(document.querySelector("span.live") || {}).textContent === "Live"`, 15*time.Second)
		if got := eval[string](b, `sessionStorage.getItem("stamen.token")`); got != token {
			t.Errorf("sessionStorage holds %q", got)
		}
		if got := eval[string](b, `JSON.stringify(localStorage) + document.cookie + location.href`); strings.Contains(got, token) {
			t.Errorf("the token is outside sessionStorage: %s", got)
		}
		// Another page of the tab keeps the session.
		b.open("/worker/" + host)
		b.wait("the worker page's controls", `document.querySelector("[data-action=shutdown]")`, 15*time.Second)
		b.click(`.who button`)
		b.wait("signed out", `document.querySelector("input[name=token]")`, 15*time.Second)
		if got := eval[bool](b, `sessionStorage.getItem("stamen.token") === null`); !got {
			t.Error("the token stayed in sessionStorage after signing out")
		}
		b.safe("sign in")
		if got := b.foreignRequests(); len(got) > 0 {
			t.Errorf("asked other hosts: %q", got)
		}
	})
}

// stateAs is a task's state, asked with basic credentials when user is
// not empty.
func stateAs(t *testing.T, base, id, user, password string) string {
	t.Helper()
	req, _ := http.NewRequest("GET", base+"/api/task/info/"+id, nil)
	if user != "" {
		req.SetBasicAuth(user, password)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var task struct{ State string }
	_ = json.NewDecoder(resp.Body).Decode(&task)
	return task.State
}
