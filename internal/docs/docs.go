// Package docs serves Swagger UI for the API from assets vendored into the
// binary (npm swagger-ui-dist, version in swaggerui/package.json), so /docs
// works offline and loads nothing from a CDN.
package docs

import (
	"bytes"
	"embed"
	"encoding/json"
	"fmt"
	"io/fs"
	"net/http"
	"strings"

	"go.yaml.in/yaml/v3"
)

//go:embed swaggerui
var assets embed.FS

// Handler serves Swagger UI under /docs/; /docs redirects there so that the
// page's relative asset URLs resolve. An error (a file that does not exist,
// a range the file does not have) is answered by writeError, so that it is
// JSON as every other error, not the file server's plain text.
func Handler(writeError func(w http.ResponseWriter, status int, msg string)) http.Handler {
	sub, err := fs.Sub(assets, "swaggerui")
	if err != nil {
		panic(err) // the embedded tree is fixed at build time
	}
	files := http.StripPrefix("/docs/", http.FileServer(http.FS(sub)))
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/docs" {
			// A relative Location resolves against the URL the client used,
			// so it stays right under any URL prefix (http.Redirect would
			// rewrite it against the prefix-stripped path).
			w.Header().Set("Location", "docs/")
			w.WriteHeader(http.StatusMovedPermanently)
			return
		}
		if strings.HasSuffix(r.URL.Path, ".js") || strings.HasSuffix(r.URL.Path, ".css") {
			w.Header().Set("Cache-Control", "public, max-age=3600")
		}
		ew := &errorWriter{ResponseWriter: w}
		files.ServeHTTP(ew, r)
		if ew.status == 0 {
			return
		}
		msg := strings.TrimSpace(ew.body.String())
		switch {
		case ew.status == http.StatusNotFound:
			msg = "path " + r.URL.Path + " was not found"
		case msg == "":
			msg = http.StatusText(ew.status)
		}
		h := w.Header()
		for _, k := range []string{"Cache-Control", "Content-Length", "Content-Type", "X-Content-Type-Options"} {
			h.Del(k)
		}
		writeError(w, ew.status, msg)
	})
}

// errorWriter holds back an error answer (a status of 400 or more) of the
// file server, keeping its message (bounded) for a JSON one; any other
// answer goes through.
type errorWriter struct {
	http.ResponseWriter
	status int // the error status held back, or 0
	body   bytes.Buffer
}

// maxErrorMessage bounds the file server's error text that is kept.
const maxErrorMessage = 256

func (w *errorWriter) WriteHeader(code int) {
	if code >= http.StatusBadRequest {
		w.status = code
		return
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *errorWriter) Write(b []byte) (int, error) {
	if w.status == 0 {
		return w.ResponseWriter.Write(b)
	}
	if room := maxErrorMessage - w.body.Len(); room > 0 {
		w.body.Write(b[:min(len(b), room)])
	}
	return len(b), nil
}

// WithBasePath returns the JSON spec with its top-level basePath set to
// basePath (added when the spec has none), the rest as it is, keys in their
// order; an empty basePath returns the spec unchanged.
func WithBasePath(specJSON []byte, basePath string) ([]byte, error) {
	if basePath == "" {
		return specJSON, nil
	}
	value, err := json.Marshal(basePath)
	if err != nil {
		return nil, err
	}
	dec := json.NewDecoder(bytes.NewReader(specJSON))
	tok, err := dec.Token()
	if err != nil {
		return nil, fmt.Errorf("read the spec: %w", err)
	}
	if tok != json.Delim('{') {
		return nil, fmt.Errorf("the spec is not a JSON object")
	}
	var out bytes.Buffer
	out.WriteByte('{')
	set := false
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return nil, fmt.Errorf("read the spec: %w", err)
		}
		key, _ := tok.(string)
		var raw json.RawMessage
		if err := dec.Decode(&raw); err != nil {
			return nil, fmt.Errorf("read the spec's %q: %w", key, err)
		}
		if key == "basePath" {
			raw, set = value, true
		}
		if out.Len() > 1 {
			out.WriteByte(',')
		}
		k, _ := json.Marshal(key)
		out.Write(k)
		out.WriteByte(':')
		out.Write(raw)
	}
	if !set {
		if out.Len() > 1 {
			out.WriteByte(',')
		}
		out.WriteString(`"basePath":`)
		out.Write(value)
	}
	out.WriteByte('}')
	var indented bytes.Buffer
	if err := json.Indent(&indented, out.Bytes(), "", "  "); err != nil {
		return nil, fmt.Errorf("indent the spec: %w", err)
	}
	return indented.Bytes(), nil
}

// SpecYAML converts the JSON spec to YAML, keeping the key order.
func SpecYAML(specJSON []byte) ([]byte, error) {
	var doc yaml.Node
	if err := yaml.Unmarshal(specJSON, &doc); err != nil {
		return nil, err
	}
	clearStyle(&doc)
	return yaml.Marshal(&doc)
}

// clearStyle drops the flow style JSON parses into, so the output reads as
// block YAML.
func clearStyle(n *yaml.Node) {
	n.Style = 0
	for _, c := range n.Content {
		clearStyle(c)
	}
}
