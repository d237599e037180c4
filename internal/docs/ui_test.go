package docs_test

import (
	"context"
	"crypto/tls"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/chromedp/cdproto/fetch"
	"github.com/chromedp/cdproto/network"
	"github.com/chromedp/chromedp"

	"github.com/stamen-dev/stamen/internal/app"
	"github.com/stamen-dev/stamen/internal/auth"
	"github.com/stamen-dev/stamen/internal/testcluster"
)

const (
	uiUser, uiPassword = "viewer", "viewer-secret"
	// The GET /api/workers block: Swagger UI's id is operations-<tag>-<operationId>.
	listWorkersOp = "#operations-workers-listWorkers"
)

// TestSwaggerUITryItOut drives Swagger UI in headless Chromium against a
// stamen with credentials and a real Celery worker, at the root and under
// --url_prefix, directly and behind a proxy that serves it under another
// path, and over HTTPS: "Try it out" on GET /api/workers answers 401 until the
// Authorize dialog is given the basic credentials, then 200 with the worker
// in the body.
func TestSwaggerUITryItOut(t *testing.T) {
	testcluster.Require(t)
	testcluster.RequireChromium(t)

	var authn auth.Authenticator
	if err := authn.AddBasic(uiUser+":"+uiPassword, auth.Viewer); err != nil {
		t.Fatal(err)
	}
	addr := fmt.Sprintf("127.0.0.1:%d", testcluster.FreePort(t))
	a, root := startStamen(t, app.Config{EmbeddedAddr: addr, Auth: &authn})
	// The embedded broker's URLs carry the password it generated.
	backend := a.ResultBackendURL
	w := testcluster.StartWorker(t, testcluster.WorkerOptions{Name: "ui", Broker: a.BrokerURL, Backend: backend})

	t.Run("root", func(t *testing.T) {
		tryItOut(t, root.URL, w.Name)
	})
	t.Run("url_prefix", func(t *testing.T) {
		// A second stamen on the same broker, serving under /flower.
		_, prefixed := startStamen(t, app.Config{BrokerURL: a.BrokerURL, ResultBackend: backend, URLPrefix: "flower", Auth: &authn})
		tryItOut(t, prefixed.URL+"/flower", w.Name)
	})
	// Behind a reverse proxy that serves stamen under another path, the
	// page's own path is where the browser reaches the API, whatever the
	// served spec's basePath (the prefix, or "/") says.
	t.Run("url_prefix behind a proxy", func(t *testing.T) {
		_, prefixed := startStamen(t, app.Config{BrokerURL: a.BrokerURL, ResultBackend: backend, URLPrefix: "flower", Auth: &authn})
		proxy := pathProxy(t, "/ops/celery", prefixed.URL+"/flower")
		tryItOut(t, proxy.URL+"/ops/celery", w.Name)
	})
	t.Run("root behind a proxy", func(t *testing.T) {
		proxy := pathProxy(t, "/stamen", root.URL)
		tryItOut(t, proxy.URL+"/stamen", w.Name)
	})
	t.Run("https", func(t *testing.T) {
		// The spec names no scheme, so Swagger UI calls the API with the
		// page's: over HTTPS (--certfile) a call by plain HTTP would be
		// blocked as mixed content.
		_, srv := startStamenOn(t, app.Config{BrokerURL: a.BrokerURL, ResultBackend: backend, Auth: &authn},
			httptest.NewTLSServer)
		tryItOut(t, srv.URL, w.Name)
	})
}

