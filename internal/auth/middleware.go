package auth

import (
	"net/http"
	"strings"
)

// Public paths answer without credentials, as in Flower: they reveal no
// task data.
func isPublic(path string) bool {
	switch path {
	case "/healthcheck", "/metrics", "/swagger.json", "/swagger.yaml":
		return true
	}
	return path == "/docs" || strings.HasPrefix(path, "/docs/")
}

// needsOperator tells the operations that change something: every POST.
func needsOperator(r *http.Request) bool {
	return r.Method != http.MethodGet && r.Method != http.MethodHead && r.Method != http.MethodOptions
}

// Middleware enforces the roles on every non-public path. With no
// credentials configured it lets everything through (stamen then listens on
// loopback only, which cmd/stamen enforces). deny writes the error answer.
func (a *Authenticator) Middleware(deny func(w http.ResponseWriter, status int, msg string), next http.Handler) http.Handler {
	if !a.Enabled() {
		return next
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if isPublic(r.URL.Path) {
			next.ServeHTTP(w, r)
			return
		}
		role := a.Authenticate(r)
		switch {
		case role == None:
			w.Header().Set("WWW-Authenticate", `Basic realm="stamen", charset="UTF-8"`)
			w.Header().Add("WWW-Authenticate", `Bearer realm="stamen"`)
			deny(w, http.StatusUnauthorized, "authentication required")
		case needsOperator(r) && role < Operator:
			deny(w, http.StatusForbidden, "the viewer role may not call this operation")
		default:
			next.ServeHTTP(w, r)
		}
	})
}
