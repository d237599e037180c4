package crossorigin

import (
	"bytes"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
)

// served is the guard's handler around one that answers 200 "served";
// denials answer status and msg.
func served(g *Guard, wrap func(Deny, http.Handler) http.Handler) http.Handler {
	ok := http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte("served")) })
	deny := func(w http.ResponseWriter, _ *http.Request, status int, msg string) { http.Error(w, msg, status) }
	return wrap(deny, ok)
}

func request(method, target, host string, headers ...string) *http.Request {
	r := httptest.NewRequest(method, target, nil)
	r.Host = host
	for i := 0; i+1 < len(headers); i += 2 {
		r.Header.Set(headers[i], headers[i+1])
	}
	return r
}

func serve(h http.Handler, r *http.Request) *httptest.ResponseRecorder {
	w := httptest.NewRecorder()
	h.ServeHTTP(w, r)
	return w
}

func TestCheckHost(t *testing.T) {
	g, err := New(Config{CheckHost: true, AllowedHosts: []string{"stamen.example.com"}})
	if err != nil {
		t.Fatal(err)
	}
	h := served(g, g.CheckHost)
	for host, want := range map[string]bool{
		"localhost": true, "localhost:5555": true, "LOCALHOST.:1": true,
		"127.0.0.1": true, "127.0.0.1:5555": true, "127.1.2.3:80": true,
		"[::1]": true, "[::1]:5555": true, "::1": true,
		// An address is never a rebinding page's: see CheckHost.
		"10.0.0.5:5555": true, "[fd00::1]:80": true, "": true,
		"stamen.example.com": true, "Stamen.Example.com:443": true,
		"evil.example": false, "evil.example:5555": false, "localhost.evil.example": false,
		"example.com.stamen": false, "sub.stamen.example.com": false, "127.0.0.1.nip.io": false,
	} {
		w := serve(h, request("GET", "/api/workers", host))
		if got := w.Code == 200; got != want {
			t.Errorf("Host %q: %d %s, want served %v", host, w.Code, w.Body, want)
		}
		if !want && (w.Code != http.StatusMisdirectedRequest || !strings.Contains(w.Body.String(), "--allowed_hosts")) {
			t.Errorf("Host %q: %d %s, want 421 naming --allowed_hosts", host, w.Code, w.Body)
		}
	}

	off, err := New(Config{})
	if err != nil {
		t.Fatal(err)
	}
	if w := serve(served(off, off.CheckHost), request("GET", "/", "evil.example")); w.Code != 200 {
		t.Errorf("check off: %d", w.Code)
	}
}

func TestCheckWrites(t *testing.T) {
	var counted []string
	g, err := New(Config{AllowedOrigins: []string{"https://ops.example"}, Count: func(r string) { counted = append(counted, r) }})
	if err != nil {
		t.Fatal(err)
	}
	h := served(g, g.CheckWrites)
	const host = "127.0.0.1:5555"
	for _, tc := range []struct {
		name    string
		r       *http.Request
		reason  string // "" when served
		message string
	}{
		{name: "no browser headers (curl, SDKs)", r: request("POST", "/api/task/revoke/x", host)},
		{name: "same origin", r: request("POST", "/", host, "Sec-Fetch-Site", "same-origin", "Origin", "http://"+host)},
		{name: "typed by the user", r: request("POST", "/", host, "Sec-Fetch-Site", "none")},
		{name: "old browser, same origin", r: request("POST", "/", host, "Origin", "http://"+host)},
		{name: "cross-site read", r: request("GET", "/api/workers", host, "Sec-Fetch-Site", "cross-site", "Origin", "https://evil.example")},
		{name: "preflight", r: request("OPTIONS", "/", host, "Sec-Fetch-Site", "cross-site", "Origin", "https://evil.example")},
		{name: "allowed origin", r: request("POST", "/", host, "Sec-Fetch-Site", "cross-site", "Origin", "https://ops.example")},
		{name: "cross-site", r: request("POST", "/", host, "Sec-Fetch-Site", "cross-site", "Origin", "https://evil.example"),
			reason: ReasonCrossSite, message: `Sec-Fetch-Site: \"cross-site\"`},
		// 127.0.0.1:8080 and 127.0.0.1:5555 are the same site.
		{name: "same site", r: request("POST", "/", host, "Sec-Fetch-Site", "same-site", "Origin", "http://127.0.0.1:8080"),
			reason: ReasonCrossSite, message: `Sec-Fetch-Site: \"same-site\"`},
		{name: "old browser, other origin", r: request("POST", "/", host, "Origin", "https://evil.example"),
			reason: ReasonOrigin, message: `Origin \"https://evil.example\" is not this server's (Host \"127.0.0.1:5555\")`},
		{name: "allowed origin written otherwise", r: request("POST", "/", host, "Sec-Fetch-Site", "cross-site", "Origin", "https://OPS.example"),
			reason: ReasonCrossSite},
	} {
		counted = nil
		w := serve(h, tc.r)
		if tc.reason == "" {
			if w.Code != 200 || len(counted) != 0 {
				t.Errorf("%s: %d %s (counted %q), want served", tc.name, w.Code, w.Body, counted)
			}
			continue
		}
		if w.Code != 403 || !strings.Contains(w.Body.String(), "--allowed_origins") {
			t.Errorf("%s: %d %s, want 403 naming --allowed_origins", tc.name, w.Code, w.Body)
		}
		if tc.message != "" && !strings.Contains(w.Body.String(), strings.ReplaceAll(tc.message, `\"`, `"`)) {
			t.Errorf("%s: %s, want it to say %s", tc.name, w.Body, tc.message)
		}
		if len(counted) != 1 || counted[0] != tc.reason {
			t.Errorf("%s: counted %q, want [%s]", tc.name, counted, tc.reason)
		}
	}
}

