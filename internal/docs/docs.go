// Package docs serves Swagger UI for the API from assets vendored into the
// binary (npm swagger-ui-dist, version in swaggerui/package.json), so /docs
// works offline and loads nothing from a CDN.
package docs

import (
	"embed"
	"io/fs"
	"net/http"
	"strings"

	"go.yaml.in/yaml/v3"
)

//go:embed swaggerui
var assets embed.FS

// Handler serves Swagger UI under /docs/; /docs redirects there so that the
// page's relative asset URLs resolve.
func Handler() http.Handler {
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
		files.ServeHTTP(w, r)
	})
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
