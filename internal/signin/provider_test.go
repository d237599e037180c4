package signin

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"slices"
	"testing"

	"golang.org/x/oauth2"
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
