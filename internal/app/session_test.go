package app

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/stamen-dev/stamen/internal/auth"
	"github.com/stamen-dev/stamen/internal/ui"
)

// TestSession: GET /api/session tells the caller who stamen takes it for,
// for each way of authenticating, and --read_only.
func TestSession(t *testing.T) {
	const token = "viewer-token-0123456789"
	var authn auth.Authenticator
	for _, err := range []error{
		authn.AddBasic("op:op-secret", auth.Operator),
		authn.AddBasic("viewer:viewer-secret", auth.Viewer),
		authn.AddTokens(token, auth.Viewer),
	} {
		if err != nil {
			t.Fatal(err)
		}
	}
	withAuth := newEmbeddedWith(t, Config{Auth: &authn})
	open := newEmbedded(t, "")
	readOnly := newEmbeddedWith(t, Config{ReadOnly: true})
	for _, c := range []struct {
		name string
		url  string
		set  func(*http.Request)
		code int
		want string
	}{
		{"no credentials configured", open.URL, nil, 200, `{"auth":"none","read_only":false,"role":"operator","user":"anonymous"}`},
		{"read only", readOnly.URL, nil, 200, `{"auth":"none","read_only":true,"role":"operator","user":"anonymous"}`},
		{"basic viewer", withAuth.URL, func(r *http.Request) { r.SetBasicAuth("viewer", "viewer-secret") }, 200, `{"auth":"basic","read_only":false,"role":"viewer","user":"viewer"}`},
		{"basic operator", withAuth.URL, func(r *http.Request) { r.SetBasicAuth("op", "op-secret") }, 200, `{"auth":"basic","read_only":false,"role":"operator","user":"op"}`},
		{"bearer viewer", withAuth.URL, func(r *http.Request) { r.Header.Set("Authorization", "Bearer "+token) }, 200, `{"auth":"bearer","read_only":false,"role":"viewer","user":"` + auth.TokenName(token) + `"}`},
		{"no credentials", withAuth.URL, nil, 401, `{"error":"authentication required"}`},
	} {
		req, _ := http.NewRequest("GET", c.url+"/api/session", nil)
		if c.set != nil {
			c.set(req)
		}
		resp, b := do(t, req)
		var got, want any
		_ = json.Unmarshal(b, &got)
		_ = json.Unmarshal([]byte(c.want), &want)
		gb, _ := json.Marshal(got)
		wb, _ := json.Marshal(want)
		if resp.StatusCode != c.code || string(gb) != string(wb) {
			t.Errorf("%s: %d %s, want %d %s", c.name, resp.StatusCode, b, c.code, c.want)
		}
	}
}

// TestDashboardRoutes: the page answers every GET outside the API and the
// server's own paths, without credentials (it holds no data), with its
// CSP; the API, the docs and the spec keep their answers.
func TestDashboardRoutes(t *testing.T) {
	var authn auth.Authenticator
	if err := authn.AddBasic("op:op-secret", auth.Operator); err != nil {
		t.Fatal(err)
	}
	for _, prefix := range []string{"", "flower"} {
		srv := newEmbeddedWith(t, Config{Auth: &authn, URLPrefix: prefix})
		base := srv.URL
		if prefix != "" {
			base += "/" + prefix
		}
		for _, p := range []string{"/", "/tasks?state=FAILURE", "/task/x", "/worker/a@b", "/queues", "/settings", "/no/such/page"} {
			code, body, h := get(t, base+p)
			if code != 200 || h.Get("Content-Security-Policy") != ui.CSP || !strings.Contains(body, `<div id="app">`) {
				t.Errorf("prefix %q: GET %s = %d %v %.200s", prefix, p, code, h, body)
			}
		}
		for _, c := range []struct {
			method, path string
			code         int
		}{
			{"GET", "/api/nowhere", 401},
			{"GET", "/api/workers", 401},
			{"POST", "/", 401},
			{"GET", "/swagger.json/", 401},
			{"GET", "/debug/pprof/", 401},
			{"GET", "/healthcheck", 200},
			{"GET", "/swagger.json", 200},
		} {
			req, _ := http.NewRequest(c.method, base+c.path, nil)
			resp, b := do(t, req)
			if resp.StatusCode != c.code || strings.Contains(string(b), `<div id="app">`) {
				t.Errorf("prefix %q: %s %s = %d %.100s, want %d and no page", prefix, c.method, c.path, resp.StatusCode, b, c.code)
			}
		}
	}
	// Without credentials configured an unknown API path is the API's
	// JSON 404, not the page.
	srv := newEmbedded(t, "")
	for _, p := range []string{"/api/nowhere", "/debug/pprof/"} {
		code, body, _ := get(t, srv.URL+p)
		if code != 404 || !strings.Contains(body, `"error"`) {
			t.Errorf("GET %s = %d %s, want a JSON 404", p, code, body)
		}
	}
}
