package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/chromedp/cdproto/fetch"
	"github.com/chromedp/chromedp"
	goredis "github.com/redis/go-redis/v9"

	"github.com/stamen-dev/stamen/internal/testcluster"
)

// TestAllowedOriginsAndHostsFlags: --allowed_origins and --allowed_hosts
// (and their STAMEN_ variables) are read as browsers write origins and host
// names, and a malformed one stops stamen at start, saying which and why.
func TestAllowedOriginsAndHostsFlags(t *testing.T) {
	unsetEnv(t, "ALLOWED_ORIGINS", "ALLOWED_HOSTS")
	o, _ := parseCase(t, nil, []string{"--allowed_origins", "https://OPS.example:443, http://dash.example:8080"}, "")
	if strings.Join(o.origins, " ") != "https://ops.example http://dash.example:8080" {
		t.Errorf("origins %q", o.origins)
	}
	o, _ = parseCase(t, map[string]string{"STAMEN_ALLOWED_ORIGINS": "https://ops.example", "STAMEN_ALLOWED_HOSTS": "Stamen.Example.com"}, nil, "")
	if strings.Join(o.origins, " ") != "https://ops.example" || strings.Join(o.hosts, " ") != "stamen.example.com" {
		t.Errorf("from the environment: origins %q, hosts %q", o.origins, o.hosts)
	}
	for _, tc := range []struct {
		args    []string
		wantErr string
	}{
		{[]string{"--allowed_origins", "ops.example"}, `--allowed_origins: invalid origin "ops.example": want http://host[:port]`},
		{[]string{"--allowed_origins", "https://ops.example/dashboard"}, "--allowed_origins: invalid origin"},
		{[]string{"--allowed_origins", "*"}, "wildcards are not supported"},
		{[]string{"--allowed_hosts", "stamen.example.com:443"}, `--allowed_hosts: invalid host "stamen.example.com:443": give the name without a port`},
		{[]string{"--allowed_hosts", "https://stamen.example.com"}, "not a URL"},
	} {
		parseCase(t, nil, tc.args, tc.wantErr)
	}
}

// blankPage is the page of the test's other sites: one server, reached as
// http://evil.example:<port> (another site, which Chromium resolves to
// 127.0.0.1) and as http://127.0.0.1:<port> (the same site as stamen on
// 127.0.0.1, another origin), and over HTTPS as https://ops.example.
const blankPage = `<!doctype html><html><head><title>page</title></head><body></body></html>`

// attackJS sends a form POST (into an iframe, so that the page stays) and
// a fetch() as simple as a form (no preflight) to each path under base,
// one after another, each once its answer is in: what any web page can
// make the browser do. It resolves to the fetches' outcomes.
const attackJS = `(async (base, paths) => {
	const out = [];
	for (const p of paths) {
		await new Promise(resolve => {
			const name = "f" + Math.random().toString(36).slice(2);
			const frame = document.createElement("iframe");
			frame.name = name;
			document.body.appendChild(frame);
			frame.onload = resolve; // after about:blank's load
			const form = document.createElement("form");
			form.method = "POST";
			form.action = base + p;
			form.target = name;
			const input = document.createElement("input");
			input.name = "a";
			input.value = "b";
			form.appendChild(input);
			document.body.appendChild(form);
			form.submit();
		});
		try {
			const r = await fetch(base + p, {method: "POST", mode: "no-cors", credentials: "include", body: new URLSearchParams({a: "b"})});
			out.push(r.type);
		} catch (e) {
			out.push(String(e));
		}
	}
	return out;
})(%s, %s)`

// ownFetchJS is a write call from a page of stamen's own origin, whose
// answer the page reads.
const ownFetchJS = `fetch(%s, {method: "POST"}).then(async r => r.status + " " + await r.text())`

