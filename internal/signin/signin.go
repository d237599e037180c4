package signin

import (
	"context"
	"crypto/rand"
	"crypto/subtle"
	"encoding/base64"
	"encoding/json"
	"errors"
	"log/slog"
	"net/http"
	"net/url"
	"strings"
	"time"
	"unicode"

	"golang.org/x/oauth2"

	"github.com/stamen-dev/stamen/internal/auth"
)

// The cookies: the session, and the sign-in under way (state, nonce and
// PKCE verifier, and the page asked for), which lives minutes.
const (
	SessionCookie = "stamen_session"
	loginCookie   = "stamen_login"
	loginLifetime = 10 * time.Minute
)

// DefaultLifetime is a session's lifetime when Config gives none.
const DefaultLifetime = 12 * time.Hour

// exchangeTimeout bounds a sign-in's calls to the provider.
const exchangeTimeout = 15 * time.Second

// Config is a Service's settings.
type Config struct {
	Provider Provider
	Rules    Rules
	// Secret keys the cookies (at least MinSecretLen bytes): give every
	// replica the same, and keep it across restarts, for sessions to hold
	// there.
	Secret []byte
	// Lifetime bounds a session from its sign-in (0: DefaultLifetime).
	Lifetime time.Duration
	// Prefix is --url_prefix as a path ("/flower"), or "".
	Prefix string
	// RedirectURL is the callback registered with the provider: the
	// absolute URL of <prefix>/login. Empty: built from each request's
	// Host, which a proxy in front must pass on.
	RedirectURL string
	Log         *slog.Logger
	// Now is the clock (tests); nil: time.Now.
	Now func() time.Time
}

// Service serves the sign-in's pages (ServeHTTP: /login, /logout) and
// identifies callers by their session cookie (auth.SignIn).
type Service struct {
	cfg   Config
	seal  *sealer
	https bool
}

// New checks cfg and returns its Service.
func New(cfg Config) (*Service, error) {
	if cfg.Provider == nil {
		return nil, errors.New("no sign-in provider")
	}
	if err := cfg.Rules.Check(); err != nil {
		return nil, err
	}
	s, err := newSealer(cfg.Secret)
	if err != nil {
		return nil, err
	}
	if cfg.Lifetime <= 0 {
		cfg.Lifetime = DefaultLifetime
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Log == nil {
		cfg.Log = slog.New(slog.DiscardHandler)
	}
	https := false
	if cfg.RedirectURL != "" {
		u, err := url.Parse(cfg.RedirectURL)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return nil, errors.New("the redirect URI must be an absolute http(s) URL")
		}
		https = u.Scheme == "https"
	}
	return &Service{cfg: cfg, seal: s, https: https}, nil
}

// Paths are the sign-in's pages, under the prefix.
var Paths = []string{"/login", "/logout"}

// session is what the session cookie holds.
type session struct {
	User    string   `json:"u"`
	Subject string   `json:"s,omitempty"`
	Method  string   `json:"m"`
	Groups  []string `json:"g,omitempty"`
}

// login is what the sign-in cookie holds.
type login struct {
	State    string `json:"st"`
	Nonce    string `json:"n"`
	Verifier string `json:"v"`
	Next     string `json:"next"`
}

// Identify implements auth.SignIn: the session cookie's holder, with the
// role the rules give them now (a rule changed since the sign-in applies
// at once).
func (s *Service) Identify(r *http.Request) (auth.Principal, bool) {
	c, err := r.Cookie(SessionCookie)
	if err != nil {
		return auth.Principal{}, false
	}
	sess, err := open[session](s.seal, SessionCookie, c.Value, s.cfg.Now())
	if err != nil || sess.User == "" {
		return auth.Principal{}, false
	}
	return auth.Principal{Name: sess.User, Role: s.cfg.Rules.Role(emailOf(sess), sess.Groups), Method: sess.Method}, true
}

// emailOf is the session's address: its user, unless it holds the subject
// for want of one.
func emailOf(sess session) string {
	if sess.User == sess.Subject {
		return ""
	}
	return sess.User
}

// Challenge implements auth.Challenger: a browser asking for a page (GET,
// accepting HTML) is sent to sign in, and brought back to the page after;
// a program gets the 401 it expects.
func (s *Service) Challenge(w http.ResponseWriter, r *http.Request) bool {
	if r.Method != http.MethodGet || !strings.Contains(r.Header.Get("Accept"), "text/html") {
		return false
	}
	next := s.cfg.Prefix + r.URL.Path
	if r.URL.RawQuery != "" {
		next += "?" + r.URL.RawQuery
	}
	http.Redirect(w, r, s.cfg.Prefix+"/login?next="+url.QueryEscape(next), http.StatusFound)
	return true
}

