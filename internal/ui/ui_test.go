package ui_test

import (
	"bytes"
	"compress/gzip"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/stamen-dev/stamen/internal/ui"
)

// budget is the most JavaScript and CSS the page's first load may take,
// compressed.
const budget = 250 << 10

func TestFirstLoadBudget(t *testing.T) {
	files, err := ui.FirstLoad()
	if err != nil {
		t.Fatal(err)
	}
	var js, css bool
	total := 0
	for _, f := range files {
		b, err := ui.Asset(f)
		if err != nil {
			t.Fatalf("index.html loads %s, which the build lacks: %v", f, err)
		}
		var buf bytes.Buffer
		zw, _ := gzip.NewWriterLevel(&buf, gzip.BestCompression)
		_, _ = zw.Write(b)
		_ = zw.Close()
		total += buf.Len()
		js = js || strings.HasSuffix(f, ".js")
		css = css || strings.HasSuffix(f, ".css")
		t.Logf("%s: %d bytes, %d gzipped", f, len(b), buf.Len())
	}
	if !js || !css {
		t.Fatalf("index.html loads %q: want its script and its style sheet", files)
	}
	if total > budget {
		t.Errorf("the first load is %d bytes gzipped, over the budget of %d", total, budget)
	}
}

func get(t *testing.T, h http.Handler, target string, hdr ...string) *http.Response {
	t.Helper()
	r := httptest.NewRequest("GET", target, nil)
	for i := 0; i+1 < len(hdr); i += 2 {
		r.Header.Set(hdr[i], hdr[i+1])
	}
	w := httptest.NewRecorder()
	h.ServeHTTP(w, r)
	return w.Result()
}

// TestPage: every path is the page, with the CSP, not cached, its <base>
// pointing at the app's root from where the browser asked.
func TestPage(t *testing.T) {
	for _, c := range []struct{ prefix, path, base string }{
		{"", "/", "./"},
		{"", "/tasks?state=FAILURE", "./"},
		{"", "/task/abc", "../"},
		{"", "/worker/a%2Fb", "../"},
		{"", "/a/b/c", "../../"},
		{"/flower", "/flower/", "./"},
		{"/flower", "/flower/task/x", "../"},
		{"/a/b", "/a/b/worker/w", "../"},
	} {
		resp := get(t, ui.Handler(c.prefix), c.path)
		body, _ := io.ReadAll(resp.Body)
		if resp.StatusCode != 200 || resp.Header.Get("Content-Security-Policy") != ui.CSP ||
			resp.Header.Get("Cache-Control") != "no-store" || !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/html") {
			t.Errorf("%s%s: %d %v", c.prefix, c.path, resp.StatusCode, resp.Header)
		}
		if want := `<base href="` + c.base + `" />`; !strings.Contains(string(body), want) {
			t.Errorf("%s (prefix %q): want %s in %s", c.path, c.prefix, want, body)
		}
		if strings.Contains(string(body), "<script>") || strings.Contains(string(body), "<style") {
			t.Errorf("%s: inline script or style in the page", c.path)
		}
	}
	for _, d := range []string{"script-src 'self'", "connect-src 'self'", "frame-ancestors 'none'", "default-src 'self'", "style-src 'self'", "object-src 'none'"} {
		if !strings.Contains(ui.CSP, d) {
			t.Errorf("the CSP lacks %s", d)
		}
	}
	if strings.Contains(ui.CSP, "unsafe") {
		t.Errorf("the CSP allows unsafe sources: %s", ui.CSP)
	}
}

// TestAssets: hashed assets are cached for a year, compressed when asked;
// an unknown one is a 404, not the page.
func TestAssets(t *testing.T) {
	files, err := ui.FirstLoad()
	if err != nil {
		t.Fatal(err)
	}
	h := ui.Handler("")
	for _, f := range files {
		want, _ := ui.Asset(f)
		resp := get(t, h, "/"+f)
		got, _ := io.ReadAll(resp.Body)
		if resp.StatusCode != 200 || !bytes.Equal(got, want) || resp.Header.Get("Cache-Control") != "public, max-age=31536000, immutable" {
			t.Errorf("%s: %d %v", f, resp.StatusCode, resp.Header)
		}
		resp = get(t, h, "/"+f, "Accept-Encoding", "br, gzip")
		zr, err := gzip.NewReader(resp.Body)
		if err != nil || resp.Header.Get("Content-Encoding") != "gzip" {
			t.Fatalf("%s gzipped: %v %v", f, err, resp.Header)
		}
		got, _ = io.ReadAll(zr)
		if !bytes.Equal(got, want) {
			t.Errorf("%s gzipped differs", f)
		}
	}
	for _, p := range []string{"/assets/nope.js", "/assets/", "/assets/../index.html"} {
		if resp := get(t, h, p); resp.StatusCode != 404 || resp.Header.Get("Cache-Control") == "public, max-age=31536000, immutable" {
			t.Errorf("%s: %d %v", p, resp.StatusCode, resp.Header)
		}
	}
}
