package app

import (
	"context"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"reflect"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"

	"github.com/stamen-dev/stamen/handlers"
	"github.com/stamen-dev/stamen/internal/auth"
	"github.com/stamen-dev/stamen/internal/contract"
	"github.com/stamen-dev/stamen/restapi/operations"
)

// newEmbedded starts an App on its embedded broker: enough for the HTTP
// surface that needs no worker.
func newEmbedded(t *testing.T, prefix string) *httptest.Server {
	t.Helper()
	return newEmbeddedWith(t, Config{URLPrefix: prefix})
}

func newEmbeddedWith(t *testing.T, cfg Config) *httptest.Server {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	cfg.EmbeddedAddr = l.Addr().String()
	l.Close()
	a, err := New(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(a.Handler)
	t.Cleanup(func() { srv.Close(); a.Close() })
	return srv
}

func get(t *testing.T, url string) (int, string, http.Header) {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b), resp.Header
}

// do sends req and returns the response with its whole body read.
func do(t *testing.T, req *http.Request) (*http.Response, []byte) {
	t.Helper()
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp, b
}

// TestServedSpecEqualsSwaggerYAML checks that the spec served is
// swagger.yaml but for its basePath, which is where the operations are
// served: --url_prefix under one, so that a client generated from the
// served spec calls them there.
func TestServedSpecEqualsSwaggerYAML(t *testing.T) {
	raw, err := os.ReadFile("../../swagger.yaml")
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct{ prefix, basePath string }{
		{"", "/"},
		{"flower", "/flower"},
		{"/team/flower/", "/team/flower"},
	} {
		srv := newEmbedded(t, tc.prefix)
		base := srv.URL + strings.TrimSuffix(tc.basePath, "/")
		var fromFile map[string]any
		if err := yaml.Unmarshal(raw, &fromFile); err != nil {
			t.Fatal(err)
		}
		fromFile["basePath"] = tc.basePath
		for _, path := range []string{"/swagger.json", "/swagger.yaml"} {
			code, body, _ := get(t, base+path)
			if code != 200 {
				t.Fatalf("prefix %q: %s: %d", tc.prefix, path, code)
			}
			var served any
			if err := yaml.Unmarshal([]byte(body), &served); err != nil {
				t.Fatalf("prefix %q: %s: %v", tc.prefix, path, err)
			}
			// Compare through JSON so that YAML's and JSON's number types agree;
			// go-swagger leaves out "required: false", the default.
			dropDefaultRequired(fromFile)
			a, _ := json.Marshal(fromFile)
			b, _ := json.Marshal(served)
			if string(a) != string(b) {
				t.Errorf("prefix %q: %s differs from swagger.yaml with basePath %s", tc.prefix, path, tc.basePath)
			}
		}
	}
}

