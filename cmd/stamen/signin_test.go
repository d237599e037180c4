package main

import (
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"
	"github.com/oauth2-proxy/mockoidc"

	"github.com/stamen-dev/stamen/internal/auth"
	"github.com/stamen-dev/stamen/internal/testcluster"
)

// idp is a real OpenID Connect provider for the tests: mockoidc, which
// signs in whoever is queued, with a switch (tamper) that makes its token
// endpoint answer ID tokens changed and signed again: by a key that is not
// its own (a forgery), or by its own with another nonce (a token of
// another sign-in).
type idp struct {
	m      *mockoidc.MockOIDC
	tamper atomic.Pointer[func(jwt.MapClaims) *mockoidc.Keypair]
}

func startIdP(t *testing.T) *idp {
	t.Helper()
	m, err := mockoidc.NewServer(nil)
	if err != nil {
		t.Fatal(err)
	}
	p := &idp{m: m}
	if err := m.AddMiddleware(func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			tamper := p.tamper.Load()
			if r.URL.Path != mockoidc.TokenEndpoint || tamper == nil {
				next.ServeHTTP(w, r)
				return
			}
			rec := httptest.NewRecorder()
			next.ServeHTTP(rec, r)
			var body map[string]any
			if json.Unmarshal(rec.Body.Bytes(), &body) == nil {
				if raw, ok := body["id_token"].(string); ok {
					claims := jwt.MapClaims{}
					if _, _, err := jwt.NewParser().ParseUnverified(raw, claims); err == nil {
						body["id_token"], _ = (*tamper)(claims).SignJWT(claims)
					}
				}
			}
			w.Header().Set("Content-Type", "application/json")
			_ = json.NewEncoder(w).Encode(body)
		})
	}); err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	if err := m.Start(ln, nil); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = m.Shutdown() })
	return p
}

// setTamper sets (nil: clears) how the token endpoint's ID tokens are
// changed.
func (p *idp) setTamper(f func(jwt.MapClaims) *mockoidc.Keypair) {
	if f == nil {
		p.tamper.Store(nil)
		return
	}
	p.tamper.Store(&f)
}

// queue makes the next sign-in that person's.
func (p *idp) queue(email string, groups ...string) {
	p.m.QueueUser(&mockoidc.MockUser{Subject: "sub-" + email, Email: email, EmailVerified: true, Groups: groups})
}

