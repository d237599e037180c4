package signin

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/oauth2"

	"github.com/stamen-dev/stamen/internal/auth"
)

// githubAPI answers GitHub's /user, /user/emails and /user/orgs for the
// token "tok".
func githubAPI(t *testing.T) *httptest.Server {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") != "Bearer tok" {
			w.WriteHeader(http.StatusUnauthorized)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		switch r.URL.Path {
		case "/user":
			_, _ = w.Write([]byte(`{"id": 42, "login": "octo"}`))
		case "/user/emails":
			_, _ = w.Write([]byte(`[{"email": "octo@personal.example", "verified": true, "primary": false},
				{"email": "unverified@example.com", "verified": false, "primary": false},
				{"email": "octo@example.com", "verified": true, "primary": true}]`))
		case "/user/orgs":
			_, _ = w.Write([]byte(`[{"login": "acme"}, {"login": "acme-sre"}]`))
		case "/api/v4/groups":
			if r.URL.Query().Get("min_access_level") != "30" {
				t.Errorf("GitLab groups asked with %s", r.URL.RawQuery)
			}
			_, _ = w.Write([]byte(`[{"full_path": "acme/ops"}, {"full_path": "acme/dev"}]`))
		default:
			w.WriteHeader(http.StatusNotFound)
		}
	}))
	t.Cleanup(srv.Close)
	return srv
}

// TestGitHubPerson: the person is their verified addresses, the primary
// first, and their organisations as groups; the address signed in with is
// the first the rules admit, as Flower takes the one --auth matches.
func TestGitHubPerson(t *testing.T) {
	api := githubAPI(t)
	g := &GitHub{WithOrgs: true, HTTP: api.Client(), APIURL: api.URL}
	p, err := g.person(context.Background(), &oauth2.Token{AccessToken: "tok"}, "")
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(p.Emails, []string{"octo@example.com", "octo@personal.example"}) || p.Subject != "github:42" ||
		!slices.Equal(p.Groups, []string{"acme", "acme-sre"}) {
		t.Fatalf("person %+v", p)
	}
	s := &Service{cfg: Config{Provider: g, Rules: Rules{Allow: mustPattern(t, ".*@personal.example"), OperatorGroups: []string{"acme-sre"}}}}
	sess, ok := s.admit(p)
	if !ok || sess.User != "octo@personal.example" || sess.Method != MethodGitHub || !slices.Equal(sess.Groups, []string{"acme-sre"}) {
		t.Fatalf("admitted %+v %v", sess, ok)
	}
	if s.cfg.Rules.Role(emailOf(sess), sess.Groups).String() != "operator" {
		t.Error("the acme-sre member is not an operator")
	}
	s.cfg.Rules = Rules{Allow: mustPattern(t, ".*@elsewhere.example")}
	if _, ok := s.admit(p); ok {
		t.Error("admitted with no address --auth matches")
	}
	if _, err := g.person(context.Background(), &oauth2.Token{AccessToken: "wrong"}, ""); err == nil {
		t.Error("a refused token gave a person")
	}
}

// TestGitLabAllowedGroups: with FLOWER_GITLAB_AUTH_ALLOWED_GROUPS, only
// members (at the minimum access level) of one of them sign in.
func TestGitLabAllowedGroups(t *testing.T) {
	api := githubAPI(t)
	for _, tc := range []struct {
		allowed []string
		wantErr error
	}{{[]string{"acme/ops"}, nil}, {[]string{"other/group"}, errDenied}} {
		o := GitLab("unused.example", tc.allowed, 30, false, Client{ID: "id"}, api.Client())
		base := api.URL
		groups := o.groups
		// The API is the test server's, not the domain's.
		o.groups = func(ctx context.Context, hc *http.Client, tok *oauth2.Token) ([]string, error) {
			return groups(ctx, &http.Client{Transport: rewriteHost{base}}, tok)
		}
		got, err := o.groups(context.Background(), nil, &oauth2.Token{AccessToken: "tok"})
		if !errors.Is(err, tc.wantErr) {
			t.Fatalf("allowed %v: %v", tc.allowed, err)
		}
		if err == nil && !slices.Equal(got, []string{"acme/ops", "acme/dev"}) {
			t.Fatalf("groups %v", got)
		}
	}
	if o := GitLab("", nil, 20, false, Client{ID: "id"}, nil); !slices.Equal(o.Client.Scopes, []string{"openid", "email"}) || o.groups != nil {
		t.Errorf("without groups GitLab asks %v", o.Client.Scopes)
	}
}

