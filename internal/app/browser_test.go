package app

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/stamen-dev/stamen/internal/auth"
	"github.com/stamen-dev/stamen/internal/testcluster"
)

// browserCall is one request as a browser (or a rebinding page) sends it.
type browserCall struct {
	method, path, host string
	headers            []string // name, value, ...
	user, pass         string
}

func (c browserCall) do(t *testing.T, base string) (*http.Response, string) {
	t.Helper()
	req, err := http.NewRequest(c.method, base+c.path, nil)
	if err != nil {
		t.Fatal(err)
	}
	if c.host != "" {
		req.Host = c.host
	}
	for i := 0; i+1 < len(c.headers); i += 2 {
		req.Header.Set(c.headers[i], c.headers[i+1])
	}
	if c.user != "" {
		req.SetBasicAuth(c.user, c.pass)
	}
	resp, body := do(t, req)
	return resp, string(body)
}

// crossSite is what Chromium sends with a form POST of another site's page.
var crossSite = []string{"Sec-Fetch-Site", "cross-site", "Origin", "https://evil.example", "Content-Type", "application/x-www-form-urlencoded"}

// auditStatuses are the statuses of the audit log's records of path, newest
// first, and their users.
func auditStatuses(t *testing.T, base, user, pass, path string) (statuses []int, users []string) {
	t.Helper()
	resp, body := browserCall{method: "GET", path: "/api/audit", user: user, pass: pass}.do(t, base)
	var log struct {
		Records []struct {
			Path   string `json:"path"`
			Status int    `json:"status"`
			User   string `json:"user"`
		} `json:"records"`
	}
	if resp.StatusCode != 200 || json.Unmarshal([]byte(body), &log) != nil {
		t.Fatalf("/api/audit: %d %s", resp.StatusCode, body)
	}
	for _, r := range log.Records {
		if r.Path == path {
			statuses, users = append(statuses, r.Status), append(users, r.User)
		}
	}
	return statuses, users
}