// TestBarePrefixRedirectsIntoIt checks that GET /<prefix>, the prefix's
// root, redirects to /<prefix>/ (the prefix's "/"), never outside the
// prefix, with no HTML body, and that what it leads to is what "/" answers
// without a prefix.
func TestBarePrefixRedirectsIntoIt(t *testing.T) {
	var authn auth.Authenticator
	if err := authn.AddBasic("op:op-secret", auth.Operator); err != nil {
		t.Fatal(err)
	}
	root := newEmbeddedWith(t, Config{Auth: &authn})
	noFollow := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	call := func(t *testing.T, c *http.Client, u string) (*http.Response, string) {
		t.Helper()
		req, err := http.NewRequest("GET", u, nil)
		if err != nil {
			t.Fatal(err)
		}
		req.SetBasicAuth("op", "op-secret")
		resp, err := c.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		if err != nil {
			t.Fatal(err)
		}
		return resp, string(b)
	}
	rootResp, rootBody := call(t, noFollow, root.URL+"/")
	for _, tc := range []struct{ prefix, path, want string }{
		{"flower", "/flower", "/flower/"},
		{"flower", "/flower?refresh=1", "/flower/?refresh=1"},
		{"team/flower", "/team/flower", "/team/flower/"},
	} {
		srv := newEmbeddedWith(t, Config{URLPrefix: tc.prefix, Auth: &authn})
		resp, body := call(t, noFollow, srv.URL+tc.path)
		if resp.StatusCode != http.StatusTemporaryRedirect {
			t.Errorf("GET %s = %d, want 307: %.200s", tc.path, resp.StatusCode, body)
			continue
		}
		loc, err := resp.Request.URL.Parse(resp.Header.Get("Location"))
		if err != nil || loc.RequestURI() != tc.want || loc.Host != resp.Request.URL.Host {
			t.Errorf("GET %s: Location %q resolves to %v (%v), want %s", tc.path, resp.Header.Get("Location"), loc, err, tc.want)
		}
		if ct := resp.Header.Get("Content-Type"); body != "" && ct != "application/json" {
			t.Errorf("GET %s: body %q of type %q, want none or JSON", tc.path, body, ct)
		}
		// Followed, it answers as "/" does without a prefix.
		end, endBody := call(t, http.DefaultClient, srv.URL+tc.path)
		if end.StatusCode != rootResp.StatusCode || endBody != rootBody || end.Request.URL.Path != tc.want[:strings.Index(tc.want+"?", "?")] {
			t.Errorf("GET %s leads to %s: %d %q; \"/\" without a prefix answers %d %q",
				tc.path, end.Request.URL, end.StatusCode, endBody, rootResp.StatusCode, rootBody)
		}
	}
}

// TestDocsErrorsAreJSON checks that an error of /docs/ (a file Swagger UI
// does not have, a range a file does not have) is the JSON
// {"error": "..."} of every other error, under --url_prefix too.
func TestDocsErrorsAreJSON(t *testing.T) {
	for _, prefix := range []string{"", "flower"} {
		srv := newEmbedded(t, prefix)
		base := srv.URL
		if prefix != "" {
			base += "/" + prefix
		}
		for _, tc := range []struct {
			path, rangeHeader string
			want              int
		}{
			{"/docs/no-such-file", "", 404},
			{"/docs/no-such-file.js", "", 404},
			{"/docs/no/such/dir/", "", 404},
			{"/docs/swagger-ui.css", "bytes=999999999-", 416},
		} {
			req, err := http.NewRequest("GET", base+tc.path, nil)
			if err != nil {
				t.Fatal(err)
			}
			if tc.rangeHeader != "" {
				req.Header.Set("Range", tc.rangeHeader)
			}
			resp, b := do(t, req)
			var e map[string]string
			if resp.StatusCode != tc.want || resp.Header.Get("Content-Type") != "application/json" ||
				json.Unmarshal(b, &e) != nil || e["error"] == "" || len(e) != 1 {
				t.Errorf("prefix %q: GET %s = %d %s %q, want %d JSON {\"error\": \"...\"}",
					prefix, tc.path, resp.StatusCode, resp.Header.Get("Content-Type"), b, tc.want)
			}
		}
	}
}