// rewriteHost sends every request to base.
type rewriteHost struct{ base string }

func (r rewriteHost) RoundTrip(req *http.Request) (*http.Response, error) {
	req = req.Clone(req.Context())
	u := *req.URL
	u.Scheme, u.Host = "http", r.base[len("http://"):]
	req.URL = &u
	return http.DefaultTransport.RoundTrip(req)
}

// TestGitHubSignIn runs the whole sign-in against a fake GitHub: /login
// sends the browser to GitHub with state and a PKCE challenge; the
// callback exchanges the code with the verifier and the client secret,
// reads the user, and sets a session whose holder is the verified
// address --auth admits, as an operator.
func TestGitHubSignIn(t *testing.T) {
	api := githubAPI(t)
	var verifier atomic.Value
	web := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/login/oauth/access_token" || r.ParseForm() != nil {
			w.WriteHeader(http.StatusNotFound)
			return
		}
		if r.Form.Get("code") != "the-code" || r.Form.Get("client_secret") != "client-secret" || r.Form.Get("code_verifier") == "" {
			w.WriteHeader(http.StatusBadRequest)
			_, _ = w.Write([]byte(`{"error": "bad_verification_code"}`))
			return
		}
		verifier.Store(r.Form.Get("code_verifier"))
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{"access_token": "tok", "token_type": "bearer", "scope": "user:email"}`))
	}))
	t.Cleanup(web.Close)
	gh := &GitHub{Client: Client{ID: "client-id", Secret: "client-secret"}, HTTP: web.Client(), WebURL: web.URL, APIURL: api.URL}
	s, err := New(Config{Provider: gh, Rules: Rules{Allow: mustPattern(t, ".*@example.com")},
		Secret: []byte("0123456789abcdef0123"), RedirectURL: "https://stamen.example/login"})
	if err != nil {
		t.Fatal(err)
	}
	w := httptest.NewRecorder()
	s.ServeHTTP(w, httptest.NewRequest(http.MethodGet, "/login?next=/api/workers", nil))
	loc, err := url.Parse(w.Header().Get("Location"))
	if w.Code != http.StatusFound || err != nil || !strings.HasPrefix(loc.String(), web.URL+"/login/oauth/authorize?") {
		t.Fatalf("/login: %d to %q", w.Code, w.Header().Get("Location"))
	}
	q := loc.Query()
	if q.Get("client_id") != "client-id" || q.Get("scope") != "user:email" || q.Get("redirect_uri") != "https://stamen.example/login" ||
		q.Get("code_challenge_method") != "S256" || q.Get("state") == "" || q.Has("nonce") {
		t.Fatalf("the authorization request: %s", loc)
	}
	login := w.Result().Cookies()
	if len(login) != 1 || !login[0].HttpOnly || !login[0].Secure || login[0].SameSite != http.SameSiteLaxMode || login[0].Path != "/login" {
		t.Fatalf("the sign-in's cookie: %+v", login)
	}
	r := httptest.NewRequest(http.MethodGet, "/login?code=the-code&state="+url.QueryEscape(q.Get("state")), nil)
	r.AddCookie(login[0])
	w = httptest.NewRecorder()
	s.ServeHTTP(w, r)
	if w.Code != http.StatusFound || w.Header().Get("Location") != "/api/workers" {
		t.Fatalf("the callback: %d to %q: %s", w.Code, w.Header().Get("Location"), w.Body)
	}
	if v, _ := verifier.Load().(string); oauth2.S256ChallengeFromVerifier(v) != q.Get("code_challenge") {
		t.Error("the code was exchanged without the challenge's verifier")
	}
	var session *http.Cookie
	for _, c := range w.Result().Cookies() {
		if c.Name == SessionCookie {
			session = c
		}
	}
	if session == nil || !session.HttpOnly || !session.Secure || session.SameSite != http.SameSiteLaxMode || session.MaxAge != int(DefaultLifetime/time.Second) {
		t.Fatalf("the session cookie: %+v", session)
	}
	r = httptest.NewRequest(http.MethodGet, "/api/workers", nil)
	r.AddCookie(session)
	if p, ok := s.Identify(r); !ok || p.Name != "octo@example.com" || p.Role != auth.Operator || p.Method != MethodGitHub {
		t.Fatalf("the session's holder: %+v %v", p, ok)
	}
}
