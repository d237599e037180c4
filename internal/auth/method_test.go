package auth

import (
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"net/http"
	"net/http/httptest"
	"testing"
)

// TestPrincipalMethod: the caller the middleware hands on says how it
// authenticated, which GET /api/session reports.
func TestPrincipalMethod(t *testing.T) {
	var got Principal
	next := http.HandlerFunc(func(_ http.ResponseWriter, r *http.Request) { got = PrincipalFrom(r.Context()) })
	deny := func(w http.ResponseWriter, _ *http.Request, status int, _ string) { w.WriteHeader(status) }

	var open Authenticator
	cert := httptest.NewRequest("GET", "/api/session", nil)
	cert.TLS = &tls.ConnectionState{VerifiedChains: [][]*x509.Certificate{{{Subject: pkix.Name{CommonName: "client-1"}}}}}
	for _, c := range []struct {
		r          *http.Request
		name, meth string
	}{
		{httptest.NewRequest("GET", "/api/session", nil), Anonymous, MethodNone},
		{cert, "cert:CN=client-1", MethodCert},
	} {
		open.Middleware(deny, next).ServeHTTP(httptest.NewRecorder(), c.r)
		if got.Name != c.name || got.Method != c.meth || got.Role != Operator {
			t.Errorf("no credentials configured: %+v, want %s by %s", got, c.name, c.meth)
		}
	}

	var a Authenticator
	if err := a.AddBasic("u:p", Viewer); err != nil {
		t.Fatal(err)
	}
	if err := a.AddTokens("token-0123456789abcdef", Operator); err != nil {
		t.Fatal(err)
	}
	basic := httptest.NewRequest("GET", "/api/session", nil)
	basic.SetBasicAuth("u", "p")
	bearer := httptest.NewRequest("GET", "/api/session", nil)
	bearer.Header.Set("Authorization", "Bearer token-0123456789abcdef")
	for _, c := range []struct {
		r    *http.Request
		meth string
		role Role
	}{{basic, MethodBasic, Viewer}, {bearer, MethodBearer, Operator}} {
		a.Middleware(deny, next).ServeHTTP(httptest.NewRecorder(), c.r)
		if got.Method != c.meth || got.Role != c.role {
			t.Errorf("%+v, want %s %s", got, c.meth, c.role)
		}
	}
}