// TestBrowserCrossSiteRequests runs the binary with a real Celery worker
// and drives headless Chromium:
//   - a page of another site (evil.example) and a page of another origin
//     of the same site (127.0.0.1:<other port>) send form POSTs and fetch()es
//     to revoke, pool grow, purge and shutdown: stamen refuses every one,
//     and the worker gets no command (its pool is the size it was, it runs,
//     the queue holds its messages, the task is not revoked). The same
//     calls from a page of stamen's own origin take effect.
//   - with basic auth, credentials the browser cached do not get another
//     site's form POST through.
//   - a page reached by a name that resolves to stamen (DNS rebinding) gets
//     421; so does any request for a foreign Host, read, write or event
//     stream, while localhost, 127.0.0.1 and [::1] are served.
//   - --allowed_origins https://ops.example lets that origin's page call
//     the API, preflights included, and no other.
func TestBrowserCrossSiteRequests(t *testing.T) {
	testcluster.Require(t)
	testcluster.RequireChromium(t)
	bin := buildBinary(t)

	// The other sites' pages, over HTTP and HTTPS.
	pages := http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		_, _ = io.WriteString(w, blankPage)
	})
	pageSrv := httptest.NewServer(pages)
	t.Cleanup(pageSrv.Close)
	opsSrv := httptest.NewTLSServer(pages)
	t.Cleanup(opsSrv.Close)
	_, pagePort, _ := net.SplitHostPort(pageSrv.Listener.Addr().String())
	evilPage := "http://evil.example:" + pagePort + "/"
	sameSitePage := "http://127.0.0.1:" + pagePort + "/"
	const opsPage = "https://ops.example/"

	// stamen as it runs by default: loopback, no credentials; its
	// embedded broker is the worker's.
	brokerAddr := fmt.Sprintf("127.0.0.1:%d", freePort(t))
	const brokerPassword = "browser-test-broker"
	brokerURL := func(db int) string { return fmt.Sprintf("redis://:%s@%s/%d", brokerPassword, brokerAddr, db) }
	base, logs := startOn(t, bin, "--embedded_broker_address", brokerAddr, "--embedded_broker_password", brokerPassword,
		"--db", t.TempDir()+"/stamen.db")
	// A second stamen on the same broker, with credentials, the allowed
	// origin and a proxy's host name.
	authed, authedLogs := startOn(t, bin, "--broker", brokerURL(0), "--result_backend", brokerURL(1),
		"--basic_auth", "ops:ops-secret", "--allowed_origins", "https://ops.example", "--allowed_hosts", "stamen.example.com")

	w := testcluster.StartWorker(t, testcluster.WorkerOptions{Name: "browser", Broker: brokerURL(0), Backend: brokerURL(1), Concurrency: 1})
	worker := url.PathEscape(w.Name)
	testcluster.Eventually(t, 30*time.Second, "both stamens see "+w.Name, func() bool {
		return inspectWorker(t, base, "", w.Name).processes > 0 && inspectWorker(t, authed, "ops:ops-secret", w.Name).processes > 0
	})
	awaitPool(t, base, "", w.Name, 1)

	// A backlog on a queue no worker consumes, for purge.
	const parked = "browser-parked"
	for range 3 {
		req, _ := http.NewRequest("POST", base+"/api/task/async-apply/stamen.add", strings.NewReader(`{"args": [1, 1], "queue": "`+parked+`"}`))
		req.Header.Set("Content-Type", "application/json")
		if code, body := send(t, req); code != 200 {
			t.Fatalf("send to %s: %d %s", parked, code, body)
		}
	}
	rdb := goredis.NewClient(&goredis.Options{Addr: brokerAddr, Password: brokerPassword})
	t.Cleanup(func() { _ = rdb.Close() })
	parkedLen := func() int64 {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		n, err := rdb.LLen(ctx, parked).Result()
		if err != nil {
			t.Fatalf("LLEN %s: %v", parked, err)
		}
		return n
	}
	if n := parkedLen(); n != 3 {
		t.Fatalf("%s holds %d messages, want 3", parked, n)
	}

	browser := startBrowser(t, "MAP evil.example 127.0.0.1, MAP ops.example "+opsSrv.Listener.Addr().String())
	// The login prompt of the stamen with credentials: answered with them
	// the first time, as the operator does once, then cancelled, so that
	// only credentials the browser cached can reach it.
	prompts := answerLoginOnce(t, browser, authed+"/*", "ops", "ops-secret")

	attacks := []string{
		"/api/task/revoke/csrf-victim",
		"/api/worker/pool/grow/" + worker + "?n=1",
		"/api/queues/purge/" + parked,
		"/api/worker/shutdown/" + worker,
	}
	t.Run("other sites' pages are refused", func(t *testing.T) {
		for _, page := range []string{evilPage, sameSitePage} {
			navigate(t, browser, page)
			outcomes := evaluate[[]string](t, browser, fmt.Sprintf(attackJS, jsString(base), jsValue(attacks)))
			for i, o := range outcomes {
				if o != "opaque" {
					t.Errorf("%s: fetch %s: %s, want it sent (an opaque answer)", page, attacks[i], o)
				}
			}
		}
		// Every request reached stamen and was refused there, not in the
		// browser: 2 pages x 4 calls x (form + fetch).
		if n := refusalCount(t, base, "cross_site"); n != 16 {
			t.Errorf("cross_site refusals counted: %v, want 16\n%s", n, logs.String())
		}
		// The pidbox is in order: the worker answers this grow after any
		// command sent before it, so the pool size then tells whether the
		// refused grow reached it.
		navigate(t, browser, base+"/healthcheck")
		if got := evaluate[string](t, browser, fmt.Sprintf(ownFetchJS, jsString(base+"/api/worker/pool/grow/"+worker+"?n=1"))); !strings.HasPrefix(got, "200 ") {
			t.Fatalf("pool grow from stamen's own page: %s", got)
		}
		awaitPool(t, base, "", w.Name, 2)
		if !w.Alive() || w.Ping(5*time.Second) != nil {
			t.Errorf("the worker stopped after refused shutdowns")
		}
		if n := parkedLen(); n != 3 {
			t.Errorf("%s holds %d messages after refused purges, want 3", parked, n)
		}
		if inspectWorker(t, base, "", w.Name).revoked["csrf-victim"] {
			t.Errorf("the worker revoked csrf-victim")
		}
		// Every refused call is in the audit log, once per origin in the
		// log: not 16 lines.
		if n := strings.Count(logs.String(), "reason=cross_site"); n != 2 {
			t.Errorf("%d log lines of cross-site refusals, want 2 (one per origin):\n%s", n, logs.String())
		}
	})

	t.Run("cached credentials do not help another site", func(t *testing.T) {
		// The operator signs in on the stamen with credentials.
		navigate(t, browser, authed+"/api/workers")
		if body := evaluate[string](t, browser, `document.body.innerText`); !strings.Contains(body, w.Name) {
			t.Fatalf("signed-in page: %.300s", body)
		}
		if n := prompts.Load(); n != 1 {
			t.Fatalf("%d login prompts, want 1", n)
		}
		// Another site's page posts a form to it: a top-level navigation,
		// to which the browser adds the credentials it cached.
		navigate(t, browser, evilPage)
		target := authed + "/api/worker/pool/grow/" + worker + "?n=1"
		evaluate[bool](t, browser, fmt.Sprintf(`(() => {
			const form = document.createElement("form");
			form.method = "POST";
			form.action = %s;
			document.body.appendChild(form);
			setTimeout(() => form.submit()); // once the evaluation returned
			return true;
		})()`, jsString(target)))
		body := pollEval(t, browser, `location.href === `+jsString(target)+` && document.body ? document.body.innerText : ""`)
		if !strings.Contains(body, "cross-origin request refused") {
			t.Errorf("the cross-site form POST showed %q, want the refusal", body)
		}
		if n := prompts.Load(); n != 1 {
			t.Errorf("%d login prompts, want none after the first: the credentials came from the cache", n)
		}
		// Refused as the signed-in user, whose name the audit log keeps.
		if got := audited(t, authed, "ops:ops-secret", "/api/worker/pool/grow/"+w.Name); len(got) != 1 || got[0] != "ops 403" {
			t.Errorf("audit records of the grow: %q, want [ops 403]\n%s", got, authedLogs.String())
		}
	})

	t.Run("allowed origin", func(t *testing.T) {
		// Basic credentials in a header of its own: every call is
		// preflighted.
		callJS := fmt.Sprintf(`(async () => {
			const headers = {Authorization: "Basic " + btoa("ops:ops-secret"), "Content-Type": "application/json"};
			const out = [];
			for (const [method, path] of [["GET", "/api/workers?workername=" + %s], ["POST", "/api/worker/pool/grow/" + %s + "?n=1"]]) {
				try {
					const r = await fetch(%s + path, {method, headers, body: method === "POST" ? "{}" : undefined});
					out.push(r.status + " " + await r.text());
				} catch (e) {
					out.push(String(e));
				}
			}
			return out;
		})()`, jsString(w.Name), jsString(worker), jsString(authed))
		navigate(t, browser, opsPage)
		got := evaluate[[]string](t, browser, callJS)
		if len(got) != 2 || !strings.HasPrefix(got[0], "200 ") || !strings.Contains(got[0], w.Name) || !strings.HasPrefix(got[1], "200 ") {
			t.Fatalf("calls from %s: %q, want both answered 200", opsPage, got)
		}
		// The cross-site grow with cached credentials was refused.
		awaitPool(t, authed, "ops:ops-secret", w.Name, 3)
		// Any other origin: the preflight is not allowed, so the browser
		// sends nothing and the page reads nothing.
		for _, page := range []string{evilPage, sameSitePage} {
			navigate(t, browser, page)
			got := evaluate[[]string](t, browser, callJS)
			if len(got) != 2 || !strings.Contains(got[0], "Failed to fetch") || !strings.Contains(got[1], "Failed to fetch") {
				t.Errorf("the same calls from %s: %q, want both blocked", page, got)
			}
		}
		awaitPool(t, authed, "ops:ops-secret", w.Name, 3)
	})

	t.Run("host check", func(t *testing.T) {
		// A page by a name that resolves to stamen's address.
		_, port, _ := net.SplitHostPort(strings.TrimPrefix(base, "http://"))
		navigate(t, browser, "http://evil.example:"+port+"/api/workers")
		if body := evaluate[string](t, browser, `document.body.innerText`); !strings.Contains(body, "is not a name of this server") || strings.Contains(body, w.Name) {
			t.Errorf("the rebinding page shows %.300s, want the refusal", body)
		}
		for _, c := range []struct {
			stamen, creds, method, path, host string
			want                              int
		}{
			{base, "", "GET", "/api/workers", "evil.example:" + port, 421},
			{base, "", "POST", "/api/task/revoke/rebind-victim", "evil.example", 421},
			{base, "", "GET", "/api/events", "evil.example:" + port, 421},
			{base, "", "GET", "/api/workers", "localhost", 200},
			{base, "", "GET", "/api/workers", "localhost:" + port, 200},
			{base, "", "GET", "/api/workers", "127.0.0.1", 200},
			{base, "", "GET", "/api/workers", "127.0.0.1:" + port, 200},
			{base, "", "GET", "/api/workers", "[::1]", 200},
			{base, "", "GET", "/api/workers", "[::1]:" + port, 200},
			{authed, "ops:ops-secret", "GET", "/api/workers", "stamen.example.com", 200},
			{authed, "ops:ops-secret", "GET", "/api/workers", "evil.example", 421},
		} {
			req, _ := http.NewRequest(c.method, c.stamen+c.path, nil)
			req.Host = c.host
			if user, pass, ok := strings.Cut(c.creds, ":"); ok {
				req.SetBasicAuth(user, pass)
			}
			if code, body := send(t, req); code != c.want {
				t.Errorf("%s %s for Host %s: %d %.200s, want %d", c.method, c.path, c.host, code, body, c.want)
			}
		}
		if inspectWorker(t, base, "", w.Name).revoked["rebind-victim"] {
			t.Errorf("the worker revoked rebind-victim")
		}
	})

	// Last, as it stops the worker: stamen's own page does what the others
	// could not.
	t.Run("stamen's own page", func(t *testing.T) {
		navigate(t, browser, base+"/healthcheck")
		for _, path := range []string{"/api/task/revoke/own-revoke", "/api/queues/purge/" + parked} {
			if got := evaluate[string](t, browser, fmt.Sprintf(ownFetchJS, jsString(base+path))); !strings.HasPrefix(got, "200 ") {
				t.Errorf("%s from stamen's own page: %s", path, got)
			}
		}
		if !inspectWorker(t, base, "", w.Name).revoked["own-revoke"] {
			t.Errorf("own-revoke not revoked by the worker")
		}
		if n := parkedLen(); n != 0 {
			t.Errorf("%s holds %d messages after the purge, want 0", parked, n)
		}
		// A form POST of the page itself.
		evaluate[bool](t, browser, fmt.Sprintf(`(() => {
			const form = document.createElement("form");
			form.method = "POST";
			form.action = %s;
			document.body.appendChild(form);
			setTimeout(() => form.submit()); // once the evaluation returned
			return true;
		})()`, jsString(base+"/api/worker/shutdown/"+worker)))
		testcluster.Eventually(t, 20*time.Second, w.Name+" shuts down", func() bool { return !w.Alive() })
	})

	// A malformed --allowed_origins stops the binary at start.
	out, code := runToExit(t, bin, append(embeddedArgs(t), "--allowed_origins", "ops.example")...)
	if code != 2 || !strings.Contains(out, `--allowed_origins: invalid origin "ops.example"`) {
		t.Errorf("exit %d, want 2 naming the bad origin:\n%s", code, out)
	}
}