func TestDocsServeSwaggerUIOffline(t *testing.T) {
	for _, prefix := range []string{"", "flower"} {
		srv := newEmbedded(t, prefix)
		base := srv.URL
		if prefix != "" {
			base += "/" + prefix
		}
		code, page, _ := get(t, base+"/docs/")
		if code != 200 || !strings.Contains(page, "swagger-ui-bundle.js") || strings.Contains(page, "https://") {
			t.Fatalf("prefix %q: /docs/ = %d: %.200s", prefix, code, page)
		}
		// /docs redirects relative to where the browser is, prefix included.
		noFollow := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
		resp, err := noFollow.Get(base + "/docs")
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusMovedPermanently || resp.Header.Get("Location") != "docs/" {
			t.Errorf("prefix %q: /docs = %d, Location %q", prefix, resp.StatusCode, resp.Header.Get("Location"))
		}
		for _, asset := range []string{"swagger-ui-bundle.js", "swagger-ui-standalone-preset.js", "swagger-ui.css", "stamen-initializer.js"} {
			if code, body, _ := get(t, base+"/docs/"+asset); code != 200 || len(body) == 0 {
				t.Errorf("prefix %q: %s = %d", prefix, asset, code)
			}
		}
		if code, _, _ := get(t, base+"/healthcheck"); code != 200 {
			t.Errorf("prefix %q: healthcheck %d", prefix, code)
		}
		if code, body, _ := get(t, base+"/api/workers"); code != 200 || !strings.HasPrefix(body, "{") {
			t.Errorf("prefix %q: /api/workers %d %s", prefix, code, body)
		}
		if prefix != "" {
			if code, body, _ := get(t, srv.URL+"/api/workers"); code != 404 || !strings.Contains(body, `"error"`) {
				t.Errorf("outside the prefix: %d %s", code, body)
			}
		}
	}
}

// TestAuthThroughTheGeneratedAPI checks that the spec's security schemes
// and the auth middleware agree: the middleware answers, the generated API
// accepts the callers it let through, and nothing else.
func TestAuthThroughTheGeneratedAPI(t *testing.T) {
	const token = "operator-token-0123456789"
	var authn auth.Authenticator
	for _, err := range []error{
		authn.AddBasic("op:op-secret", auth.Operator),
		authn.AddBasic("viewer:viewer-secret", auth.Viewer),
		authn.AddTokens(token, auth.Operator),
	} {
		if err != nil {
			t.Fatal(err)
		}
	}
	srv := newEmbeddedWith(t, Config{Auth: &authn})
	do := func(method, path string, set func(*http.Request)) (int, string, http.Header) {
		t.Helper()
		req, err := http.NewRequest(method, srv.URL+path, nil)
		if err != nil {
			t.Fatal(err)
		}
		if set != nil {
			set(req)
		}
		resp, b := do(t, req)
		return resp.StatusCode, string(b), resp.Header
	}
	basic := func(u, p string) func(*http.Request) { return func(r *http.Request) { r.SetBasicAuth(u, p) } }
	bearer := func(r *http.Request) { r.Header.Set("Authorization", "Bearer "+token) }

	for _, tc := range []struct {
		name, method, path string
		set                func(*http.Request)
		want               int
	}{
		{"no credentials", "GET", "/api/workers", nil, 401},
		{"wrong password", "GET", "/api/workers", basic("op", "nope"), 401},
		{"a path outside the spec", "GET", "/api/nowhere", nil, 401},
		{"viewer reads", "GET", "/api/workers", basic("viewer", "viewer-secret"), 200},
		{"operator reads", "GET", "/api/workers", basic("op", "op-secret"), 200},
		{"bearer token reads", "GET", "/api/task/types", bearer, 200},
		{"viewer writes", "POST", "/api/task/revoke/some-id", basic("viewer", "viewer-secret"), 403},
		{"operator writes", "POST", "/api/task/revoke/some-id", basic("op", "op-secret"), 200},
		{"bearer token writes", "POST", "/api/task/revoke/some-id", bearer, 200},
		{"viewer reads the audit log", "GET", "/api/audit", basic("viewer", "viewer-secret"), 403},
		// The router serves /api/audit/ as the audit log: it is refused alike.
		{"viewer reads the audit log by another path", "GET", "/api/audit/", basic("viewer", "viewer-secret"), 403},
	} {
		code, body, h := do(tc.method, tc.path, tc.set)
		if code != tc.want {
			t.Errorf("%s: %s %s = %d, want %d: %s", tc.name, tc.method, tc.path, code, tc.want, body)
			continue
		}
		if code >= 400 && !strings.Contains(body, `"error"`) {
			t.Errorf("%s: %d without a JSON error: %s", tc.name, code, body)
		}
		if code == 401 && len(h.Values("WWW-Authenticate")) == 0 {
			t.Errorf("%s: 401 without WWW-Authenticate", tc.name)
		}
	}
	for _, path := range []string{"/healthcheck", "/metrics", "/swagger.json", "/swagger.yaml", "/docs/", "/docs/swagger-ui-bundle.js"} {
		if code, body, _ := do("GET", path, nil); code != 200 {
			t.Errorf("%s without credentials: %d %.200s", path, code, body)
		}
	}
}