// TestSwaggerUIStaysOffline loads /docs in headless Chromium by a host
// name that is not loopback, as a deployment behind a proxy serves it:
// the page asks nothing of any other host. Swagger UI's default shows a
// badge loaded from validator.swagger.io for such a host, which sent the
// spec's URL to a third party and is a broken image offline.
func TestSwaggerUIStaysOffline(t *testing.T) {
	testcluster.Require(t)
	testcluster.RequireChromium(t)

	addr := fmt.Sprintf("127.0.0.1:%d", testcluster.FreePort(t))
	_, srv := startStamen(t, app.Config{EmbeddedAddr: addr})
	// A name Chromium resolves to the test server, and no other name at all.
	const host = "stamen.test"
	_, port, err := net.SplitHostPort(srv.Listener.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	origin := "http://" + host + ":" + port
	browser := newBrowser(t, 2*time.Minute,
		chromedp.Flag("host-resolver-rules", "MAP "+host+" 127.0.0.1, MAP * ~NOTFOUND"))
	foreign := refuseForeignRequests(t, browser, origin)

	if err := chromedp.Do(browser,
		chromedp.Navigate(origin+"/docs"),
		chromedp.WaitVisible(chromedp.CSS(listWorkersOp)),
	); err != nil {
		t.Fatalf("load %s/docs: %v%s", origin, err, pageText(browser))
	}
	// The page is rendered. Swagger UI's validator badge is a link around
	// an image it loads with new Image(), outside the page until it loads:
	// the link shows the badge was rendered even if the request is not
	// seen yet.
	refs, err := chromedp.Run(browser, chromedp.Evaluate[[]string](`[...document.querySelectorAll("img[src], script[src], link[href], iframe[src], a[href]")]
		.map(e => e.src || e.href).filter(u => !u.startsWith(location.origin + "/"))`))
	if err != nil {
		t.Fatal(err)
	}
	if len(refs) > 0 {
		t.Errorf("/docs refers to other hosts: %q", refs)
	}
	if got := foreign(); len(got) > 0 {
		t.Errorf("/docs asked other hosts for %q", got)
	}
}

// TestSwaggerUIDescriptionHasNoList loads /docs in headless Chromium and
// checks that the API's description renders as the paragraphs it is
// written as: a line of it starting with a number and a period ("403.")
// became a numbered list item, cutting a sentence in two.
func TestSwaggerUIDescriptionHasNoList(t *testing.T) {
	testcluster.Require(t)
	testcluster.RequireChromium(t)

	addr := fmt.Sprintf("127.0.0.1:%d", testcluster.FreePort(t))
	_, srv := startStamen(t, app.Config{EmbeddedAddr: addr})
	browser := newBrowser(t, 2*time.Minute)
	const description = ".information-container .info .description"
	if err := chromedp.Do(browser,
		chromedp.Navigate(srv.URL+"/docs"),
		chromedp.WaitVisible(chromedp.CSS(description)),
	); err != nil {
		t.Fatalf("load %s/docs: %v%s", srv.URL, err, pageText(browser))
	}
	if got := strings.Join(strings.Fields(text(t, browser, description)), " "); !strings.Contains(got, "Without credentials configured stamen listens on loopback only") {
		t.Fatalf("the description shown is not the spec's: %.300s", got)
	}
	items, err := chromedp.Run(browser, chromedp.Evaluate[[]string](
		`[...document.querySelectorAll("`+description+` ol, `+description+` li")].map(e => e.outerHTML)`))
	if err != nil {
		t.Fatal(err)
	}
	if len(items) > 0 {
		t.Errorf("the description renders list elements: %q", items)
	}
}

// refuseForeignRequests fails every request the browser makes to a host
// other than origin's, and returns the list of them so far.
func refuseForeignRequests(t *testing.T, browser context.Context, origin string) func() []string {
	t.Helper()
	ctx, wg := listenTo(t, browser)
	paused := chromedp.Events(ctx, fetch.RequestPaused)
	var mu sync.Mutex
	var foreign []string
	wg.Add(1)
	go func() {
		defer wg.Done()
		for ev, err := range paused {
			if err != nil {
				return
			}
			if u := ev.Request.URL; u == origin || strings.HasPrefix(u, origin+"/") || strings.HasPrefix(u, "data:") {
				_, _ = chromedp.Call(ctx, fetch.ContinueRequest, fetch.ContinueRequestParams{RequestID: ev.RequestID})
				continue
			}
			mu.Lock()
			foreign = append(foreign, ev.Request.URL)
			mu.Unlock()
			_, _ = chromedp.Call(ctx, fetch.FailRequest, fetch.FailRequestParams{RequestID: ev.RequestID, ErrorReason: network.ErrorReasonBlockedByClient})
		}
	}()
	if _, err := chromedp.Call(browser, fetch.Enable, fetch.EnableParams{Patterns: []*fetch.RequestPattern{{URLPattern: "*"}}}); err != nil {
		t.Fatalf("Fetch.enable: %v", err)
	}
	return func() []string {
		mu.Lock()
		defer mu.Unlock()
		return slices.Clone(foreign)
	}
}

// pathProxy is a reverse proxy that serves target's URL space under the
// path from, as a proxy that maps a path onto stamen does
// (from/api/workers is target/api/workers), and answers 404 outside it.
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
	}}
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

func startStamen(t *testing.T, cfg app.Config) (*app.App, *httptest.Server) {
	t.Helper()
	return startStamenOn(t, cfg, httptest.NewServer)
}