// startOn runs bin with args on a free loopback port and returns its base
// URL and log, once it answers.
func startOn(t *testing.T, bin string, args ...string) (string, *lockedBuffer) {
	t.Helper()
	port := freePort(t)
	p := startProcess(t, bin, append([]string{"--port", fmt.Sprint(port)}, args...)...)
	base := fmt.Sprintf("http://127.0.0.1:%d", port)
	p.awaitUp(t, func() bool {
		resp, err := http.Get(base + "/healthcheck")
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK
	})
	return base, p.logs
}

func send(t *testing.T, req *http.Request) (int, string) {
	t.Helper()
	client := &http.Client{Timeout: 20 * time.Second}
	resp, err := client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// workerInfo is what the test reads of /api/workers?refresh=1: what the
// worker itself answered to inspect. Its pool's processes follow a grow
// within a moment; its prefetch count at once (Celery's pool_grow raises
// it by the prefetch multiplier, 4, before it replies), which tells how
// many grows the worker has obeyed.
type workerInfo struct {
	processes, prefetch int
	revoked             map[string]bool
}

func inspectWorker(t *testing.T, base, creds, name string) workerInfo {
	t.Helper()
	req, _ := http.NewRequest("GET", base+"/api/workers?refresh=1&workername="+url.QueryEscape(name), nil)
	if user, pass, ok := strings.Cut(creds, ":"); ok {
		req.SetBasicAuth(user, pass)
	}
	code, body := send(t, req)
	var workers map[string]struct {
		Stats struct {
			Pool struct {
				Processes []any `json:"processes"`
			} `json:"pool"`
			PrefetchCount int `json:"prefetch_count"`
		} `json:"stats"`
		Revoked []string `json:"revoked"`
	}
	if code != 200 || json.Unmarshal([]byte(body), &workers) != nil {
		t.Logf("/api/workers: %d %.300s", code, body)
		return workerInfo{processes: -1, prefetch: -1}
	}
	wk := workers[name]
	info := workerInfo{processes: len(wk.Stats.Pool.Processes), prefetch: wk.Stats.PrefetchCount, revoked: map[string]bool{}}
	for _, id := range wk.Revoked {
		info.revoked[id] = true
	}
	return info
}

// awaitPool waits until the worker runs processes pool processes, and
// checks that it obeyed exactly that many grows (started with one
// process).
func awaitPool(t *testing.T, base, creds, name string, processes int) {
	t.Helper()
	var last workerInfo
	testcluster.Eventually(t, 20*time.Second, fmt.Sprintf("%s runs %d pool processes", name, processes), func() bool {
		last = inspectWorker(t, base, creds, name)
		return last.processes >= processes
	})
	if want := 4 * processes; last.processes != processes || last.prefetch != want {
		t.Errorf("%s: %d pool processes, prefetch count %d; want %d and %d: it obeyed %d grows, not %d",
			name, last.processes, last.prefetch, processes, want, last.prefetch/4-1, processes-1)
	}
}

func refusalCount(t *testing.T, base, reason string) float64 {
	t.Helper()
	resp, err := http.Get(base + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	return testcluster.ParseMetrics(t, resp.Body).Sum("stamen_http_browser_refusals_total", map[string]string{"reason": reason})
}

// audited is "user status" of each audit record of path, newest first.
func audited(t *testing.T, base, creds, path string) []string {
	t.Helper()
	req, _ := http.NewRequest("GET", base+"/api/audit", nil)
	if user, pass, ok := strings.Cut(creds, ":"); ok {
		req.SetBasicAuth(user, pass)
	}
	code, body := send(t, req)
	var log struct {
		Records []struct {
			User   string `json:"user"`
			Path   string `json:"path"`
			Status int    `json:"status"`
		} `json:"records"`
	}
	if code != 200 || json.Unmarshal([]byte(body), &log) != nil {
		t.Fatalf("/api/audit: %d %s", code, body)
	}
	var out []string
	for _, r := range log.Records {
		if r.Path == path {
			out = append(out, fmt.Sprintf("%s %d", r.User, r.Status))
		}
	}
	return out
}

// startBrowser starts headless Chromium resolving host names by rules
// (--host-resolver-rules), for the test's length.
func startBrowser(t *testing.T, rules string) context.Context {
	t.Helper()
	opts := append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(testcluster.Chromium),
		// Tests run as root, where Chromium's sandbox cannot start.
		chromedp.NoSandbox,
		// httptest's TLS server has a certificate no authority signed.
		chromedp.IgnoreCertErrors,
		chromedp.Flag("host-resolver-rules", rules),
	)
	ctx, cancelTimeout := context.WithTimeout(context.Background(), 3*time.Minute)
	allocCtx, cancelAlloc := chromedp.NewExecAllocator(ctx, opts...)
	browser, cancelBrowser := chromedp.NewContext(allocCtx)
	t.Cleanup(func() {
		cancelBrowser()
		cancelAlloc() // waits for the browser process to exit
		cancelTimeout()
	})
	if err := chromedp.Do(browser); err != nil {
		t.Fatalf("start %s: %v", testcluster.Chromium, err)
	}
	return browser
}

// answerLoginOnce answers the first login prompt for the URLs matching
// pattern with user and password, as the operator does, and cancels any
// other, counting them all. Headless Chromium has no prompt to show, and
// would otherwise leave the request hanging.
func answerLoginOnce(t *testing.T, browser context.Context, pattern, user, pass string) *atomic.Int32 {
	t.Helper()
	ctx, stop := context.WithCancel(browser)
	done := make(chan struct{}, 2)
	t.Cleanup(func() {
		stop()
		<-done
		<-done
	})
	// Subscribed before Fetch.enable, so that no paused request is missed.
	paused := chromedp.Events(ctx, fetch.RequestPaused)
	challenged := chromedp.Events(ctx, fetch.AuthRequired)
	var prompts atomic.Int32
	go func() {
		defer func() { done <- struct{}{} }()
		for ev, err := range paused {
			if err != nil {
				return
			}
			_, _ = chromedp.Call(ctx, fetch.ContinueRequest, fetch.ContinueRequestParams{RequestID: ev.RequestID})
		}
	}()
	go func() {
		defer func() { done <- struct{}{} }()
		for ev, err := range challenged {
			if err != nil {
				return
			}
			answer := &fetch.AuthChallengeResponse{Response: fetch.AuthChallengeResponseResponseCancelAuth}
			if prompts.Add(1) == 1 {
				answer = &fetch.AuthChallengeResponse{Response: fetch.AuthChallengeResponseResponseProvideCredentials, Username: user, Password: pass}
			}
			_, _ = chromedp.Call(ctx, fetch.ContinueWithAuth, fetch.ContinueWithAuthParams{RequestID: ev.RequestID, AuthChallengeResponse: answer})
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

func navigate(t *testing.T, browser context.Context, u string) {
	t.Helper()
	if err := chromedp.Do(browser, chromedp.Navigate(u)); err != nil {
		t.Fatalf("navigate to %s: %v", u, err)
	}
}

// evaluate runs expr in the page, awaiting the promise it may return.
func evaluate[T any](t *testing.T, browser context.Context, expr string) T {
	t.Helper()
	ctx, cancel := context.WithTimeout(browser, 30*time.Second)
	defer cancel()
	v, err := chromedp.Run(ctx, chromedp.Evaluate[T](expr, chromedp.EvalAwaitPromise))
	if err != nil {
		t.Fatalf("evaluate %.200s: %v", expr, err)
	}
	return v
}

// pollEval evaluates expr until it is a non-empty string (30 s at most),
// through a navigation: an evaluation the navigation cuts short is tried
// again.
func pollEval(t *testing.T, browser context.Context, expr string) string {
	t.Helper()
	var s string
	testcluster.Eventually(t, 30*time.Second, "the page shows "+expr, func() bool {
		ctx, cancel := context.WithTimeout(browser, 5*time.Second)
		defer cancel()
		v, err := chromedp.Run(ctx, chromedp.Evaluate[string](expr))
		s = v
		return err == nil && v != ""
	})
	return s
}

// jsString and jsValue write Go values as JavaScript literals.
func jsString(s string) string { return jsValue(s) }

func jsValue(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	return string(b)
}
