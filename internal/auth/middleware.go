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
	case "/healthcheck", "/readyz", "/metrics", "/swagger.json", "/swagger.yaml":
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

// A SignIn identifies callers by something other than the credentials in
// the Authorization header: a trusted proxy's identity header, a session
// cookie (internal/signin).
type SignIn interface {
	// Identify returns the caller and true when the request carries an
	// identity of this kind that holds; false when it carries none (or
	// none that holds, as a tampered or expired cookie). A caller
	// identified whose role is None (signed in, but admitted by no role
	// rule) is refused with 403.
	Identify(r *http.Request) (Principal, bool)
}

// A Challenger answers a caller that has no identity at all, when it knows
// better than a 401: a browser asking for a page is sent to sign in. It
// returns false to leave the answer to the middleware.
type Challenger interface {
	Challenge(w http.ResponseWriter, r *http.Request) bool
}

// UseProxy identifies callers by a proxy's identity header. It is asked
// before the Authorization header is: the proxy vouches for the request,
// and may pass an Authorization header of its own along.
func (a *Authenticator) UseProxy(s SignIn) { a.proxy = s }

// UseSessions identifies callers by a session, when they send no
// Authorization header. When s is a Challenger, callers without any
// identity are answered by it.
func (a *Authenticator) UseSessions(s SignIn) { a.session = s }

// AddPublic makes paths answer without credentials: the sign-in's own
// pages, which a caller not yet signed in must reach.
func (a *Authenticator) AddPublic(paths ...string) {
	if a.public == nil {
		a.public = map[string]bool{}
	}
	for _, p := range paths {
		a.public[p] = true
	}
}

// Identity is who made a request, as handlers see it: the user's name
// (an e-mail address or subject when signed in, a basic-auth user name,
// a token's name, cert:<subject>, or anonymous), how they proved it
// (Principal.Method) and their role.
type Identity struct {
	User   string
	Method string
	Role   Role
}

// IdentityFrom returns the caller Middleware established for the request;
// the zero Identity (role None) for a public path or a request that did
// not go through it.
func IdentityFrom(ctx context.Context) Identity {
	p := PrincipalFrom(ctx)
	return Identity{User: p.Name, Method: p.Method, Role: p.Role}
}

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
			name, method := anonymousName(r)
			next.ServeHTTP(w, withPrincipal(r, Principal{Name: name, Role: Operator, Method: method}))
		})
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if isPublic(r.URL.Path) || a.public[r.URL.Path] {
			next.ServeHTTP(w, r)
			return
		}
		p, signedIn, err := a.identifyAny(r)
		role := p.Role
		switch {
		case errors.Is(err, ErrBusy):
			// Fail fast: a queue of bcrypt checks would grow without bound
			// under a flood of wrong passwords.
			w.Header().Set("Retry-After", "1")
			deny(w, r, http.StatusServiceUnavailable, "too many password checks in progress; retry shortly")
		case signedIn && role == None:
			deny(w, r, http.StatusForbidden, "signed in as "+p.Name+", whom no role rule admits")
		case role == None:
			if c, ok := a.session.(Challenger); ok && c.Challenge(w, r) {
				return
			}
			if a.session == nil || !fromScript(r) {
				w.Header().Set("WWW-Authenticate", `Basic realm="stamen", charset="UTF-8"`)
				w.Header().Add("WWW-Authenticate", `Bearer realm="stamen"`)
			}
			deny(w, r, http.StatusUnauthorized, "authentication required")
		case needsOperator(r) && role < Operator:
			deny(w, withPrincipal(r, p), http.StatusForbidden, "the viewer role may not call this operation")
		default:
			next.ServeHTTP(w, withPrincipal(r, p))
		}
	})
}

// fromScript tells a request a page's script made (fetch, XHR), by the
// header browsers set on them. With sessions, such a 401 carries no
// WWW-Authenticate: a Basic challenge would make the browser pop up its
// password dialog over a page whose session ended, where the page should
// send the person to sign in again.
func fromScript(r *http.Request) bool {
	switch r.Header.Get("Sec-Fetch-Mode") {
	case "cors", "same-origin", "no-cors":
		return true
	}
	return false
}

// identifyAny identifies the caller by the proxy's header, the
// Authorization header, then the session, the first that the request
// carries; signedIn tells a caller identified by a sign-in.
func (a *Authenticator) identifyAny(r *http.Request) (p Principal, signedIn bool, err error) {
	if a.proxy != nil {
		if p, ok := a.proxy.Identify(r); ok {
			return p, true, nil
		}
	}
	if a.session != nil && r.Header.Get("Authorization") == "" {
		if p, ok := a.session.Identify(r); ok {
			return p, true, nil
		}
		return Principal{}, false, nil
	}
	p, err = a.Identify(r)
	return p, false, err
}

// maxCertName bounds a certificate's subject as a caller's name: the audit
// log keeps one per record.
const maxCertName = 256

// anonymousName names a caller without credentials, and how: by its
// client certificate when the TLS handshake verified one (--ca_certs), so
// that the audit log tells which client did what, else Anonymous.
func anonymousName(r *http.Request) (name, method string) {
	if r.TLS == nil || len(r.TLS.VerifiedChains) == 0 || len(r.TLS.VerifiedChains[0]) == 0 {
		return Anonymous, MethodNone
	}
	name = "cert:" + r.TLS.VerifiedChains[0][0].Subject.String()
	if len(name) > maxCertName {
		name = strings.ToValidUTF8(name[:maxCertName], "")
	}
	return name, MethodCert
}
