package auth

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"golang.org/x/crypto/bcrypt"
)

func newTestAuth(t *testing.T) *Authenticator {
	t.Helper()
	hash, err := bcrypt.GenerateFromPassword([]byte("hashed-pw"), bcrypt.MinCost)
	if err != nil {
		t.Fatal(err)
	}
	var a Authenticator
	for _, err := range []error{
		a.AddBasic("op:op-pw, hasher:"+string(hash), Operator),
		a.AddBasic("view:view-pw", Viewer),
		a.AddTokens("operator-token-0123456789", Operator),
		a.AddFile(strings.NewReader("# comment\n\nviewer token viewer-token-0123456789\n")),
	} {
		if err != nil {
			t.Fatal(err)
		}
	}
	return &a
}

func TestMiddleware(t *testing.T) {
	a := newTestAuth(t)
	h := a.Middleware(func(w http.ResponseWriter, r *http.Request, status int, msg string) {
		w.Header().Set("X-Role", RoleFrom(r.Context()).String())
		http.Error(w, msg, status)
	}, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("X-Role", RoleFrom(r.Context()).String())
		w.Header().Set("X-Name", PrincipalFrom(r.Context()).Name)
	}))

	tests := []struct {
		name, method, path string
		auth               func(r *http.Request)
		want               int
		// role is what the next handler sees (RoleFrom) when it runs,
		// or deny when the call is refused: the caller of valid
		// credentials (for the audit log), none without.
		role Role
	}{
		{"no credentials", "GET", "/api/tasks", nil, 401, None},
		{"wrong password", "GET", "/api/tasks", basic("op", "nope"), 401, None},
		{"unknown user", "GET", "/api/tasks", basic("who", "op-pw"), 401, None},
		{"password of another user", "GET", "/api/tasks", basic("view", "op-pw"), 401, None},
		{"viewer reads", "GET", "/api/tasks", basic("view", "view-pw"), 200, Viewer},
		{"viewer writes", "POST", "/api/task/revoke/x", basic("view", "view-pw"), 403, Viewer},
		{"operator writes", "POST", "/api/task/revoke/x", basic("op", "op-pw"), 200, Operator},
		{"viewer retries", "POST", "/api/task/retry/x", basic("view", "view-pw"), 403, Viewer},
		{"viewer bulk revokes", "POST", "/api/tasks/revoke", basic("view", "view-pw"), 403, Viewer},
		{"viewer bulk retries", "POST", "/api/tasks/retry", basic("view", "view-pw"), 403, Viewer},
		{"viewer reads failures", "GET", "/api/failures", basic("view", "view-pw"), 200, Viewer},
		{"operator retries", "POST", "/api/task/retry/x", basic("op", "op-pw"), 200, Operator},
		{"operator bulk revokes", "POST", "/api/tasks/revoke", basic("op", "op-pw"), 200, Operator},
		{"bcrypt operator", "POST", "/api/worker/shutdown/w", basic("hasher", "hashed-pw"), 200, Operator},
		{"bcrypt wrong", "GET", "/api/tasks", basic("hasher", "op-pw"), 401, None},
		{"operator token", "POST", "/api/task/revoke/x", bearer("operator-token-0123456789"), 200, Operator},
		{"viewer token reads", "GET", "/api/workers", bearer("viewer-token-0123456789"), 200, Viewer},
		{"viewer token writes", "POST", "/api/task/revoke/x", bearer("viewer-token-0123456789"), 403, Viewer},
		{"wrong token", "GET", "/api/workers", bearer("operator-token-012345678X"), 401, None},
		{"viewer reads the audit log", "GET", "/api/audit", basic("view", "view-pw"), 403, Viewer},
		{"viewer token reads the audit log", "GET", "/api/audit", bearer("viewer-token-0123456789"), 403, Viewer},
		{"operator reads the audit log", "GET", "/api/audit", basic("op", "op-pw"), 200, Operator},
		// The API's router cleans the path: /api/audit/ is the audit log too.
		{"viewer reads the audit log by another path", "GET", "/api/audit/", basic("view", "view-pw"), 403, Viewer},
		{"healthcheck is public", "GET", "/healthcheck", nil, 200, None},
		{"metrics are public", "GET", "/metrics", nil, 200, None},
		{"spec is public", "GET", "/swagger.json", nil, 200, None},
		{"docs are public", "GET", "/docs/index.html", nil, 200, None},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			r := httptest.NewRequest(tc.method, tc.path, nil)
			if tc.auth != nil {
				tc.auth(r)
			}
			w := httptest.NewRecorder()
			h.ServeHTTP(w, r)
			if w.Code != tc.want {
				t.Fatalf("status %d, want %d", w.Code, tc.want)
			}
			if w.Header().Get("X-Role") != tc.role.String() {
				t.Errorf("next handler or deny saw role %q, want %q", w.Header().Get("X-Role"), tc.role)
			}
			if w.Code == 200 && tc.role != None {
				// The credential's name, for the audit log: the user, or
				// a token's hash prefix (never the token).
				name := w.Header().Get("X-Name")
				user, _, isBasic := r.BasicAuth()
				switch {
				case isBasic && name != user:
					t.Errorf("name %q, want the user %q", name, user)
				case !isBasic && (!strings.HasPrefix(name, "token-") || len(name) != len("token-")+8 || strings.Contains(r.Header.Get("Authorization"), name[6:])):
					t.Errorf("token name %q", name)
				}
			}
			if tc.want == 401 && !strings.Contains(strings.Join(w.Header().Values("WWW-Authenticate"), ";"), "Basic") {
				t.Errorf("401 without WWW-Authenticate: %v", w.Header())
			}
		})
	}
}

func TestDisabledLetsEverythingThrough(t *testing.T) {
	var a Authenticator
	next := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if role := RoleFrom(r.Context()); role != Operator {
			t.Errorf("role %v, want operator: without credentials everyone is", role)
		}
		if name := PrincipalFrom(r.Context()).Name; name != Anonymous {
			t.Errorf("name %q, want %q", name, Anonymous)
		}
		w.WriteHeader(204)
	})
	w := httptest.NewRecorder()
	a.Middleware(nil, next).ServeHTTP(w, httptest.NewRequest("POST", "/api/task/revoke/x", nil))
	if w.Code != 204 {
		t.Fatalf("status %d", w.Code)
	}
}

func TestBadConfigDoesNotEchoSecrets(t *testing.T) {
	var a Authenticator
	for _, tc := range []struct{ pairs, secret string }{
		{"alice-without-colon-s3cret", "s3cret"},
		{"bob:$2a$10$notreallyahashs3cret", "s3cret"},
	} {
		err := a.AddBasic(tc.pairs, Operator)
		if err == nil || strings.Contains(err.Error(), tc.secret) {
			t.Errorf("AddBasic(%q) = %v", tc.pairs, err)
		}
	}
	if err := a.AddTokens("short", Viewer); err == nil || strings.Contains(err.Error(), "short") {
		t.Errorf("short token: %v", err)
	}
}

func basic(u, p string) func(*http.Request) {
	return func(r *http.Request) { r.SetBasicAuth(u, p) }
}

func bearer(tok string) func(*http.Request) {
	return func(r *http.Request) { r.Header.Set("Authorization", "Bearer "+tok) }
}