// ServeHTTP serves /login (which starts a sign-in, and is the callback the
// provider sends the browser back to, as Flower's /login is) and /logout.
func (s *Service) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Cache-Control", "no-store")
	switch {
	case r.URL.Path == "/logout" && (r.Method == http.MethodGet || r.Method == http.MethodPost):
		s.logout(w, r)
	case r.URL.Path == "/login" && r.Method == http.MethodGet:
		q := r.URL.Query()
		if q.Has("code") || q.Has("error") {
			s.callback(w, r)
		} else {
			s.start(w, r)
		}
	default:
		w.Header().Set("Allow", "GET")
		writeError(w, http.StatusMethodNotAllowed, "method "+r.Method+" is not allowed")
	}
}

func (s *Service) start(w http.ResponseWriter, r *http.Request) {
	ctx, cancel := context.WithTimeout(r.Context(), exchangeTimeout)
	defer cancel()
	cfg, err := s.oauth2(ctx, r)
	if err != nil {
		s.cfg.Log.Error("sign-in cannot start", slog.Any("err", err))
		writeError(w, http.StatusBadGateway, "the sign-in provider cannot be reached; try again shortly")
		return
	}
	l := login{State: random(), Nonce: random(), Verifier: oauth2.GenerateVerifier(), Next: s.next(r.URL.Query().Get("next"))}
	v, err := seal(s.seal, loginCookie, l, s.cfg.Now().Add(loginLifetime))
	if err != nil {
		writeError(w, http.StatusInternalServerError, "internal error")
		return
	}
	s.setCookie(w, r, loginCookie, v, s.cfg.Prefix+"/login", loginLifetime)
	opts := []oauth2.AuthCodeOption{oauth2.S256ChallengeOption(l.Verifier)}
	if s.cfg.Provider.usesNonce() {
		opts = append(opts, oauth2.SetAuthURLParam("nonce", l.Nonce))
	}
	http.Redirect(w, r, cfg.AuthCodeURL(l.State, opts...), http.StatusFound)
}

func (s *Service) callback(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	c, err := r.Cookie(loginCookie)
	if err != nil {
		writeError(w, http.StatusBadRequest, "no sign-in under way in this browser: start again at "+s.cfg.Prefix+"/login")
		return
	}
	// One try per sign-in: the cookie goes whatever happens next.
	s.setCookie(w, r, loginCookie, "", s.cfg.Prefix+"/login", -1)
	l, err := open[login](s.seal, loginCookie, c.Value, s.cfg.Now())
	if err != nil {
		writeError(w, http.StatusBadRequest, "the sign-in expired or is not valid: start again at "+s.cfg.Prefix+"/login")
		return
	}
	if subtle.ConstantTimeCompare([]byte(q.Get("state")), []byte(l.State)) != 1 {
		writeError(w, http.StatusBadRequest, "the sign-in's state does not match: start again at "+s.cfg.Prefix+"/login")
		return
	}
	if e := q.Get("error"); e != "" {
		writeError(w, http.StatusForbidden, "the provider refused the sign-in: "+printable(e, 100))
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), exchangeTimeout)
	defer cancel()
	cfg, err := s.oauth2(ctx, r)
	if err != nil {
		s.cfg.Log.Error("sign-in cannot finish", slog.Any("err", err))
		writeError(w, http.StatusBadGateway, "the sign-in provider cannot be reached; try again shortly")
		return
	}
	tok, err := cfg.Exchange(s.httpContext(ctx), q.Get("code"), oauth2.VerifierOption(l.Verifier))
	if err != nil {
		s.cfg.Log.Warn("sign-in refused: the code was not exchanged", exchangeError(err))
		writeError(w, http.StatusForbidden, "sign-in failed: the provider did not accept the code")
		return
	}
	p, err := s.cfg.Provider.person(ctx, tok, l.Nonce)
	if err != nil {
		s.cfg.Log.Warn("sign-in refused", slog.String("provider", s.cfg.Provider.Method()), slog.Any("err", err))
		writeError(w, http.StatusForbidden, "sign-in failed: "+err.Error())
		return
	}
	sess, ok := s.admit(p)
	if !ok {
		who := p.Subject
		if len(p.Emails) > 0 {
			who = p.Emails[0]
		}
		s.cfg.Log.Info("sign-in refused: no rule admits the user", slog.String("user", who))
		writeError(w, http.StatusForbidden, "Access denied to '"+printable(who, maxIdentity)+"'. Please use another account or ask your admin to add your email to --auth.")
		return
	}
	v, err := seal(s.seal, SessionCookie, sess, s.cfg.Now().Add(s.cfg.Lifetime))
	if err != nil {
		writeError(w, http.StatusInternalServerError, "internal error")
		return
	}
	s.setCookie(w, r, SessionCookie, v, s.cookiePath(), s.cfg.Lifetime)
	s.cfg.Log.Info("signed in", slog.String("user", sess.User), slog.String("method", sess.Method))
	http.Redirect(w, r, l.Next, http.StatusFound)
}

