package ui_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/cdproto/emulation"
	"github.com/chromedp/cdproto/fetch"
	"github.com/chromedp/cdproto/network"
	"github.com/chromedp/cdproto/page"
	"github.com/chromedp/chromedp"

	"github.com/stamen-dev/stamen/internal/app"
	"github.com/stamen-dev/stamen/internal/testcluster"
	"github.com/stamen-dev/stamen/internal/ui"
)

// hookScript runs before the page's own scripts in every document: pwn
// records a call, as a hostile string's script would make one, and every
// CSP violation is recorded too.
const hookScript = `window.__ran = []; window.pwn = (w) => window.__ran.push(String(w));
window.__csp = []; document.addEventListener("securitypolicyviolation", (e) => window.__csp.push(e.violatedDirective + " " + e.blockedURI));`

// browser is headless Chromium on the dashboard, with what the tests
// check on every page: requests to other hosts, scripts run by the page's
// data, dialogs opened.
type browser struct {
	t   testing.TB
	ctx context.Context
	// base is the dashboard's root URL, no trailing slash.
	base    string
	mu      sync.Mutex
	foreign []string
	dialogs []string
	origins []string
	pending map[network.RequestID]string
}

func newBrowser(t testing.TB, timeout time.Duration, base string, origins ...string) *browser {
	t.Helper()
	opts := append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(testcluster.Chromium),
		chromedp.NoSandbox, // tests run as root
		chromedp.WindowSize(1280, 860),
		chromedp.Flag("host-resolver-rules", "MAP * ~NOTFOUND, EXCLUDE 127.0.0.1"),
	)
	ctx, cancelTimeout := context.WithTimeout(context.Background(), timeout)
	allocCtx, cancelAlloc := chromedp.NewExecAllocator(ctx, opts...)
	bctx, cancelBrowser := chromedp.NewContext(allocCtx)
	t.Cleanup(func() {
		cancelBrowser()
		cancelAlloc()
		cancelTimeout()
	})
	b := &browser{t: t, ctx: bctx, base: base, origins: origins}
	if err := chromedp.Do(bctx); err != nil {
		t.Fatalf("start %s: %v", testcluster.Chromium, err)
	}
	lctx, stop := context.WithCancel(bctx)
	var wg sync.WaitGroup
	t.Cleanup(func() {
		stop()
		wg.Wait()
	})
	requests := chromedp.Events(lctx, network.RequestWillBeSent)
	dialogs := chromedp.Events(lctx, page.JavascriptDialogOpening)
	finished := chromedp.Events(lctx, network.LoadingFinished)
	failed := chromedp.Events(lctx, network.LoadingFailed)
	b.pending = map[network.RequestID]string{}
	wg.Add(4)
	go func() {
		defer wg.Done()
		for ev, err := range finished {
			if err != nil {
				return
			}
			b.mu.Lock()
			delete(b.pending, ev.RequestID)
			b.mu.Unlock()
		}
	}()
	go func() {
		defer wg.Done()
		for ev, err := range failed {
			if err != nil {
				return
			}
			b.mu.Lock()
			delete(b.pending, ev.RequestID)
			b.mu.Unlock()
		}
	}()
	go func() {
		defer wg.Done()
		for ev, err := range requests {
			if err != nil {
				return
			}
			u := ev.Request.URL
			b.mu.Lock()
			b.pending[ev.RequestID] = time.Now().Format("15:04:05.000") + " " + u
			b.mu.Unlock()
			if strings.HasPrefix(u, "data:") || slices.ContainsFunc(b.origins, func(o string) bool { return u == o || strings.HasPrefix(u, o+"/") }) {
				continue
			}
			b.mu.Lock()
			b.foreign = append(b.foreign, u)
			b.mu.Unlock()
		}
	}()
	go func() {
		defer wg.Done()
		for ev, err := range dialogs {
			if err != nil {
				return
			}
			b.mu.Lock()
			b.dialogs = append(b.dialogs, ev.Message)
			b.mu.Unlock()
			_, _ = chromedp.Call(lctx, page.HandleJavaScriptDialog, page.HandleJavaScriptDialogParams{Accept: false})
		}
	}()
	if _, err := chromedp.Call(bctx, network.Enable, network.EnableParams{}); err != nil {
		t.Fatal(err)
	}
	if _, err := chromedp.Call(bctx, page.AddScriptToEvaluateOnNewDocument, page.AddScriptToEvaluateOnNewDocumentParams{Source: hookScript}); err != nil {
		t.Fatal(err)
	}
	return b
}