func refusals(t *testing.T, base, reason string) float64 {
	t.Helper()
	resp, err := http.Get(base + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	return testcluster.ParseMetrics(t, resp.Body).Sum("stamen_http_browser_refusals_total", map[string]string{"reason": reason})
}

// TestBrowserRefusalsWithoutCredentials: on the default setup (no
// credentials, Host checked), the write calls of another site's page and
// the requests for a foreign Host are refused with JSON errors, counted by
// reason, logged once per origin, measured under their operation, and
// recorded in the audit log when they are write calls; a client that is
// not a browser is served.
func TestBrowserRefusalsWithoutCredentials(t *testing.T) {
	logs := &lockedBuffer{}
	a := startEmbeddedApp(t, Config{CheckHost: true}, logs)
	srv := httptest.NewServer(a.Handler)
	t.Cleanup(srv.Close)
	for reason, want := range map[string]float64{"cross_site": 0, "origin": 0, "host": 0} {
		if got := refusals(t, srv.URL, reason); got != want {
			t.Errorf("before any refusal: %s %v, want %v", reason, got, want)
		}
	}

	for range 3 {
		resp, body := browserCall{method: "POST", path: "/api/task/revoke/csrf-1", headers: crossSite}.do(t, srv.URL)
		if resp.StatusCode != 403 || resp.Header.Get("Content-Type") != "application/json" ||
			!strings.Contains(body, `"error":"cross-origin request refused`) {
			t.Fatalf("cross-site revoke: %d %s %s, want 403 JSON", resp.StatusCode, resp.Header.Get("Content-Type"), body)
		}
	}
	resp, body := browserCall{method: "POST", path: "/api/task/revoke/csrf-1", headers: []string{"Origin", "http://evil.example"}}.do(t, srv.URL)
	if resp.StatusCode != 403 || !strings.Contains(body, "is not this server's") {
		t.Errorf("revoke from an old browser of another origin: %d %s", resp.StatusCode, body)
	}
	for _, c := range []browserCall{
		{method: "POST", path: "/api/task/revoke/rebind-1", host: "evil.example:5555"},
		{method: "GET", path: "/api/workers", host: "evil.example:5555"},
		{method: "GET", path: "/api/events", host: "evil.example"},
		{method: "GET", path: "/metrics", host: "evil.example"},
	} {
		resp, body := c.do(t, srv.URL)
		if resp.StatusCode != http.StatusMisdirectedRequest || !strings.Contains(body, `"error":"the Host \"evil.example`) {
			t.Errorf("%s %s for Host %s: %d %s, want 421 JSON", c.method, c.path, c.host, resp.StatusCode, body)
		}
	}
	// A client that is not a browser sends neither header.
	if resp, body := (browserCall{method: "POST", path: "/api/task/revoke/curl-1"}).do(t, srv.URL); resp.StatusCode != 200 {
		t.Errorf("revoke without browser headers: %d %s", resp.StatusCode, body)
	}

	for reason, want := range map[string]float64{"cross_site": 3, "origin": 1, "host": 4} {
		if got := refusals(t, srv.URL, reason); got != want {
			t.Errorf("stamen_http_browser_refusals_total{reason=%q} %v, want %v", reason, got, want)
		}
	}
	if n := requestCount(t, srv.URL, map[string]string{"operation": "revokeTask", "code": "403"}); n != 4 {
		t.Errorf("revokeTask 403s measured: %d, want 4", n)
	}
	if n := requestCount(t, srv.URL, map[string]string{"operation": "listWorkers", "code": "421"}); n != 1 {
		t.Errorf("listWorkers 421s measured: %d, want 1", n)
	}
	// Once per reason and origin: not once per request.
	text := logs.String()
	for from, want := range map[string]int{"from=https://evil.example": 1, "from=http://evil.example": 1, "from=evil.example:5555": 1, "from=evil.example\n": 1} {
		if got := strings.Count(text, from); got != want {
			t.Errorf("%d log lines %s, want %d:\n%s", got, from, want, text)
		}
	}
	// The refused write calls are in the audit log, as the anonymous
	// operator's: the caller every request is without credentials.
	if st, users := auditStatuses(t, srv.URL, "", "", "/api/task/revoke/csrf-1"); len(st) != 4 || st[0] != 403 || users[0] != auth.Anonymous {
		t.Errorf("audit of the cross-site revokes: %v by %v, want 4 403s by %s", st, users, auth.Anonymous)
	}
	if st, _ := auditStatuses(t, srv.URL, "", "", "/api/task/revoke/rebind-1"); len(st) != 1 || st[0] != 421 {
		t.Errorf("audit of the revoke for a foreign Host: %v, want [421]", st)
	}
}

// TestBrowserChecksOrder: with credentials configured, the Host check
// comes before them (a rebinding page learns nothing of a password it
// tries), the allowed origin's preflight is answered without them, and a
// cross-site write call with valid credentials, which a browser adds from
// its cache, is refused and recorded under the user's name.
func TestBrowserChecksOrder(t *testing.T) {
	var authn auth.Authenticator
	if err := authn.AddBasic("ops:ops-secret,viewer:v", auth.Operator); err != nil {
		t.Fatal(err)
	}
	a := startEmbeddedApp(t, Config{CheckHost: true, Auth: &authn, AllowedOrigins: []string{"https://ops.example"}}, &lockedBuffer{})
	srv := httptest.NewServer(a.Handler)
	t.Cleanup(srv.Close)

	for _, pass := range []string{"wrong", "ops-secret"} {
		resp, body := browserCall{method: "POST", path: "/api/task/revoke/rebind-2", host: "evil.example", user: "ops", pass: pass}.do(t, srv.URL)
		if resp.StatusCode != http.StatusMisdirectedRequest {
			t.Errorf("foreign Host, password %q: %d %s, want 421 whatever the password", pass, resp.StatusCode, body)
		}
	}
	resp, body := browserCall{method: "POST", path: "/api/task/revoke/csrf-2", headers: crossSite}.do(t, srv.URL)
	if resp.StatusCode != 401 {
		t.Errorf("cross-site revoke without credentials: %d %s, want 401", resp.StatusCode, body)
	}
	resp, body = browserCall{method: "POST", path: "/api/task/revoke/csrf-2", headers: crossSite, user: "ops", pass: "ops-secret"}.do(t, srv.URL)
	if resp.StatusCode != 403 || resp.Header.Get("Access-Control-Allow-Origin") != "" {
		t.Errorf("cross-site revoke with cached credentials: %d %v %s, want 403 without CORS headers", resp.StatusCode, resp.Header, body)
	}
	if st, users := auditStatuses(t, srv.URL, "ops", "ops-secret", "/api/task/revoke/csrf-2"); len(st) != 1 || st[0] != 403 || users[0] != "ops" {
		t.Errorf("audit of the cross-site revoke: %v by %v, want [403] by ops", st, users)
	}
	if st, _ := auditStatuses(t, srv.URL, "ops", "ops-secret", "/api/task/revoke/rebind-2"); len(st) != 0 {
		t.Errorf("audit of the revokes for a foreign Host: %v, want none (no caller is identified before the Host check)", st)
	}

	preflight := func(origin string) (*http.Response, string) {
		return browserCall{method: "OPTIONS", path: "/api/task/revoke/cors-1", headers: []string{
			"Origin", origin, "Sec-Fetch-Site", "cross-site", "Access-Control-Request-Method", "POST",
			"Access-Control-Request-Headers", "authorization"}}.do(t, srv.URL)
	}
	if resp, body := preflight("https://ops.example"); resp.StatusCode != 204 || resp.Header.Get("Access-Control-Allow-Origin") != "https://ops.example" {
		t.Errorf("preflight of the allowed origin: %d %v %s, want 204 allowing it", resp.StatusCode, resp.Header, body)
	}
	if resp, _ := preflight("https://evil.example"); resp.StatusCode == 204 || resp.Header.Get("Access-Control-Allow-Origin") != "" {
		t.Errorf("preflight of another origin: %d %v, want a refusal without CORS headers", resp.StatusCode, resp.Header)
	}
	resp, body = browserCall{method: "POST", path: "/api/task/revoke/cors-1", user: "ops", pass: "ops-secret",
		headers: []string{"Origin", "https://ops.example", "Sec-Fetch-Site", "cross-site"}}.do(t, srv.URL)
	if resp.StatusCode != 200 || resp.Header.Get("Access-Control-Allow-Origin") != "https://ops.example" {
		t.Errorf("revoke from the allowed origin: %d %v %s, want 200 with CORS headers", resp.StatusCode, resp.Header, body)
	}
}
