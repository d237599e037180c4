package main

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/oauth2-proxy/mockoidc"

	"github.com/stamen-dev/stamen/internal/testcluster"
)

// TestOIDCSignInInChromium: in headless Chromium, a person who opens a
// protected page is sent to the OpenID Connect provider, signs in, and
// lands back on the page; the page's own calls act as their role (an
// operator's write is audited under their address, a viewer's is refused);
// scripts cannot read the session cookie; signing out ends it.
func TestOIDCSignInInChromium(t *testing.T) {
	testcluster.SkipIfShort(t, "builds and runs the binary")
	testcluster.RequireChromium(t)
	unsetFlowerOnlyEnv(t)
	p := startIdP(t)
	bin := buildBinary(t)
	base, logs, _ := runStamen(t, bin, signInArgs(t, p, "the-fleet-cookie-secret-0123456789")...)
	browser := newChromium(t, 90*time.Second)

	// fetchStatus calls path from the page, as the dashboard's scripts do.
	fetchStatus := func(method, path string) int {
		t.Helper()
		s, err := chromedp.Run(browser, chromedp.Evaluate[int](
			`fetch(`+jsString(path)+`, {method: `+jsString(method)+`}).then(r => r.status)`, chromedp.EvalAwaitPromise))
		if err != nil {
			t.Fatalf("fetch %s %s: %v", method, path, err)
		}
		return s
	}
	openPage := func(who string) {
		t.Helper()
		if err := chromedp.Do(browser, chromedp.Navigate(base+"/api/workers")); err != nil {
			t.Fatal(err)
		}
		loc, err := chromedp.Run(browser, chromedp.Location())
		if err != nil || loc != base+"/api/workers" {
			t.Fatalf("%s landed on %q (%v)\n%s", who, loc, err, logs.String())
		}
		text, err := chromedp.Run(browser, chromedp.Evaluate[string](`document.body.innerText`))
		if err != nil || !json.Valid([]byte(strings.TrimSpace(text))) {
			t.Fatalf("%s sees %q (%v), not the workers' JSON", who, text, err)
		}
	}

	// openDashboard opens a dashboard page, which sends a person without a
	// session to the provider and back to it, and waits until the page
	// names who is signed in.
	openDashboard := func(who, path, want string) {
		t.Helper()
		if err := chromedp.Do(browser, chromedp.Navigate(base+path)); err != nil {
			t.Fatal(err)
		}
		if loc, err := chromedp.Run(browser, chromedp.Location()); err != nil || loc != base+path {
			t.Fatalf("%s landed on %q (%v), not the dashboard page asked for\n%s", who, loc, err, logs.String())
		}
		if err := chromedp.Do(browser, chromedp.WaitVisible(`[data-session]`)); err != nil {
			t.Fatalf("%s: the dashboard shows no session: %v", who, err)
		}
		shown, err := chromedp.Run(browser, chromedp.Text(`[data-session]`))
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(shown, want) {
			t.Fatalf("%s: the dashboard says %q, want %q", who, shown, want)
		}
		if err := chromedp.Do(browser, chromedp.WaitVisible(`[data-signout]`)); err != nil {
			t.Fatalf("%s: no sign-out link on the dashboard: %v", who, err)
		}
	}

	p.queue("ops@example.com")
	openDashboard("the operator", "/tasks?state=FAILURE", "ops@example.com · operator")
	openPage("the operator")
	if c, err := chromedp.Run(browser, chromedp.Evaluate[string](`document.cookie`)); err != nil || strings.Contains(c, "stamen_session") {
		t.Errorf("scripts read the session cookie: %q %v", c, err)
	}
	if s := fetchStatus(http.MethodPost, "/api/task/revoke/from-chromium"); s != http.StatusOK {
		t.Fatalf("the operator's write: %d", s)
	}
	users, err := chromedp.Run(browser, chromedp.Evaluate[[]string](
		`fetch("/api/audit").then(r => r.json()).then(l => l.records.filter(r => r.path == "/api/task/revoke/from-chromium").map(r => r.user + " " + r.auth))`,
		chromedp.EvalAwaitPromise))
	if err != nil || len(users) != 1 || users[0] != "ops@example.com oidc" {
		t.Fatalf("the audit log of the write names %q (%v)", users, err)
	}
	if err := chromedp.Do(browser, chromedp.Navigate(base+"/logout")); err != nil {
		t.Fatal(err)
	}
	// The page's calls answer 401, without a challenge that would pop up
	// the browser's password dialog.
	if s := fetchStatus(http.MethodGet, "/api/workers"); s != http.StatusUnauthorized {
		t.Fatalf("after signing out: %d", s)
	}
	// Signed out, the page sends the browser to the provider again, which
	// this time asks them to sign in (an error page, where mockoidc would
	// sign in its default user at once).
	p.m.QueueError(&mockoidc.ServerError{Code: http.StatusUnauthorized, Error: "login_required", Description: "sign in again"})
	if err := chromedp.Do(browser, chromedp.Navigate(base+"/api/workers")); err != nil {
		t.Fatal(err)
	}
	if loc, err := chromedp.Run(browser, chromedp.Location()); err != nil || !strings.HasPrefix(loc, p.m.AuthorizationEndpoint()) {
		t.Fatalf("after signing out, the page landed on %q (%v), not the provider", loc, err)
	}

	p.queue("dev@example.com", "staff")
	openDashboard("the viewer", "/queues", "dev@example.com · viewer")
	openPage("the viewer")
	if s := fetchStatus(http.MethodPost, "/api/task/revoke/from-a-viewer"); s != http.StatusForbidden {
		t.Fatalf("the viewer's write: %d", s)
	}
}

// newChromium starts headless Chromium for the test.
func newChromium(t *testing.T, timeout time.Duration) context.Context {
	t.Helper()
	opts := append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(testcluster.Chromium),
		// Tests run as root, where Chromium's sandbox cannot start.
		chromedp.NoSandbox,
	)
	ctx, cancelTimeout := context.WithTimeout(context.Background(), timeout)
	allocCtx, cancelAlloc := chromedp.NewExecAllocator(ctx, opts...)
	browser, cancelBrowser := chromedp.NewContext(allocCtx)
	t.Cleanup(func() {
		cancelBrowser()
		cancelAlloc()
		cancelTimeout()
	})
	return browser
}