// exchangeError says why the token endpoint refused, without its body,
// which may echo the code.
func exchangeError(err error) slog.Attr {
	var re *oauth2.RetrieveError
	if errors.As(err, &re) {
		status := 0
		if re.Response != nil {
			status = re.Response.StatusCode
		}
		return slog.Group("err", slog.Int("status", status), slog.String("error", printable(re.ErrorCode, 100)))
	}
	return slog.Any("err", err)
}

// admit picks the first of the person's addresses the rules admit (as
// Flower takes a GitHub user's address that --auth matches), or their
// subject when they have none and the rules need none.
func (s *Service) admit(p person) (session, bool) {
	groups := s.cfg.Rules.Relevant(p.Groups)
	if len(groups) > maxGroups {
		groups = groups[:maxGroups]
	}
	for _, e := range p.Emails {
		if len(e) <= maxIdentity && s.cfg.Rules.Role(e, groups) != auth.None {
			return session{User: e, Subject: p.Subject, Method: s.cfg.Provider.Method(), Groups: groups}, true
		}
	}
	if len(p.Emails) == 0 && p.Subject != "" && len(p.Subject) <= maxIdentity && s.cfg.Rules.Role("", groups) != auth.None {
		return session{User: p.Subject, Subject: p.Subject, Method: s.cfg.Provider.Method(), Groups: groups}, true
	}
	return session{}, false
}

func (s *Service) logout(w http.ResponseWriter, r *http.Request) {
	s.setCookie(w, r, SessionCookie, "", s.cookiePath(), -1)
	w.Header().Set("Content-Type", "application/json")
	_, _ = w.Write([]byte(`{"message": "Signed out"}` + "\n"))
}

// oauth2 is the provider's client with the redirect URL.
func (s *Service) oauth2(ctx context.Context, r *http.Request) (*oauth2.Config, error) {
	cfg, err := s.cfg.Provider.config(s.httpContext(ctx))
	if err != nil {
		return nil, err
	}
	cfg.RedirectURL = s.cfg.RedirectURL
	if cfg.RedirectURL == "" {
		scheme := "http"
		if r.TLS != nil {
			scheme = "https"
		}
		cfg.RedirectURL = scheme + "://" + r.Host + s.cfg.Prefix + "/login"
	}
	return cfg, nil
}

// httpContext carries the provider's HTTP client (its timeouts) to
// x/oauth2's token exchange.
func (s *Service) httpContext(ctx context.Context) context.Context {
	var hc *http.Client
	switch p := s.cfg.Provider.(type) {
	case *OIDC:
		hc = p.HTTP
	case *GitHub:
		hc = p.HTTP
	}
	if hc == nil {
		return ctx
	}
	return context.WithValue(ctx, oauth2.HTTPClient, hc)
}

func (s *Service) cookiePath() string {
	return s.cfg.Prefix + "/"
}

// setCookie sets (or with maxAge < 0 clears) a cookie that scripts cannot
// read, that is sent on top-level navigations from other sites (the
// provider's redirect back) but not on their sub-requests or forms, and
// that is Secure when stamen is reached over HTTPS.
func (s *Service) setCookie(w http.ResponseWriter, r *http.Request, name, value, path string, maxAge time.Duration) {
	c := &http.Cookie{
		Name: name, Value: value, Path: path,
		HttpOnly: true, SameSite: http.SameSiteLaxMode,
		Secure: r.TLS != nil || s.https,
	}
	if maxAge < 0 {
		c.MaxAge = -1
	} else {
		c.MaxAge = int(maxAge / time.Second)
	}
	http.SetCookie(w, c)
}

// next is the page to land on after signing in: a path on this server
// under the prefix, else the prefix's root. Anything else (another host,
// //host, a scheme, a backslash browsers read as a slash) would make
// /login an open redirect.
func (s *Service) next(v string) string {
	home := s.cfg.Prefix + "/"
	if v == "" || len(v) > 2048 || !strings.HasPrefix(v, "/") || strings.HasPrefix(v, "//") ||
		strings.ContainsAny(v, "\\") || strings.ContainsFunc(v, unicode.IsControl) {
		return home
	}
	u, err := url.Parse(v)
	if err != nil || u.Scheme != "" || u.Host != "" || u.User != nil {
		return home
	}
	if s.cfg.Prefix != "" && u.Path != s.cfg.Prefix && !strings.HasPrefix(u.Path, s.cfg.Prefix+"/") {
		return home
	}
	return v
}

func random() string {
	b := make([]byte, 32)
	_, _ = rand.Read(b)
	return base64.RawURLEncoding.EncodeToString(b)
}

// printable bounds text from outside and keeps only printable characters.
func printable(s string, n int) string {
	s = strings.Map(func(r rune) rune {
		if unicode.IsPrint(r) {
			return r
		}
		return -1
	}, s)
	if len(s) > n {
		s = strings.ToValidUTF8(s[:n], "")
	}
	return s
}

func writeError(w http.ResponseWriter, status int, msg string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	b, _ := json.Marshal(map[string]string{"error": msg})
	_, _ = w.Write(append(b, '\n'))
}