func TestCORS(t *testing.T) {
	g, err := New(Config{AllowedOrigins: []string{"https://ops.example"}})
	if err != nil {
		t.Fatal(err)
	}
	h := g.CORS(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusTeapot) // what the API behind answers
	}))
	preflight := func(origin string) *http.Request {
		return request("OPTIONS", "/api/worker/pool/grow/w", "127.0.0.1:5555", "Origin", origin,
			"Access-Control-Request-Method", "POST", "Access-Control-Request-Headers", "authorization,content-type",
			"Access-Control-Request-Private-Network", "true")
	}

	w := serve(h, preflight("https://ops.example"))
	want := map[string]string{
		"Access-Control-Allow-Origin":          "https://ops.example",
		"Access-Control-Allow-Credentials":     "true",
		"Access-Control-Allow-Methods":         "GET, HEAD, POST",
		"Access-Control-Allow-Headers":         "Authorization, Content-Type, Last-Event-ID",
		"Access-Control-Allow-Private-Network": "true",
		"Access-Control-Max-Age":               corsMaxAge,
		"Vary":                                 "Origin",
	}
	if w.Code != http.StatusNoContent {
		t.Errorf("allowed preflight: %d, want 204", w.Code)
	}
	for k, v := range want {
		if got := w.Header().Get(k); got != v {
			t.Errorf("allowed preflight: %s %q, want %q", k, got, v)
		}
	}

	w = serve(h, request("POST", "/api/worker/pool/grow/w", "127.0.0.1:5555", "Origin", "https://ops.example"))
	if w.Code != http.StatusTeapot || w.Header().Get("Access-Control-Allow-Origin") != "https://ops.example" ||
		!strings.Contains(w.Header().Get("Access-Control-Expose-Headers"), "Retry-After") {
		t.Errorf("allowed request: %d %v, want the API's answer with CORS headers", w.Code, w.Header())
	}

	for _, r := range []*http.Request{
		preflight("https://evil.example"),
		preflight("https://ops.example.evil.example"),
		request("POST", "/", "127.0.0.1:5555", "Origin", "https://evil.example"),
		request("OPTIONS", "/", "127.0.0.1:5555"),
		request("GET", "/", "127.0.0.1:5555"),
	} {
		w := serve(h, r)
		if w.Code != http.StatusTeapot {
			t.Errorf("%s from %q: %d, want the API's answer", r.Method, r.Header.Get("Origin"), w.Code)
		}
		for k := range w.Header() {
			if strings.HasPrefix(k, "Access-Control-") {
				t.Errorf("%s from %q: %s set", r.Method, r.Header.Get("Origin"), k)
			}
		}
		if w.Header().Get("Vary") != "Origin" {
			t.Errorf("%s from %q: Vary %q, want Origin", r.Method, r.Header.Get("Origin"), w.Header().Get("Vary"))
		}
	}

	none, err := New(Config{})
	if err != nil {
		t.Fatal(err)
	}
	w = serve(none.CORS(http.NotFoundHandler()), preflight("https://ops.example"))
	if len(w.Header().Values("Vary")) != 0 || w.Header().Get("Access-Control-Allow-Origin") != "" {
		t.Errorf("no allowed origins: headers %v, want none added", w.Header())
	}
}