// signInArgs start stamen on the provider: example.com addresses may sign
// in, ops@example.com and the sre group as operators, the rest of
// example.com as viewers. The client and cookie secrets are in files.
func signInArgs(t *testing.T, p *idp, cookieSecret string) []string {
	t.Helper()
	dir := t.TempDir()
	secretFile, cookieFile := filepath.Join(dir, "client-secret"), filepath.Join(dir, "cookie-secret")
	if err := os.WriteFile(secretFile, []byte(p.m.ClientSecret+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(cookieFile, []byte(cookieSecret), 0o600); err != nil {
		t.Fatal(err)
	}
	return []string{"--oidc_issuer", p.m.Issuer(), "--oidc_client_id", p.m.ClientID,
		"--oidc_client_secret_file", secretFile, "--cookie_secret_file", cookieFile,
		"--oidc_scopes", "openid,email,profile,groups",
		"--auth", ".*@example.com", "--auth_operators", "ops@example.com", "--oidc_operator_groups", "sre",
		"--auth_viewers", ".*@example.com"}
}

// browserClient keeps cookies as a browser does; follow says whether it
// follows redirects.
func browserClient(t *testing.T, follow bool) *http.Client {
	t.Helper()
	jar, err := cookiejar.New(nil)
	if err != nil {
		t.Fatal(err)
	}
	c := &http.Client{Jar: jar}
	if !follow {
		c.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	}
	return c
}

// getPage asks for url as a browser does, accepting HTML.
func getPage(t *testing.T, c *http.Client, u string) (*http.Response, string) {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, u, nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Accept", "text/html,application/xhtml+xml,*/*;q=0.8")
	resp, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return resp, string(body)
}

// status calls method url with c and returns the status.
func status(t *testing.T, c *http.Client, method, u string) int {
	t.Helper()
	req, err := http.NewRequest(method, u, nil)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	return resp.StatusCode
}

// signIn signs the queued person in with a fresh browser, asking for
// /api/workers, and checks they land back on it.
func signIn(t *testing.T, base string) *http.Client {
	t.Helper()
	c := browserClient(t, true)
	resp, body := getPage(t, c, base+"/api/workers")
	if resp.StatusCode != http.StatusOK || resp.Request.URL.String() != base+"/api/workers" {
		t.Fatalf("signing in landed on %s with %d: %s", resp.Request.URL, resp.StatusCode, body)
	}
	return c
}

// sessionCookie is c's session cookie for base.
func sessionCookie(t *testing.T, c *http.Client, base string) *http.Cookie {
	t.Helper()
	u, _ := url.Parse(base)
	for _, ck := range c.Jar.Cookies(u) {
		if ck.Name == "stamen_session" {
			return ck
		}
	}
	return nil
}

// withCookie is a client without a jar that sends ck.
func withCookie(ck *http.Cookie) *http.Client {
	return &http.Client{Transport: roundTripFunc(func(r *http.Request) (*http.Response, error) {
		r = r.Clone(r.Context())
		r.AddCookie(ck)
		return http.DefaultTransport.RoundTrip(r)
	}), CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
}

type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

// TestOIDCSignIn runs the binary on a real OpenID Connect provider: a
// person asking for a page is sent to the provider and lands back on it;
// their session acts as their role; their writes are audited under their
// address; sign-out ends the session; whom --auth does not admit gets 403
// and no session.
func TestOIDCSignIn(t *testing.T) {
	testcluster.SkipIfShort(t, "builds and runs the binary")
	unsetFlowerOnlyEnv(t)
	p := startIdP(t)
	bin := buildBinary(t)
	base, logs, _ := runStamen(t, bin, signInArgs(t, p, "the-fleet-cookie-secret-0123456789")...)

	// A program without credentials gets 401, not a redirect.
	if s := status(t, http.DefaultClient, http.MethodGet, base+"/api/workers"); s != http.StatusUnauthorized {
		t.Fatalf("a program without credentials: %d", s)
	}

	t.Run("operator", func(t *testing.T) {
		p.queue("ops@example.com")
		c := signIn(t, base)
		recs := revokeAudited(t, c, base, "signed-in-revoke")
		if len(recs) != 1 || recs[0].User != "ops@example.com" || recs[0].Auth != "oidc" {
			t.Fatalf("audit records of the revoke: %+v\n%s", recs, logs.String())
		}
		// Signing out ends the session.
		if s := status(t, c, http.MethodPost, base+"/logout"); s != http.StatusOK {
			t.Fatalf("logout: %d", s)
		}
		if sessionCookie(t, c, base) != nil {
			t.Fatal("the session cookie outlived the sign-out")
		}
		if s := status(t, c, http.MethodGet, base+"/api/workers"); s != http.StatusUnauthorized {
			t.Fatalf("after signing out: %d", s)
		}
	})
	t.Run("operator by group", func(t *testing.T) {
		p.queue("dev@example.com", "sre", "staff")
		c := signIn(t, base)
		if s := status(t, c, http.MethodPost, base+"/api/task/revoke/by-group"); s != http.StatusOK {
			t.Fatalf("an operator by group's write: %d", s)
		}
	})
	t.Run("viewer", func(t *testing.T) {
		p.queue("dev@example.com", "staff")
		c := signIn(t, base)
		if s := status(t, c, http.MethodGet, base+"/api/tasks"); s != http.StatusOK {
			t.Fatalf("a viewer's read: %d", s)
		}
		if s := status(t, c, http.MethodPost, base+"/api/task/revoke/by-a-viewer"); s != http.StatusForbidden {
			t.Fatalf("a viewer's write: %d", s)
		}
	})
	t.Run("outside --auth", func(t *testing.T) {
		p.queue("eve@example.org")
		c := browserClient(t, true)
		resp, body := getPage(t, c, base+"/api/workers")
		if resp.StatusCode != http.StatusForbidden || !strings.Contains(body, "eve@example.org") {
			t.Fatalf("an address outside --auth: %d %s", resp.StatusCode, body)
		}
		if sessionCookie(t, c, base) != nil {
			t.Fatal("an address outside --auth got a session")
		}
	})
	t.Run("tampered cookie", func(t *testing.T) {
		p.queue("ops@example.com")
		ck := sessionCookie(t, signIn(t, base), base)
		if s := status(t, withCookie(ck), http.MethodGet, base+"/api/workers"); s != http.StatusOK {
			t.Fatalf("the cookie as it was: %d", s)
		}
		for _, i := range []int{0, len(ck.Value) / 2, len(ck.Value) - 1} {
			b := []byte(ck.Value)
			b[i] ^= 0x01
			if b[i] == '.' || b[i] == '/' { // keep it base64url
				b[i] = 'A'
			}
			bad := *ck
			bad.Value = string(b)
			if s := status(t, withCookie(&bad), http.MethodGet, base+"/api/workers"); s != http.StatusUnauthorized {
				t.Fatalf("a cookie changed at byte %d: %d", i, s)
			}
		}
	})

	// The refusals of the sign-in itself, step by step.
	start := func(t *testing.T) (*http.Client, string) {
		t.Helper()
		c := browserClient(t, false)
		resp, _ := getPage(t, c, base+"/login?next=/api/workers")
		auth := resp.Header.Get("Location")
		if resp.StatusCode != http.StatusFound || !strings.HasPrefix(auth, p.m.AuthorizationEndpoint()) {
			t.Fatalf("/login: %d to %q", resp.StatusCode, auth)
		}
		q, _ := url.Parse(auth)
		if q.Query().Get("code_challenge_method") != "S256" || q.Query().Get("nonce") == "" || q.Query().Get("state") == "" {
			t.Fatalf("the authorization request lacks PKCE, nonce or state: %s", auth)
		}
		resp, _ = getPage(t, c, auth)
		cb := resp.Header.Get("Location")
		if !strings.HasPrefix(cb, base+"/login?") {
			t.Fatalf("the provider sent the browser to %q", cb)
		}
		return c, cb
	}
	finish := func(t *testing.T, c *http.Client, cb string) (int, string) {
		t.Helper()
		resp, body := getPage(t, c, cb)
		if resp.StatusCode == http.StatusFound && sessionCookie(t, c, base) == nil {
			t.Fatalf("redirected without a session")
		}
		return resp.StatusCode, body
	}
	t.Run("wrong state", func(t *testing.T) {
		p.queue("ops@example.com")
		c, cb := start(t)
		u, _ := url.Parse(cb)
		q := u.Query()
		q.Set("state", "not-the-state")
		u.RawQuery = q.Encode()
		if s, body := finish(t, c, u.String()); s != http.StatusBadRequest || sessionCookie(t, c, base) != nil {
			t.Fatalf("a wrong state: %d %s", s, body)
		}
	})
	t.Run("replayed code", func(t *testing.T) {
		p.queue("ops@example.com")
		c, cb := start(t)
		u, _ := url.Parse(base + "/login")
		loginCookies := c.Jar.Cookies(u)
		if len(loginCookies) != 1 {
			t.Fatalf("the sign-in's cookies: %v", loginCookies)
		}
		if s, body := finish(t, c, cb); s != http.StatusFound {
			t.Fatalf("the first use of the code: %d %s", s, body)
		}
		// Again in the same browser: its sign-in is over.
		c2 := browserClient(t, false)
		if s, _ := finish(t, c2, cb); s != http.StatusBadRequest {
			t.Fatalf("the code again without the sign-in's cookie: %d", s)
		}
		// Again with the sign-in's cookie, as one who copied both: the
		// provider refuses a code used once.
		c3 := browserClient(t, false)
		c3.Jar.SetCookies(u, loginCookies)
		if s, body := finish(t, c3, cb); s != http.StatusForbidden || sessionCookie(t, c3, base) != nil {
			t.Fatalf("the code again with the sign-in's cookie: %d %s", s, body)
		}
	})
	t.Run("forged ID token", func(t *testing.T) {
		p.queue("ops@example.com")
		c, cb := start(t)
		forger, err := mockoidc.RandomKeypair(2048)
		if err != nil {
			t.Fatal(err)
		}
		p.setTamper(func(jwt.MapClaims) *mockoidc.Keypair { return forger })
		defer p.setTamper(nil)
		if s, body := finish(t, c, cb); s != http.StatusForbidden || !strings.Contains(body, "ID token refused") {
			t.Fatalf("a forged ID token: %d %s", s, body)
		}
	})
	t.Run("another sign-in's nonce", func(t *testing.T) {
		p.queue("ops@example.com")
		c, cb := start(t)
		p.setTamper(func(c jwt.MapClaims) *mockoidc.Keypair { c["nonce"] = "another-sign-in"; return p.m.Keypair })
		defer p.setTamper(nil)
		if s, body := finish(t, c, cb); s != http.StatusForbidden || !strings.Contains(body, "nonce") {
			t.Fatalf("an ID token with another nonce: %d %s", s, body)
		}
	})
	t.Run("expired ID token", func(t *testing.T) {
		p.queue("ops@example.com")
		c, cb := start(t)
		// The provider's clock an hour back: its ID token (valid ten
		// minutes) expired fifty minutes ago.
		p.m.FastForward(-60 * time.Minute)
		defer p.m.FastForward(60 * time.Minute)
		if s, body := finish(t, c, cb); s != http.StatusForbidden || !strings.Contains(body, "expired") {
			t.Fatalf("an expired ID token: %d %s", s, body)
		}
	})
	for _, secret := range []string{p.m.ClientSecret, "the-fleet-cookie-secret-0123456789"} {
		if strings.Contains(logs.String(), secret) {
			t.Errorf("the log shows a secret:\n%s", logs.String())
		}
	}
}

// TestSessionOutlivesRestartAndCrossesReplicas: a session cookie holds
// after stamen restarts with the same cookie secret, and on a second
// stamen given the same secret, as on every replica of a fleet; not on one
// with another secret.
func TestSessionOutlivesRestartAndCrossesReplicas(t *testing.T) {
	testcluster.SkipIfShort(t, "builds and runs the binary")
	unsetFlowerOnlyEnv(t)
	p := startIdP(t)
	bin := buildBinary(t)
	const secret = "shared-by-the-whole-fleet-0123456789"
	args := signInArgs(t, p, secret)
	base, logs, stop := runStamen(t, bin, args...)
	p.queue("ops@example.com")
	ck := sessionCookie(t, signIn(t, base), base)
	if err := stop(); err != nil {
		t.Fatalf("stop: %v\n%s", err, logs.String())
	}
	restarted, _, _ := runStamen(t, bin, args...)
	replica, _, _ := runStamen(t, bin, args...)
	for name, b := range map[string]string{"after a restart": restarted, "on another replica": replica} {
		if s := status(t, withCookie(ck), http.MethodPost, b+"/api/task/revoke/from-the-fleet"); s != http.StatusOK {
			t.Errorf("%s: an operator's write answered %d", name, s)
		}
	}
	other, _, _ := runStamen(t, bin, signInArgs(t, p, "another-fleet-another-secret-0123")...)
	if s := status(t, withCookie(ck), http.MethodGet, other+"/api/workers"); s != http.StatusUnauthorized {
		t.Errorf("with another secret: %d", s)
	}
}

// TestFlowerProvidersRedirect runs Flower's OAuth command line for each of
// its providers, with Flower's variables: stamen starts, and /login sends
// the browser to the provider's authorization endpoint with the client id,
// Flower's scope (with openid for the OpenID Connect ones) and the
// redirect URI, with state and PKCE.
func TestFlowerProvidersRedirect(t *testing.T) {
	testcluster.SkipIfShort(t, "builds and runs the binary")
	unsetFlowerOnlyEnv(t)
	bin := buildBinary(t)
	const redirect = "https://flower.example.com/login"
	for _, tc := range []struct {
		handler, authURL, scope string
		env                     map[string]string
	}{
		{"GoogleAuth2LoginHandler", "https://accounts.google.com/o/oauth2/v2/auth", "openid email profile", nil},
		{"GithubLoginHandler", "https://github.com/login/oauth/authorize", "user:email", nil},
		{"GithubLoginHandler", "https://github.example.com/login/oauth/authorize", "user:email",
			map[string]string{"FLOWER_GITHUB_OAUTH_DOMAIN": "github.example.com"}},
		{"GitLabLoginHandler", "https://gitlab.com/oauth/authorize", "openid email read_api",
			map[string]string{"FLOWER_GITLAB_AUTH_ALLOWED_GROUPS": "acme/ops", "FLOWER_GITLAB_MIN_ACCESS_LEVEL": "30"}},
		{"OktaLoginHandler", "https://acme.okta.com/oauth2/default/v1/authorize", "openid email",
			map[string]string{"FLOWER_OAUTH2_OKTA_BASE_URL": "https://acme.okta.com/oauth2/default"}},
	} {
		t.Run(tc.handler+" "+tc.authURL, func(t *testing.T) {
			t.Setenv("FLOWER_OAUTH2_KEY", "flower-client-id")
			t.Setenv("FLOWER_OAUTH2_SECRET", "flower-client-secret")
			t.Setenv("FLOWER_OAUTH2_REDIRECT_URI", redirect)
			for k, v := range tc.env {
				t.Setenv(k, v)
			}
			base, logs, _ := runStamen(t, bin, "--auth=.*@example.com", "--auth_provider=flower.views.auth."+tc.handler)
			c := browserClient(t, false)
			// A page asked for sends the browser to /login, which sends it
			// to the provider.
			resp, _ := getPage(t, c, base+"/api/workers")
			if resp.StatusCode != http.StatusFound || resp.Header.Get("Location") != "/login?next=%2Fapi%2Fworkers" {
				t.Fatalf("a page asked for: %d to %q", resp.StatusCode, resp.Header.Get("Location"))
			}
			resp, _ = getPage(t, c, base+"/login?next=%2Fapi%2Fworkers")
			loc, err := url.Parse(resp.Header.Get("Location"))
			if resp.StatusCode != http.StatusFound || err != nil {
				t.Fatalf("/login: %d to %q\n%s", resp.StatusCode, resp.Header.Get("Location"), logs.String())
			}
			q := loc.Query()
			if got := loc.Scheme + "://" + loc.Host + loc.Path; got != tc.authURL {
				t.Errorf("sent to %s, want %s", got, tc.authURL)
			}
			for k, want := range map[string]string{"client_id": "flower-client-id", "scope": tc.scope,
				"redirect_uri": redirect, "response_type": "code", "code_challenge_method": "S256"} {
				if q.Get(k) != want {
					t.Errorf("%s=%q, want %q", k, q.Get(k), want)
				}
			}
			if q.Get("state") == "" || q.Get("code_challenge") == "" {
				t.Errorf("no state or PKCE challenge: %s", loc)
			}
			if strings.Contains(loc.String(), "flower-client-secret") || strings.Contains(logs.String(), "flower-client-secret") {
				t.Error("the client secret shows in the redirect or the log")
			}
		})
	}
}

// TestProxyIdentityHeader: the identity header signs in from a trusted
// proxy's address, and is ignored (and logged) from any other.
func TestProxyIdentityHeader(t *testing.T) {
	testcluster.SkipIfShort(t, "builds and runs the binary")
	unsetFlowerOnlyEnv(t)
	bin := buildBinary(t)
	base, logs, _ := runStamen(t, bin, "--address=127.0.0.1", "--auth_header=X-Forwarded-Email",
		"--trusted_proxies=127.0.0.1/32", "--auth=.*@example.com", "--auth_viewers=.*@example.com")
	call := func(from, method, path, email string) int {
		t.Helper()
		d := &net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(from)}}
		c := &http.Client{Transport: &http.Transport{DialContext: d.DialContext}}
		req, _ := http.NewRequest(method, base+path, nil)
		req.Header.Set("X-Forwarded-Email", email)
		resp, err := c.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	if s := call("127.0.0.1", http.MethodGet, "/api/workers", "dev@example.com"); s != http.StatusOK {
		t.Errorf("from the trusted proxy: %d", s)
	}
	if s := call("127.0.0.1", http.MethodPost, "/api/task/revoke/x", "dev@example.com"); s != http.StatusForbidden {
		t.Errorf("a viewer's write through the proxy: %d", s)
	}
	if s := call("127.0.0.1", http.MethodGet, "/api/workers", "eve@example.org"); s != http.StatusForbidden {
		t.Errorf("an address outside --auth through the proxy: %d", s)
	}
	if s := call("127.0.0.2", http.MethodGet, "/api/workers", "dev@example.com"); s != http.StatusUnauthorized {
		t.Errorf("from another address: %d", s)
	}
	testcluster.Eventually(t, 5*time.Second, "the ignored header is logged", func() bool {
		return strings.Contains(logs.String(), "identity header ignored") && strings.Contains(logs.String(), "remote=127.0.0.2:")
	})
}

// TestSignInOptionsRefused: sign-in options that cannot work stop stamen
// at start with what to do, and none of them shows the secrets.
func TestSignInOptionsRefused(t *testing.T) {
	unsetFlowerOnlyEnv(t)
	for _, tc := range []struct {
		name    string
		args    []string
		env     map[string]string
		wantErr string
	}{
		{name: "a pattern Flower refuses", args: []string{"--auth=.*@.*.com", "--auth_provider=google"}, wantErr: "invalid --auth"},
		{name: "--auth with no way to sign in", args: []string{"--auth=.*@example.com"}, wantErr: "--auth needs a way to sign in"},
		{name: "a custom handler", args: []string{"--auth=a@example.com", "--auth_provider=myco.auth.Handler"}, wantErr: "a custom Python handler cannot run here"},
		{name: "no client secret", args: []string{"--auth=a@example.com", "--auth_provider=google", "--oauth2_key=id"}, wantErr: "its secret"},
		{name: "no rule", args: []string{"--auth_provider=google"}, env: map[string]string{"FLOWER_OAUTH2_KEY": "id", "FLOWER_OAUTH2_SECRET": "client-S3cret"},
			wantErr: "say who may sign in"},
		{name: "a short cookie secret", args: []string{"--auth=a@example.com", "--auth_provider=google", "--cookie_secret=short-S3cret"},
			env: map[string]string{"FLOWER_OAUTH2_KEY": "id", "FLOWER_OAUTH2_SECRET": "client-S3cret"}, wantErr: "at least 16 bytes"},
		{name: "a header without trusted proxies", args: []string{"--auth=a@example.com", "--auth_header=X-Forwarded-Email"}, wantErr: "needs --trusted_proxies"},
		{name: "bad trusted proxies", args: []string{"--auth=a@example.com", "--auth_header=X-Forwarded-Email", "--trusted_proxies=10.0.0.0/99"}, wantErr: "--trusted_proxies"},
		{name: "Okta without its base URL", args: []string{"--auth=a@example.com", "--auth_provider=flower.views.auth.OktaLoginHandler"},
			env: map[string]string{"FLOWER_OAUTH2_KEY": "id", "FLOWER_OAUTH2_SECRET": "client-S3cret"}, wantErr: "FLOWER_OAUTH2_OKTA_BASE_URL"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			for k, v := range tc.env {
				t.Setenv(k, v)
			}
			o, err := parseFlags(tc.args, io.Discard)
			if err != nil {
				t.Fatal(err)
			}
			var authn auth.Authenticator
			_, err = o.signIn.setUp(&authn, "", slog.New(slog.DiscardHandler))
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Fatalf("error %v, want %q", err, tc.wantErr)
			}
			if strings.Contains(err.Error(), "S3cret") {
				t.Errorf("the error shows a secret: %v", err)
			}
		})
	}
}

// TestOIDCSignInUnderURLPrefix: under --url_prefix, the sign-in's pages,
// its redirects and its cookies are the prefix's: a person asking for a
// page there lands back on it, acts as their role, and signs out.
func TestOIDCSignInUnderURLPrefix(t *testing.T) {
	testcluster.SkipIfShort(t, "builds and runs the binary")
	unsetFlowerOnlyEnv(t)
	p := startIdP(t)
	bin := buildBinary(t)
	port := freePort(t)
	proc := startProcess(t, bin, append(append([]string{"--port", fmt.Sprint(port), "--url_prefix", "flower"}, embeddedArgs(t)...),
		signInArgs(t, p, "the-fleet-cookie-secret-0123456789")...)...)
	base := fmt.Sprintf("http://127.0.0.1:%d/flower", port)
	proc.awaitUp(t, func() bool {
		resp, err := http.Get(base + "/healthcheck")
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK
	})

	p.queue("ops@example.com")
	c := signIn(t, base)
	if s := status(t, c, http.MethodPost, base+"/api/task/revoke/under-a-prefix"); s != http.StatusOK {
		t.Fatalf("the operator's write: %d\n%s", s, proc.logs.String())
	}
	if s := status(t, c, http.MethodPost, base+"/logout"); s != http.StatusOK {
		t.Fatalf("logout: %d", s)
	}
	if s := status(t, c, http.MethodGet, base+"/api/workers"); s != http.StatusUnauthorized {
		t.Fatalf("after signing out: %d", s)
	}
}
