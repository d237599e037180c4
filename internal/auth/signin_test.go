package auth

import (
	"net/http"
	"net/http/httptest"
	"testing"
)

// fakeSignIn identifies by a header, as a session cookie or a proxy's
// header would.
type fakeSignIn struct {
	header string
	roles  map[string]Role
	method string
}

func (f fakeSignIn) Identify(r *http.Request) (Principal, bool) {
	v := r.Header.Get(f.header)
	if v == "" {
		return Principal{}, false
	}
	return Principal{Name: v, Role: f.roles[v], Method: f.method}, true
}

func (f fakeSignIn) Challenge(w http.ResponseWriter, r *http.Request) bool {
	if r.Header.Get("Accept") != "text/html" {
		return false
	}
	http.Redirect(w, r, "/login", http.StatusFound)
	return true
}

// TestMiddlewareSignIns: the proxy's identity comes before the
// Authorization header, which comes before the session; a signed-in
// caller no rule admits gets 403; a browser without identity is
// challenged, a page's script gets a 401 without a Basic challenge;
// the sign-in's pages are public; handlers see the identity.
func TestMiddlewareSignIns(t *testing.T) {
	a := newTestAuth(t)
	a.UseProxy(fakeSignIn{header: "X-Proxy", roles: map[string]Role{"p@example.com": Viewer}, method: "proxy"})
	a.UseSessions(fakeSignIn{header: "X-Session", roles: map[string]Role{"op@example.com": Operator, "v@example.com": Viewer}, method: "oidc"})
	a.AddPublic("/login")
	var seen Identity
	h := a.Middleware(func(w http.ResponseWriter, r *http.Request, status int, msg string) {
		http.Error(w, msg, status)
	}, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		seen = IdentityFrom(r.Context())
	}))
	for _, tc := range []struct {
		name, method, path string
		headers            map[string]string
		basic              bool
		want               int
		wantID             Identity
	}{
		{name: "session operator write", method: "POST", path: "/api/task/revoke/x", headers: map[string]string{"X-Session": "op@example.com"},
			want: 200, wantID: Identity{User: "op@example.com", Method: "oidc", Role: Operator}},
		{name: "session viewer write", method: "POST", path: "/api/task/revoke/x", headers: map[string]string{"X-Session": "v@example.com"}, want: 403},
		{name: "session no role", method: "GET", path: "/api/workers", headers: map[string]string{"X-Session": "nobody@example.com"}, want: 403},
		{name: "basic beats the session", method: "POST", path: "/api/task/revoke/x", headers: map[string]string{"X-Session": "v@example.com"}, basic: true,
			want: 200, wantID: Identity{User: "op", Method: MethodBasic, Role: Operator}},
		{name: "proxy beats basic", method: "GET", path: "/api/workers", headers: map[string]string{"X-Proxy": "p@example.com"}, basic: true,
			want: 200, wantID: Identity{User: "p@example.com", Method: "proxy", Role: Viewer}},
		{name: "browser challenged", method: "GET", path: "/api/workers", headers: map[string]string{"Accept": "text/html"}, want: 302},
		{name: "script", method: "GET", path: "/api/workers", headers: map[string]string{"Sec-Fetch-Mode": "cors"}, want: 401},
		{name: "program", method: "GET", path: "/api/workers", want: 401},
		{name: "sign-in page", method: "GET", path: "/login", want: 200},
	} {
		t.Run(tc.name, func(t *testing.T) {
			seen = Identity{}
			r := httptest.NewRequest(tc.method, tc.path, nil)
			for k, v := range tc.headers {
				r.Header.Set(k, v)
			}
			if tc.basic {
				r.SetBasicAuth("op", "op-pw")
			}
			w := httptest.NewRecorder()
			h.ServeHTTP(w, r)
			if w.Code != tc.want {
				t.Fatalf("status %d, want %d: %s", w.Code, tc.want, w.Body)
			}
			if tc.wantID != (Identity{}) && seen != tc.wantID {
				t.Errorf("identity %+v, want %+v", seen, tc.wantID)
			}
			challenged := w.Header().Get("WWW-Authenticate") != ""
			if w.Code == 401 && challenged != (tc.name == "program") {
				t.Errorf("WWW-Authenticate %q", w.Header().Values("WWW-Authenticate"))
			}
		})
	}
}