// TestAPIWithoutTheMiddlewareRefuses checks that the generated API's
// authenticators trust only a role the middleware put in the request, not
// an Authorization header it never checked.
func TestAPIWithoutTheMiddlewareRefuses(t *testing.T) {
	api, err := NewAPI(handlers.New(handlers.Config{}))
	if err != nil {
		t.Fatal(err)
	}
	h := api.Serve(nil)
	for _, set := range []func(*http.Request){
		func(*http.Request) {},
		func(r *http.Request) { r.SetBasicAuth("anyone", "anything") },
		func(r *http.Request) { r.Header.Set("Authorization", "Bearer any-token-0123456789") },
	} {
		r := httptest.NewRequest("GET", "/api/workers", nil)
		set(r)
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		if w.Code != 401 {
			t.Errorf("Authorization %q: %d, want 401: %s", r.Header.Get("Authorization"), w.Code, w.Body)
		}
	}
}

func TestSpecDeclaresTheSecuritySchemes(t *testing.T) {
	srv := newEmbedded(t, "")
	_, body, _ := get(t, srv.URL+"/swagger.json")
	var spec struct {
		SecurityDefinitions map[string]struct {
			Type string `json:"type"`
			In   string `json:"in"`
			Name string `json:"name"`
		} `json:"securityDefinitions"`
		Security []map[string][]string `json:"security"`
	}
	if err := json.Unmarshal([]byte(body), &spec); err != nil {
		t.Fatal(err)
	}
	if d := spec.SecurityDefinitions["basicAuth"]; d.Type != "basic" {
		t.Errorf("basicAuth: %+v", d)
	}
	if d := spec.SecurityDefinitions["bearerAuth"]; d.Type != "apiKey" || d.In != "header" || d.Name != "Authorization" {
		t.Errorf("bearerAuth: %+v", d)
	}
	// Either scheme alone suffices: two requirements, one scheme each.
	if len(spec.Security) != 2 || spec.Security[0]["basicAuth"] == nil || spec.Security[1]["bearerAuth"] == nil {
		t.Errorf("security: %v", spec.Security)
	}
}

// TestEveryOperationHasAHandler: the API has one handler field per
// operation of the spec, NewAPI fills them all, and it refuses to start
// when one is left without a hand-written handler (the generated stub
// would answer 501).
func TestEveryOperationHasAHandler(t *testing.T) {
	rules, err := contract.Load()
	if err != nil {
		t.Fatal(err)
	}
	api, err := NewAPI(handlers.New(handlers.Config{}))
	if err != nil {
		t.Fatal(err)
	}
	fields := handlerFuncs(api)
	if len(fields) != len(rules.Operations()) {
		t.Errorf("%d operation handlers in the generated API, %d operations in swagger.yaml", len(fields), len(rules.Operations()))
	}
	for name, fn := range fields {
		if fn == 0 {
			t.Errorf("%s is not set", name)
		}
	}

	// A register that forgets one operation: every handler of api but
	// abortTask's.
	_, err = newAPI(func(into *operations.StamenAPI) {
		from, to := reflect.ValueOf(api).Elem(), reflect.ValueOf(into).Elem()
		for name := range fields {
			if name != "TasksAbortTaskHandler" {
				to.FieldByName(name).Set(from.FieldByName(name))
			}
		}
		into.ServeError, into.JSONConsumer, into.TextEventStreamProducer = api.ServeError, api.JSONConsumer, api.TextEventStreamProducer
	})
	if err == nil || !strings.Contains(err.Error(), "tasks.AbortTaskHandler") {
		t.Errorf("a forgotten handler: %v, want an error naming it", err)
	}
}

