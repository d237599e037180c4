package auth

import (
	"context"
	"errors"
	"net/http"
	"strings"

	"github.com/stamen-dev/stamen/internal/contract"
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

// IsWrite tells the operations that change something: every method but
// GET, HEAD and OPTIONS. It is the one rule for what a viewer may not do,
// what --read_only refuses and what the audit log records, so an operation
// added later is covered by all three as soon as it is a POST.
func IsWrite(method string) bool {
	return method != http.MethodGet && method != http.MethodHead && method != http.MethodOptions
}

// needsOperator tells the operations a viewer may not call: the writes,
// and the reads the spec marks x-stamen-operator-only (the audit log, which
// tells who did what, from where, with which parameters). The operation is
// the one the API's router finds, so a path it cleans (a trailing slash) is
// the operation's too.
func needsOperator(r *http.Request) bool {
	if IsWrite(r.Method) {
		return true
	}
	op, ok := contract.Embedded().MatchRequest(r)
	return ok && op.OperatorOnly
}

type principalKey struct{}

// RoleFrom returns the role Middleware established for the request: None
// for a request that did not go through it, or asked for a public path.
func RoleFrom(ctx context.Context) Role {
	return PrincipalFrom(ctx).Role
}

// PrincipalFrom returns the caller Middleware established for the request.
func PrincipalFrom(ctx context.Context) Principal {
	p, _ := ctx.Value(principalKey{}).(Principal)
	return p
}

func withPrincipal(r *http.Request, p Principal) *http.Request {
	return r.WithContext(context.WithValue(r.Context(), principalKey{}, p))
}

// Middleware enforces the roles on every non-public path and hands the
// caller on in the request's context (RoleFrom, PrincipalFrom). With no credentials
// configured every caller is an operator (stamen then listens on loopback
// only, which cmd/stamen enforces). deny writes the error answer; its
// request carries the caller (PrincipalFrom) when the credentials were
// valid and the role too low, and no caller otherwise.
func (a *Authenticator) Middleware(deny func(w http.ResponseWriter, r *http.Request, status int, msg string), next http.Handler) http.Handler {
	if !a.Enabled() {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			next.ServeHTTP(w, withPrincipal(r, Principal{Name: anonymousName(r), Role: Operator}))
		})
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if isPublic(r.URL.Path) {
			next.ServeHTTP(w, r)
			return
		}
		p, err := a.Identify(r)
		role := p.Role
		switch {
		case errors.Is(err, ErrBusy):
			// Fail fast: a queue of bcrypt checks would grow without bound
			// under a flood of wrong passwords.
			w.Header().Set("Retry-After", "1")
			deny(w, r, http.StatusServiceUnavailable, "too many password checks in progress; retry shortly")
		case role == None:
			w.Header().Set("WWW-Authenticate", `Basic realm="stamen", charset="UTF-8"`)
			w.Header().Add("WWW-Authenticate", `Bearer realm="stamen"`)
			deny(w, r, http.StatusUnauthorized, "authentication required")
		case needsOperator(r) && role < Operator:
			deny(w, withPrincipal(r, p), http.StatusForbidden, "the viewer role may not call this operation")
		default:
			next.ServeHTTP(w, withPrincipal(r, p))
		}
	})
}

// maxCertName bounds a certificate's subject as a caller's name: the audit
// log keeps one per record.
const maxCertName = 256

// anonymousName names a caller without credentials: by its client
// certificate when the TLS handshake verified one (--ca_certs), so that
// the audit log tells which client did what, else Anonymous.
func anonymousName(r *http.Request) string {
	if r.TLS == nil || len(r.TLS.VerifiedChains) == 0 || len(r.TLS.VerifiedChains[0]) == 0 {
		return Anonymous
	}
	name := "cert:" + r.TLS.VerifiedChains[0][0].Subject.String()
	if len(name) > maxCertName {
		name = strings.ToValidUTF8(name[:maxCertName], "")
	}
	return name
}