// open loads an app path ("/tasks?state=FAILURE") from scratch.
func (b *browser) open(path string) {
	b.t.Helper()
	start := time.Now()
	defer func() {
		if d := time.Since(start); d > 3*time.Second {
			b.mu.Lock()
			b.t.Logf("open %s took %s; requests pending: %q", path, d, b.pending)
			b.mu.Unlock()
		}
	}()
	if err := chromedp.Do(b.ctx, chromedp.Navigate(b.base+path)); err != nil {
		b.t.Fatalf("open %s%s: %v", b.base, path, err)
	}
}

// wait polls a JavaScript expression until it is truthy.
func (b *browser) wait(what, expr string, within time.Duration) {
	b.t.Helper()
	ctx, cancel := context.WithTimeout(b.ctx, within)
	defer cancel()
	for {
		_, err := chromedp.Run(ctx, chromedp.Poll[bool]("!!("+expr+")", chromedp.WithPollingInterval(50*time.Millisecond)))
		// Right after a navigation chromedp may still hold the previous
		// document's execution context, which Chromium has destroyed (seen
		// on a loaded machine): polling again uses the new one.
		if err != nil && strings.Contains(err.Error(), "Cannot find context with specified id") && ctx.Err() == nil {
			select {
			case <-ctx.Done():
			case <-time.After(50 * time.Millisecond): // the polling interval
			}
			continue
		}
		if err != nil {
			b.t.Fatalf("waiting %s for %s: %v%s", within, what, err, b.pageText())
		}
		return
	}
}

// eval evaluates a JavaScript expression.
func eval[T any](b *browser, expr string) T {
	b.t.Helper()
	v, err := chromedp.Run(b.ctx, chromedp.Evaluate[T](expr))
	if err != nil {
		b.t.Fatalf("evaluate %s: %v", expr, err)
	}
	return v
}

func (b *browser) click(sel string) {
	b.t.Helper()
	ctx, cancel := context.WithTimeout(b.ctx, 15*time.Second)
	defer cancel()
	if err := chromedp.Do(ctx, chromedp.Click(chromedp.CSS(sel))); err != nil {
		b.t.Fatalf("click %s: %v%s", sel, err, b.pageText())
	}
}

// setValue types into an empty input the way a person does, so that the
// page's input handlers see it.
func (b *browser) setValue(sel, value string) {
	b.t.Helper()
	ctx, cancel := context.WithTimeout(b.ctx, 15*time.Second)
	defer cancel()
	if err := chromedp.Do(ctx, chromedp.SendKeys(chromedp.CSS(sel), value)); err != nil {
		b.t.Fatalf("type into %s: %v%s", sel, err, b.pageText())
	}
}

// confirm clicks a control that asks first, and confirms.
func (b *browser) confirm(action string) string {
	b.t.Helper()
	b.click(fmt.Sprintf(`[data-action=%q]`, action))
	b.wait("the confirmation dialog", fmt.Sprintf(`document.querySelector('dialog[open] [data-confirm=%q]')`, action), 5*time.Second)
	question := eval[string](b, `document.querySelector("dialog[open] p").textContent`)
	b.click(fmt.Sprintf(`dialog[open] [data-confirm=%q]`, action))
	return question
}

// answer waits for a control's answer and returns it.
func (b *browser) answer() string {
	b.t.Helper()
	b.wait("the control's answer", `document.querySelector("[data-answer], .error")`, 20*time.Second)
	return eval[string](b, `(document.querySelector("[data-answer]") || document.querySelector(".error")).textContent`)
}

// safe checks that nothing the page showed ran a script or made an
// element: no hook call, no CSP violation, no dialog, no element a hostile
// string would make.
func (b *browser) safe(where string) {
	b.t.Helper()
	ran := eval[[]string](b, `window.__ran || ["no hook"]`)
	csp := eval[[]string](b, `window.__csp || []`)
	elems := eval[[]string](b, `[...document.querySelectorAll("img, svg, iframe, object, embed, script:not([src]), [onerror], [onload]")].map(e => e.outerHTML)`)
	b.mu.Lock()
	dialogs := slices.Clone(b.dialogs)
	b.mu.Unlock()
	if len(ran) > 0 || len(csp) > 0 || len(elems) > 0 || len(dialogs) > 0 {
		b.t.Errorf("%s: scripts ran %q, CSP violations %q, elements made from data %q, dialogs %q", where, ran, csp, elems, dialogs)
	}
	// Every control has a name a screen reader reads out.
	unlabelled := eval[[]string](b, `[...document.querySelectorAll("input, select, textarea, button")]
		.filter(e => !(e.labels && e.labels.length) && !e.getAttribute("aria-label") && !e.textContent.trim())
		.map(e => e.outerHTML.slice(0, 120))`)
	if len(unlabelled) > 0 {
		b.t.Errorf("%s: controls without a label: %q", where, unlabelled)
	}
}