// handlerFuncs returns, per operation handler field of api, the code
// pointer of the function behind it, 0 for none.
func handlerFuncs(api *operations.StamenAPI) map[string]uintptr {
	out := map[string]uintptr{}
	v := reflect.ValueOf(api).Elem()
	for i := range v.NumField() {
		f := v.Type().Field(i)
		if !f.IsExported() || !strings.HasSuffix(f.Name, "Handler") || f.Type.Kind() != reflect.Interface {
			continue
		}
		out[f.Name] = 0
		if fn := reflect.ValueOf(v.Field(i).Interface()); fn.Kind() == reflect.Func {
			out[f.Name] = fn.Pointer()
		}
	}
	return out
}

func dropDefaultRequired(v any) {
	switch x := v.(type) {
	case map[string]any:
		if r, ok := x["required"].(bool); ok && !r {
			delete(x, "required")
		}
		for _, e := range x {
			dropDefaultRequired(e)
		}
	case []any:
		for _, e := range x {
			dropDefaultRequired(e)
		}
	}
}

// TestPathsOutsideTheSpecAnswerOnlyGET checks that the paths stamen serves
// beside the API (health check, metrics, spec, docs) answer another method
// as the API's operations do: 405 with an Allow header and the JSON error
// body, under --url_prefix too.
func TestPathsOutsideTheSpecAnswerOnlyGET(t *testing.T) {
	for _, prefix := range []string{"", "flower"} {
		srv := newEmbedded(t, prefix)
		base := srv.URL
		if prefix != "" {
			base += "/" + prefix
		}
		for _, path := range []string{"/swagger.json", "/swagger.yaml", "/docs", "/docs/", "/docs/swagger-ui.css", "/healthcheck", "/metrics"} {
			for _, tc := range []struct {
				method string
				want   int
			}{
				{"GET", 200},
				{"HEAD", 200},
				{"POST", 405},
				{"PUT", 405},
				{"DELETE", 405},
				{"PATCH", 405},
				{"OPTIONS", 405},
			} {
				req, err := http.NewRequest(tc.method, base+path, nil)
				if err != nil {
					t.Fatal(err)
				}
				resp, b := do(t, req)
				if resp.StatusCode != tc.want {
					t.Errorf("prefix %q: %s %s = %d, want %d: %.100s", prefix, tc.method, path, resp.StatusCode, tc.want, b)
					continue
				}
				if tc.want != 405 {
					continue
				}
				if allow := resp.Header.Get("Allow"); allow != "GET, HEAD" {
					t.Errorf("prefix %q: %s %s: Allow %q, want \"GET, HEAD\"", prefix, tc.method, path, allow)
				}
				var e map[string]string
				if err := json.Unmarshal(b, &e); err != nil || e["error"] == "" || len(e) != 1 {
					t.Errorf("prefix %q: %s %s: body %q is not {\"error\": \"...\"}", prefix, tc.method, path, b)
				}
			}
		}
	}
}

// TestSpecServedAtItsPathsOnly checks that the spec is served at
// /swagger.json and /swagger.yaml and not at paths that clean to them.
func TestSpecServedAtItsPathsOnly(t *testing.T) {
	srv := newEmbedded(t, "")
	for _, path := range []string{"/swagger.json/", "/swagger.yaml/"} {
		code, body, _ := get(t, srv.URL+path)
		if code != 404 || !strings.Contains(body, `"error"`) {
			t.Errorf("GET %s = %d, want 404 JSON error: %.100s", path, code, body)
		}
	}
}
