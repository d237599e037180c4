package signin

import (
	"bytes"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/stamen-dev/stamen/internal/auth"
)

// TestPatternFlowerRules: --auth patterns mean what they mean to Flower's
// authenticate(): exact addresses, a|b lists, one .* in the local part;
// and what Flower refuses at start is refused.
func TestPatternFlowerRules(t *testing.T) {
	for _, tc := range []struct {
		pattern string
		match   []string
		miss    []string
	}{
		{".*@example.com", []string{"a@example.com", "first.last+tag@example.com", "@example.com"},
			[]string{"a@example.org", "a@sub.example.com", "a@exampleXcom", "a b@example.com", "a@example.com.evil"}},
		{"alice@example.com|bob@example.org", []string{"alice@example.com", "bob@example.org"},
			[]string{"alice@example.org", "alice@example.com|bob@example.org", "Alice@example.com"}},
		{"alice@example.com", []string{"alice@example.com"}, []string{"alice@example.co", "xalice@example.com", "ALICE@example.com"}},
		{"ops.*@example.com", []string{"ops@example.com", "ops-team@example.com"}, []string{"dev@example.com"}},
		// A "*" without its "." is literal, as in Flower.
		{"*@example.com", []string{"*@example.com"}, []string{"a@example.com"}},
	} {
		p, err := ParsePattern(tc.pattern)
		if err != nil {
			t.Fatalf("%q: %v", tc.pattern, err)
		}
		for _, e := range tc.match {
			if !p.Match(e) {
				t.Errorf("%q does not match %q", tc.pattern, e)
			}
		}
		for _, e := range tc.miss {
			if p.Match(e) {
				t.Errorf("%q matches %q", tc.pattern, e)
			}
		}
	}
	for _, bad := range []string{".*@.*.com", "a@.*", ".*@example.com|b@example.com", "a*b*@example.com"} {
		if _, err := ParsePattern(bad); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
}

func mustPattern(t *testing.T, s string) *Pattern {
	t.Helper()
	p, err := ParsePattern(s)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// TestRules: --auth alone makes everyone it admits an operator, as in
// Flower; with role rules, whom no rule matches is refused; --auth bounds
// the role rules.
func TestRules(t *testing.T) {
	flower := Rules{Allow: mustPattern(t, ".*@example.com")}
	if flower.Role("a@example.com", nil) != auth.Operator || flower.Role("a@example.org", nil) != auth.None {
		t.Error("--auth alone")
	}
	roles := Rules{Allow: mustPattern(t, ".*@example.com"), Operators: mustPattern(t, "ops@example.com"),
		ViewerGroups: []string{"staff"}, OperatorGroups: []string{"sre"}}
	for _, tc := range []struct {
		email  string
		groups []string
		want   auth.Role
	}{
		{"ops@example.com", nil, auth.Operator},
		{"dev@example.com", []string{"staff"}, auth.Viewer},
		{"dev@example.com", []string{"staff", "sre"}, auth.Operator},
		{"dev@example.com", []string{"other"}, auth.None},
		{"ops@example.org", []string{"sre"}, auth.None},
	} {
		if got := roles.Role(tc.email, tc.groups); got != tc.want {
			t.Errorf("%s %v: %s, want %s", tc.email, tc.groups, got, tc.want)
		}
	}
	if (Rules{}).Check() == nil {
		t.Error("rules that admit no one accepted")
	}
	if got := roles.Relevant([]string{"a", "staff", "b", "staff"}); len(got) != 1 || got[0] != "staff" {
		t.Errorf("relevant groups %v", got)
	}
}

// TestCookieSealing: a sealed value opens with the same secret only (a
// second replica's, or after a restart), not once expired, not under
// another cookie's name, and not once a byte of it is changed.
func TestCookieSealing(t *testing.T) {
	secret := []byte("0123456789abcdef-shared-by-the-fleet")
	a, _ := newSealer(secret)
	b, _ := newSealer(secret)
	other, _ := newSealer([]byte("another secret, another fleet"))
	now := time.Now()
	v, err := seal(a, SessionCookie, session{User: "a@example.com", Method: MethodOIDC}, now.Add(time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	if s, err := open[session](b, SessionCookie, v, now); err != nil || s.User != "a@example.com" {
		t.Fatalf("same secret: %+v %v", s, err)
	}
	if _, err := open[session](other, SessionCookie, v, now); err == nil {
		t.Error("opened with another secret")
	}
	if _, err := open[session](a, SessionCookie, v, now.Add(2*time.Hour)); err == nil {
		t.Error("opened once expired")
	}
	if _, err := open[session](a, loginCookie, v, now); err == nil {
		t.Error("opened under another cookie's name")
	}
	for i := range v {
		c := []byte(v)
		c[i] ^= 1
		if _, err := open[session](a, SessionCookie, string(c), now); err == nil {
			t.Fatalf("opened with byte %d changed", i)
		}
	}
	if _, err := newSealer([]byte("short")); err == nil {
		t.Error("a short secret accepted")
	}
}

// TestNextStaysOnThisSite: the page to land on after signing in is a path
// under the prefix, never another site.
func TestNextStaysOnThisSite(t *testing.T) {
	s := &Service{cfg: Config{Prefix: "/flower"}}
	for in, want := range map[string]string{
		"/flower/api/workers?refresh=1": "/flower/api/workers?refresh=1",
		"/flower":                       "/flower",
		"":                              "/flower/",
		"//evil.example/x":              "/flower/",
		"/\\evil.example":               "/flower/",
		"https://evil.example/flower/":  "/flower/",
		"/other/path":                   "/flower/",
		"/flowerpot":                    "/flower/",
		"/flower/\x00x":                 "/flower/",
	} {
		if got := s.next(in); got != want {
			t.Errorf("next(%q) = %q, want %q", in, got, want)
		}
	}
}

// TestProxyTrustsOnlyItsAddresses: the identity header is believed from a
// trusted address only; from another it is ignored, and logged once per
// minute however often it comes.
func TestProxyTrustsOnlyItsAddresses(t *testing.T) {
	trusted, err := ParseTrusted("127.0.0.1/32, ::1")
	if err != nil {
		t.Fatal(err)
	}
	var logs bytes.Buffer
	p := &Proxy{Header: "X-Forwarded-Email", GroupsHeader: "X-Forwarded-Groups", Trusted: trusted,
		Rules: Rules{Allow: mustPattern(t, ".*@example.com"), ViewerGroups: []string{"staff"}},
		Log:   slog.New(slog.NewTextHandler(&logs, nil))}
	req := func(remote string) *http.Request {
		r := httptest.NewRequest(http.MethodGet, "/api/workers", nil)
		r.RemoteAddr = remote
		r.Header.Set("X-Forwarded-Email", "dev@example.com")
		r.Header.Set("X-Forwarded-Groups", "staff,other")
		return r
	}
	for _, remote := range []string{"127.0.0.1:5000", "[::1]:5000", "[::ffff:127.0.0.1]:1"} {
		got, ok := p.Identify(req(remote))
		if !ok || got.Name != "dev@example.com" || got.Role != auth.Viewer || got.Method != MethodProxy {
			t.Errorf("from %s: %+v %v", remote, got, ok)
		}
	}
	for range 3 {
		if got, ok := p.Identify(req("127.0.0.2:5000")); ok {
			t.Errorf("believed from an untrusted address: %+v", got)
		}
	}
	if n := strings.Count(logs.String(), "identity header ignored"); n != 1 {
		t.Errorf("logged %d times, want once:\n%s", n, logs.String())
	}
}