// foreignRequests is the requests so far to a host other than the
// allowed origins.
func (b *browser) foreignRequests() []string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return slices.Clone(b.foreign)
}

func (b *browser) pageText() string {
	ctx, cancel := context.WithTimeout(b.ctx, 5*time.Second)
	defer cancel()
	s, err := chromedp.Run(ctx, chromedp.Evaluate[string](`location.href + "\n" + (document.body ? document.body.innerText : "")`))
	if err != nil {
		return "\n(page text unavailable: " + err.Error() + ")"
	}
	if len(s) > 3000 {
		s = s[:3000] + "..."
	}
	return "\npage:\n" + s
}

// contrastJS lists the visible texts whose colour on their background is
// under WCAG AA's 4.5:1 (disabled controls are exempt, as WCAG exempts
// them).
const contrastJS = `(() => {
	const rgba = (c) => (c.match(/[\d.]+/g) || [0, 0, 0, 0]).map(Number);
	const lum = ([r, g, b]) => [r, g, b].map((v) => { v /= 255; return v <= 0.03928 ? v / 12.92 : Math.pow((v + 0.055) / 1.055, 2.4); })
		.reduce((a, v, i) => a + v * [0.2126, 0.7152, 0.0722][i], 0);
	const bg = (e) => { for (; e; e = e.parentElement) { const c = rgba(getComputedStyle(e).backgroundColor); if (c.length < 4 || c[3] > 0.5) return c; } return [255, 255, 255]; };
	const bad = [];
	for (const e of document.querySelectorAll("body *")) {
		if (![...e.childNodes].some((n) => n.nodeType === 3 && n.textContent.trim())) continue;
		if (!e.getClientRects().length || getComputedStyle(e).visibility === "hidden" || e.closest("[disabled], :disabled, dialog:not([open]), .skip")) continue;
		const l1 = lum(rgba(getComputedStyle(e).color)), l2 = lum(bg(e));
		const ratio = (Math.max(l1, l2) + 0.05) / (Math.min(l1, l2) + 0.05);
		if (ratio < 4.5) bad.push(e.tagName + " " + e.textContent.trim().slice(0, 30) + ": " + ratio.toFixed(2));
	}
	return bad;
})()`

// look checks the page in the light and the dark theme: every text passes
// WCAG AA contrast. With STAMEN_SCREENSHOTS set to a directory (make
// screenshots) it also saves docs/screenshots/<name>-{light,dark}.png.
func (b *browser) look(name string) {
	b.t.Helper()
	dir := os.Getenv("STAMEN_SCREENSHOTS")
	for _, theme := range []string{"light", "dark"} {
		eval[bool](b, fmt.Sprintf(`(document.documentElement.dataset.theme = %q, true)`, theme))
		if bad := eval[[]string](b, contrastJS); len(bad) > 0 {
			b.t.Errorf("%s, %s theme: text under 4.5:1 contrast: %q", name, theme, bad)
		}
		if dir == "" {
			continue
		}
		buf, err := chromedp.Run(b.ctx, chromedp.CaptureScreenshot())
		if err != nil {
			b.t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, name+"-"+theme+".png"), buf, 0o644); err != nil {
			b.t.Fatal(err)
		}
	}
	eval[bool](b, `(document.documentElement.dataset.theme = "system", true)`)
}

// emulateDark makes the system theme dark.
func (b *browser) emulateDark(dark bool) {
	v := "light"
	if dark {
		v = "dark"
	}
	_, err := chromedp.Call(b.ctx, emulation.SetEmulatedMedia, emulation.SetEmulatedMediaParams{
		Features: []*emulation.MediaFeature{{Name: "prefers-color-scheme", Value: v}},
	})
	if err != nil {
		b.t.Fatal(err)
	}
}

