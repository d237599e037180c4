package auth

import (
	"context"
	"errors"
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

type roleKey struct{}

// RoleFrom returns the role Middleware established for the request: None
// for a request that did not go through it, or asked for a public path.
func RoleFrom(ctx context.Context) Role {
	role, _ := ctx.Value(roleKey{}).(Role)
	return role
}

func withRole(r *http.Request, role Role) *http.Request {
	return r.WithContext(context.WithValue(r.Context(), roleKey{}, role))
}

// Middleware enforces the roles on every non-public path and hands the
// caller's role on in the request's context (RoleFrom). With no credentials
// configured every caller is an operator (stamen then listens on loopback
// only, which cmd/stamen enforces). deny writes the error answer.
func (a *Authenticator) Middleware(deny func(w http.ResponseWriter, status int, msg string), next http.Handler) http.Handler {
	if !a.Enabled() {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			next.ServeHTTP(w, withRole(r, Operator))
		})
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if isPublic(r.URL.Path) {
			next.ServeHTTP(w, r)
			return
		}
		role, err := a.Authenticate(r)
		switch {
		case errors.Is(err, ErrBusy):
			// Fail fast: a queue of bcrypt checks would grow without bound
			// under a flood of wrong passwords.
			w.Header().Set("Retry-After", "1")
			deny(w, http.StatusServiceUnavailable, "too many password checks in progress; retry shortly")
		case role == None:
			w.Header().Set("WWW-Authenticate", `Basic realm="stamen", charset="UTF-8"`)
			w.Header().Add("WWW-Authenticate", `Bearer realm="stamen"`)
			deny(w, http.StatusUnauthorized, "authentication required")
		case needsOperator(r) && role < Operator:
			deny(w, http.StatusForbidden, "the viewer role may not call this operation")
		default:
			next.ServeHTTP(w, withRole(r, role))
		}
	})
}
