package app

import (
	"context"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"
)

// newEmbedded starts an App on its embedded broker: enough for the HTTP
// surface that needs no worker.
func newEmbedded(t *testing.T, prefix string) *httptest.Server {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	a, err := New(context.Background(), Config{EmbeddedAddr: addr, URLPrefix: prefix})
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

func TestServedSpecEqualsSwaggerYAML(t *testing.T) {
	srv := newEmbedded(t, "")
	raw, err := os.ReadFile("../../swagger.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var fromFile any
	if err := yaml.Unmarshal(raw, &fromFile); err != nil {
		t.Fatal(err)
	}
	for _, path := range []string{"/swagger.json", "/swagger.yaml"} {
		code, body, _ := get(t, srv.URL+path)
		if code != 200 {
			t.Fatalf("%s: %d", path, code)
		}
		var served any
		if err := yaml.Unmarshal([]byte(body), &served); err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		// Compare through JSON so that YAML's and JSON's number types agree;
		// go-swagger leaves out "required: false", the default.
		dropDefaultRequired(fromFile)
		a, _ := json.Marshal(fromFile)
		b, _ := json.Marshal(served)
		if string(a) != string(b) {
			t.Errorf("%s differs from swagger.yaml", path)
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

func TestEveryOperationHasAHandler(t *testing.T) {
	// NewAPI fails when the spec has an operation without a handler; New
	// calls it, so an App that starts proves it. Check the count too.
	srv := newEmbedded(t, "")
	_, body, _ := get(t, srv.URL+"/swagger.json")
	var spec struct {
		Paths map[string]map[string]any `json:"paths"`
	}
	if err := json.Unmarshal([]byte(body), &spec); err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, ops := range spec.Paths {
		n += len(ops)
	}
	if n != 21 {
		t.Errorf("%d operations in the spec, want Flower's 20 plus /api/events", n)
	}
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