// answerLogin answers the browser's basic-auth prompts for URLs matching
// pattern with user and password, or cancels them when user is "".
func (b *browser) answerLogin(pattern, user, password string) {
	b.t.Helper()
	lctx, stop := context.WithCancel(b.ctx)
	var wg sync.WaitGroup
	b.t.Cleanup(func() {
		stop()
		wg.Wait()
	})
	paused := chromedp.Events(lctx, fetch.RequestPaused)
	challenged := chromedp.Events(lctx, fetch.AuthRequired)
	wg.Add(2)
	go func() {
		defer wg.Done()
		for ev, err := range paused {
			if err != nil {
				return
			}
			_, _ = chromedp.Call(lctx, fetch.ContinueRequest, fetch.ContinueRequestParams{RequestID: ev.RequestID})
		}
	}()
	go func() {
		defer wg.Done()
		for ev, err := range challenged {
			if err != nil {
				return
			}
			resp := &fetch.AuthChallengeResponse{Response: fetch.AuthChallengeResponseResponseCancelAuth}
			if user != "" {
				resp = &fetch.AuthChallengeResponse{Response: fetch.AuthChallengeResponseResponseProvideCredentials, Username: user, Password: password}
			}
			_, _ = chromedp.Call(lctx, fetch.ContinueWithAuth, fetch.ContinueWithAuthParams{RequestID: ev.RequestID, AuthChallengeResponse: resp})
		}
	}()
	handle := true
	if _, err := chromedp.Call(b.ctx, fetch.Enable, fetch.EnableParams{
		Patterns: []*fetch.RequestPattern{{URLPattern: pattern}}, HandleAuthRequests: &handle,
	}); err != nil {
		b.t.Fatalf("Fetch.enable: %v", err)
	}
}

func startStamen(t *testing.T, cfg app.Config) (*app.App, *httptest.Server) {
	t.Helper()
	if cfg.InspectTimeout == 0 {
		cfg.InspectTimeout = 2 * time.Second
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	a, err := app.New(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(a.Handler)
	t.Cleanup(func() {
		srv.Close()
		a.Close()
	})
	return a, srv
}

// pathProxy serves target's URL space under the path from, as a reverse
// proxy that maps a path onto stamen does.
func pathProxy(t *testing.T, from, target string) *httptest.Server {
	t.Helper()
	to, err := url.Parse(target)
	if err != nil {
		t.Fatal(err)
	}
	rp := &httputil.ReverseProxy{Rewrite: func(pr *httputil.ProxyRequest) {
		pr.Out.URL.Path = strings.TrimPrefix(pr.In.URL.Path, from)
		pr.Out.URL.RawPath = ""
		pr.SetURL(to)
	}, FlushInterval: -1}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != from && !strings.HasPrefix(r.URL.Path, from+"/") {
			http.Error(w, "outside the proxied path", http.StatusNotFound)
			return
		}
		rp.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	return srv
}

// call calls the API and decodes its JSON answer into out (when not nil),
// failing the test on an error status.
func call(t *testing.T, method, u string, body any, out any) {
	t.Helper()
	var rd io.Reader
	if body != nil {
		b, _ := json.Marshal(body)
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequest(method, u, rd)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := (&http.Client{Timeout: 30 * time.Second}).Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("%s %s: %d %s", method, u, resp.StatusCode, b)
	}
	if out != nil {
		if err := json.Unmarshal(b, out); err != nil {
			t.Fatalf("%s %s: %v: %s", method, u, err, b)
		}
	}
}

// send sends a task through stamen's API and returns its id.
func send(t *testing.T, base, name string, body map[string]any) string {
	t.Helper()
	var r struct {
		ID string `json:"task-id"`
	}
	call(t, "POST", base+"/api/task/async-apply/"+name, body, &r)
	return r.ID
}

// checkCSP fetches paths and checks each HTML answer carries the CSP and
// is not cached.
func checkCSP(t *testing.T, base string, paths ...string) {
	t.Helper()
	for _, p := range paths {
		resp, err := http.Get(base + p)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/html") {
			t.Errorf("GET %s: Content-Type %q, want the page", p, resp.Header.Get("Content-Type"))
			continue
		}
		if got := resp.Header.Get("Content-Security-Policy"); got != ui.CSP {
			t.Errorf("GET %s: Content-Security-Policy %q, want %q", p, got, ui.CSP)
		}
		if got := resp.Header.Get("Cache-Control"); got != "no-store" {
			t.Errorf("GET %s: Cache-Control %q, want no-store", p, got)
		}
	}
}