// startStamenOn is startStamen serving through serve (httptest's plain or
// TLS server).
func startStamenOn(t *testing.T, cfg app.Config, serve func(http.Handler) *httptest.Server) (*app.App, *httptest.Server) {
	t.Helper()
	cfg.InspectTimeout = 2 * time.Second
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	a, err := app.New(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	srv := serve(a.Handler)
	t.Cleanup(func() {
		srv.Close()
		a.Close()
	})
	return a, srv
}

// tryItOut runs "Try it out" on GET /api/workers in Swagger UI at
// base/docs, before and after authorizing.
func tryItOut(t *testing.T, base, worker string) {
	waitForWorker(t, base, worker)
	browser := newBrowser(t, 2*time.Minute)
	prompts := cancelLoginPrompts(t, browser, base+"/api/*")
	status := listWorkersOp + " .live-responses-table tr.response > td.response-col_status"
	err := chromedp.Do(browser,
		chromedp.Navigate(base+"/docs"),
		chromedp.Click(chromedp.CSS(listWorkersOp+" .opblock-summary-control")),
		chromedp.Click(chromedp.CSS(listWorkersOp+" .try-out__btn")),
		chromedp.Click(chromedp.CSS(listWorkersOp+" .execute")),
	)
	if err != nil {
		t.Fatalf("execute before authorizing: %v%s", err, pageText(browser))
	}
	if code := text(t, browser, status); code != "401" {
		t.Fatalf("before authorizing: status %q, want 401%s", code, pageText(browser))
	}
	if n := prompts.Load(); n != 1 {
		t.Errorf("the browser asked for a login %d times before authorizing, want once (the 401's Basic challenge)", n)
	}

	err = chromedp.Do(browser,
		chromedp.Click(chromedp.CSS(".auth-wrapper .authorize")),
		chromedp.SendKeys(chromedp.CSS("#auth_username"), uiUser),
		chromedp.SendKeys(chromedp.CSS("#auth_password"), uiPassword),
		chromedp.Click(chromedp.CSS(".modal-ux button.authorize[type=submit]")),
		chromedp.Click(chromedp.CSS(".modal-ux .btn-done")),
		chromedp.WaitNotPresent(chromedp.CSS(".modal-ux")),
		// Clear the 401, so that the status read next is the new answer's.
		chromedp.Click(chromedp.CSS(listWorkersOp+" .btn-clear")),
		chromedp.WaitNotPresent(chromedp.CSS(listWorkersOp+" .live-responses-table")),
		chromedp.Click(chromedp.CSS(listWorkersOp+" .execute")),
	)
	if err != nil {
		t.Fatalf("authorize and execute again: %v%s", err, pageText(browser))
	}
	if code := text(t, browser, status); code != "200" {
		t.Fatalf("after authorizing: status %q, want 200%s", code, pageText(browser))
	}
	if n := prompts.Load(); n != 1 {
		t.Errorf("the browser asked for a login again after authorizing (%d prompts in all)", n)
	}
	if u := text(t, browser, listWorkersOp+" .request-url pre"); u != base+"/api/workers" {
		t.Errorf("Swagger UI called %q, want %s/api/workers", u, base)
	}
	creds := "authorization: basic " + base64.StdEncoding.EncodeToString([]byte(uiUser+":"+uiPassword))
	if curl := text(t, browser, listWorkersOp+" .curl-command"); !strings.Contains(strings.ToLower(curl), strings.ToLower(creds)) {
		t.Errorf("the request Swagger UI sent lacks the basic credentials: %s", curl)
	}
	body := text(t, browser, listWorkersOp+" .live-responses-table tr.response > td.response-col_description pre")
	var workers map[string]any
	if err := json.Unmarshal([]byte(body), &workers); err != nil {
		t.Fatalf("the response body shown is not a JSON object: %v: %.500s", err, body)
	}
	if _, ok := workers[worker]; !ok {
		t.Errorf("the response body shown lacks worker %s: %.500s", worker, body)
	}
}

// waitForWorker waits until stamen's inspection lists the worker, so that
// the body Swagger UI shows has it.
func waitForWorker(t *testing.T, base, name string) {
	t.Helper()
	hc := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{
		// The https case's server has a certificate no authority signed.
		TLSClientConfig: &tls.Config{InsecureSkipVerify: true},
	}}
	deadline := time.Now().Add(30 * time.Second)
	for {
		req, err := http.NewRequest("GET", base+"/api/workers?refresh=1", nil)
		if err != nil {
			t.Fatal(err)
		}
		req.SetBasicAuth(uiUser, uiPassword)
		var workers map[string]any
		if resp, err := hc.Do(req); err == nil {
			_ = json.NewDecoder(resp.Body).Decode(&workers)
			resp.Body.Close()
		}
		if _, ok := workers[name]; ok {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("stamen did not list worker %s within 30s", name)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// newBrowser starts headless Chromium for the test, bounded by timeout, and
// stops it when the test ends; extra adds command line options.
func newBrowser(t *testing.T, timeout time.Duration, extra ...chromedp.ExecAllocatorOption) context.Context {
	t.Helper()
	opts := append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(testcluster.Chromium),
		// Tests run as root, where Chromium's sandbox cannot start.
		chromedp.NoSandbox,
		chromedp.WindowSize(1280, 1024),
		// httptest's TLS server has a certificate no authority signed.
		chromedp.IgnoreCertErrors,
	)
	opts = append(opts, extra...)
	ctx, cancelTimeout := context.WithTimeout(context.Background(), timeout)
	allocCtx, cancelAlloc := chromedp.NewExecAllocator(ctx, opts...)
	browser, cancelBrowser := chromedp.NewContext(allocCtx)
	t.Cleanup(func() {
		cancelBrowser()
		cancelAlloc() // waits for the browser process to exit
		cancelTimeout()
	})
	return browser
}

// listenTo starts the browser and returns a context for following its
// events, and the group of the goroutines that follow them: the context
// ends, and the goroutines are waited for, when the test does.
func listenTo(t *testing.T, browser context.Context) (context.Context, *sync.WaitGroup) {
	t.Helper()
	if err := chromedp.Do(browser); err != nil { // starts the browser
		t.Fatalf("start %s: %v", testcluster.Chromium, err)
	}
	ctx, stop := context.WithCancel(browser)
	wg := &sync.WaitGroup{}
	t.Cleanup(func() {
		stop()
		wg.Wait()
	})
	return ctx, wg
}

// cancelLoginPrompts answers the browser's login prompt for the URLs
// matching pattern as a user who has not authorized in Swagger UI would:
// Cancel, after which the page gets the 401. A 401 with a Basic challenge
// opens that prompt in a real browser; headless Chromium, which has no
// prompt to show, would otherwise leave the request hanging. It returns the
// number of prompts so far.
func cancelLoginPrompts(t *testing.T, browser context.Context, pattern string) *atomic.Int32 {
	t.Helper()
	ctx, wg := listenTo(t, browser)
	// Subscribed before Fetch.enable, so that no paused request is missed.
	paused := chromedp.Events(ctx, fetch.RequestPaused)
	challenged := chromedp.Events(ctx, fetch.AuthRequired)
	var prompts atomic.Int32
	wg.Add(2)
	go func() {
		defer wg.Done()
		for ev, err := range paused {
			if err != nil {
				return
			}
			_, _ = chromedp.Call(ctx, fetch.ContinueRequest, fetch.ContinueRequestParams{RequestID: ev.RequestID})
		}
	}()
	go func() {
		defer wg.Done()
		for ev, err := range challenged {
			if err != nil {
				return
			}
			prompts.Add(1)
			_, _ = chromedp.Call(ctx, fetch.ContinueWithAuth, fetch.ContinueWithAuthParams{
				RequestID:             ev.RequestID,
				AuthChallengeResponse: &fetch.AuthChallengeResponse{Response: fetch.AuthChallengeResponseResponseCancelAuth},
			})
		}
	}()
	handle := true
	if _, err := chromedp.Call(browser, fetch.Enable, fetch.EnableParams{
		Patterns:           []*fetch.RequestPattern{{URLPattern: pattern}},
		HandleAuthRequests: &handle,
	}); err != nil {
		t.Fatalf("Fetch.enable: %v", err)
	}
	return &prompts
}

// text waits up to 30s until the element matching selector exists and
// has text, and returns the text.
func text(t *testing.T, browser context.Context, selector string) string {
	t.Helper()
	expr := fmt.Sprintf(`(() => { const e = document.querySelector(%q); return e ? e.textContent.trim() : ""; })()`, selector)
	s, err := chromedp.Run(browser, chromedp.Poll[string](expr, chromedp.WithPollingInterval(100*time.Millisecond)))
	if err != nil {
		t.Fatalf("waiting for %s: %v%s", selector, err, pageText(browser))
	}
	return s
}

// pageText is the page's visible text, for failure messages.
func pageText(browser context.Context) string {
	ctx, cancel := context.WithTimeout(browser, 5*time.Second)
	defer cancel()
	s, err := chromedp.Run(ctx, chromedp.Evaluate[string](`document.body ? document.body.innerText : ""`))
	if err != nil {
		return "\n(page text unavailable: " + err.Error() + ")"
	}
	if len(s) > 3000 {
		s = s[:3000] + "..."
	}
	return "\npage text:\n" + s
}