// TestRefusalsLoggedOncePerMinute: a flood of refusals from one origin
// makes one log line a minute, which then says how many were not logged;
// every refusal is counted.
func TestRefusalsLoggedOncePerMinute(t *testing.T) {
	var logs bytes.Buffer
	count := map[string]int{}
	g, err := New(Config{CheckHost: true, Log: slog.New(slog.NewTextHandler(&logs, nil)), Count: func(r string) { count[r]++ }})
	if err != nil {
		t.Fatal(err)
	}
	now := time.Unix(1_800_000_000, 0)
	g.throttle.now = func() time.Time { return now }
	writes, hosts := served(g, g.CheckWrites), served(g, g.CheckHost)
	post := func(origin string) {
		serve(writes, request("POST", "/api/task/revoke/x", "127.0.0.1:5555", "Sec-Fetch-Site", "cross-site", "Origin", origin))
	}
	lines := func() []string { return strings.Split(strings.TrimSpace(logs.String()), "\n") }

	for range 1000 {
		post("https://evil.example")
	}
	post("https://other.example")
	serve(hosts, request("GET", "/api/workers", "rebind.example:5555"))
	serve(hosts, request("GET", "/api/events", "rebind.example:5555"))
	if got := lines(); len(got) != 3 ||
		!strings.Contains(got[0], "reason=cross_site") || !strings.Contains(got[0], "from=https://evil.example") ||
		!strings.Contains(got[0], "path=/api/task/revoke/x") ||
		!strings.Contains(got[1], "from=https://other.example") ||
		!strings.Contains(got[2], "reason=host") || !strings.Contains(got[2], "from=rebind.example:5555") {
		t.Fatalf("log lines:\n%s\nwant one each for evil.example, other.example and the Host", logs.String())
	}
	if count[ReasonCrossSite] != 1001 || count[ReasonHost] != 2 {
		t.Errorf("counted %v, want every refusal", count)
	}

	now = now.Add(59 * time.Second)
	post("https://evil.example")
	if got := lines(); len(got) != 3 {
		t.Fatalf("a line within the minute:\n%s", logs.String())
	}
	now = now.Add(time.Second)
	post("https://evil.example")
	if got := lines(); len(got) != 4 || !strings.Contains(got[3], "from=https://evil.example") || !strings.Contains(got[3], "not_logged_since=1000") {
		t.Fatalf("log lines:\n%s\nwant a fourth a minute later, saying 1000 were not logged", logs.String())
	}
}

// TestRefusalLogBounded: the origins logged apart are bounded; beyond
// them, refusals share one line a minute.
func TestRefusalLogBounded(t *testing.T) {
	var logs bytes.Buffer
	g, err := New(Config{Log: slog.New(slog.NewTextHandler(&logs, nil))})
	if err != nil {
		t.Fatal(err)
	}
	now := time.Unix(1_800_000_000, 0)
	g.throttle.now = func() time.Time { return now }
	h := served(g, g.CheckWrites)
	for i := range 3 * maxLogged {
		serve(h, request("POST", "/", "127.0.0.1:1", "Sec-Fetch-Site", "cross-site", "Origin", fmt.Sprintf("https://e%d.example", i)))
	}
	if n := strings.Count(logs.String(), "\n"); n != maxLogged+1 {
		t.Errorf("%d lines for %d origins, want %d: one each for the first %d, one for the rest", n, 3*maxLogged, maxLogged+1, maxLogged)
	}
	if len(g.throttle.slots) > maxLogged+1 {
		t.Errorf("%d keys remembered, want at most %d", len(g.throttle.slots), maxLogged+1)
	}
	// A minute on, the old keys make room for new ones.
	now = now.Add(time.Minute)
	logs.Reset()
	serve(h, request("POST", "/", "127.0.0.1:1", "Sec-Fetch-Site", "cross-site", "Origin", "https://new.example"))
	if !strings.Contains(logs.String(), "from=https://new.example") {
		t.Errorf("a new origin a minute later: %q", logs.String())
	}
}
