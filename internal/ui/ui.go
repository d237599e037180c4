// Package ui serves the web dashboard: the page and its assets, built from
// web/ by `make ui` and embedded in the binary, so that it needs no Node
// and no network at run time.
package ui

import (
	"bytes"
	"compress/gzip"
	"embed"
	"io/fs"
	"net/http"
	"path"
	"strings"
	"sync"
)

//go:embed dist
var dist embed.FS

// CSP is the page's Content-Security-Policy: scripts, styles and calls from
// stamen's own origin only, no inline script and no eval, and no framing.
const CSP = "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; " +
	"connect-src 'self'; font-src 'self'; object-src 'none'; base-uri 'self'; form-action 'self'; frame-ancestors 'none'"

// baseTag is the <base> element of the built index.html, which the server
// points at the app's root.
const baseTag = `<base href="./" />`

// Handler serves the dashboard: /assets/<hashed name> with a long cache
// lifetime, and index.html, not cached, for every other path (the page's
// own routes: /tasks, /task/<id>, /worker/<name>, ...). prefix is
// --url_prefix ("" or "/flower"); the request's path is below it.
func Handler(prefix string) http.Handler {
	sub, err := fs.Sub(dist, "dist")
	if err != nil {
		panic(err) // the embedded tree always has dist
	}
	index, err := fs.ReadFile(sub, "index.html")
	if err != nil {
		panic("ui: the embedded build has no index.html: run make ui")
	}
	prefixDepth := strings.Count(strings.Trim(prefix, "/"), "/")
	if strings.Trim(prefix, "/") != "" {
		prefixDepth++
	}
	h := &handler{fs: sub, index: index, prefixDepth: prefixDepth}
	return h
}

type handler struct {
	fs          fs.FS
	index       []byte
	prefixDepth int
	gz          sync.Map // asset name -> []byte, gzipped once
}

func (h *handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	hdr := w.Header()
	hdr.Set("X-Content-Type-Options", "nosniff")
	hdr.Set("Referrer-Policy", "no-referrer")
	if name, ok := strings.CutPrefix(r.URL.Path, "/assets/"); ok {
		h.asset(w, r, name)
		return
	}
	hdr.Set("Content-Security-Policy", CSP)
	hdr.Set("X-Frame-Options", "DENY")
	hdr.Set("Cache-Control", "no-store")
	hdr.Set("Content-Type", "text/html; charset=utf-8")
	page := bytes.Replace(h.index, []byte(baseTag), []byte(`<base href="`+h.base(r)+`" />`), 1)
	_, _ = w.Write(page)
}

// base is the app's root relative to the page's URL ("./", "../", ...),
// counted on the path the browser asked for, so that it holds behind a
// proxy that maps stamen to any other path. Escaped slashes (%2F in a
// worker's name) are one segment, as the browser counts them.
func (h *handler) base(r *http.Request) string {
	p := r.RequestURI
	if i := strings.IndexAny(p, "?#"); i >= 0 {
		p = p[:i]
	}
	if !strings.HasPrefix(p, "/") { // an absolute-form request line
		p = r.URL.EscapedPath()
	}
	depth := strings.Count(p, "/") - 1 - h.prefixDepth
	if depth <= 0 {
		return "./"
	}
	return strings.Repeat("../", depth)
}

func (h *handler) asset(w http.ResponseWriter, r *http.Request, name string) {
	hdr := w.Header()
	if name == "" || strings.Contains(name, "/") || !fs.ValidPath(name) {
		http.NotFound(w, r)
		return
	}
	b, err := fs.ReadFile(h.fs, path.Join("assets", name))
	if err != nil {
		hdr.Set("Cache-Control", "no-store")
		hdr.Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusNotFound)
		_, _ = w.Write([]byte(`{"error": "no such asset"}`))
		return
	}
	switch {
	case strings.HasSuffix(name, ".js"):
		hdr.Set("Content-Type", "text/javascript; charset=utf-8")
	case strings.HasSuffix(name, ".css"):
		hdr.Set("Content-Type", "text/css; charset=utf-8")
	default:
		hdr.Set("Content-Type", http.DetectContentType(b))
	}
	// The names carry a hash of the content: a new build has new names.
	hdr.Set("Cache-Control", "public, max-age=31536000, immutable")
	hdr.Add("Vary", "Accept-Encoding")
	if acceptsGzip(r) {
		hdr.Set("Content-Encoding", "gzip")
		_, _ = w.Write(h.gzipped(name, b))
		return
	}
	_, _ = w.Write(b)
}

func (h *handler) gzipped(name string, b []byte) []byte {
	if v, ok := h.gz.Load(name); ok {
		return v.([]byte)
	}
	var buf bytes.Buffer
	zw, _ := gzip.NewWriterLevel(&buf, gzip.BestCompression)
	_, _ = zw.Write(b)
	_ = zw.Close()
	h.gz.Store(name, buf.Bytes())
	return buf.Bytes()
}

func acceptsGzip(r *http.Request) bool {
	for _, part := range strings.Split(r.Header.Get("Accept-Encoding"), ",") {
		enc, q, _ := strings.Cut(strings.TrimSpace(part), ";")
		if strings.EqualFold(strings.TrimSpace(enc), "gzip") && strings.ReplaceAll(strings.TrimSpace(q), " ", "") != "q=0" {
			return true
		}
	}
	return false
}

// FirstLoad lists the JavaScript and CSS files index.html loads, for the
// size budget test.
func FirstLoad() ([]string, error) {
	b, err := fs.ReadFile(dist, "dist/index.html")
	if err != nil {
		return nil, err
	}
	var out []string
	for _, attr := range []string{`src="./`, `href="./`} {
		s := string(b)
		for {
			i := strings.Index(s, attr)
			if i < 0 {
				break
			}
			s = s[i+len(attr):]
			j := strings.IndexByte(s, '"')
			if j < 0 {
				break
			}
			if n := s[:j]; strings.HasSuffix(n, ".js") || strings.HasSuffix(n, ".css") {
				out = append(out, n)
			}
		}
	}
	return out, nil
}

// Asset is an embedded file of the build, by its path in index.html.
func Asset(name string) ([]byte, error) {
	return fs.ReadFile(dist, path.Join("dist", name))
}
