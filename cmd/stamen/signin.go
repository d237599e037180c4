package main

import (
	"crypto/rand"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/stamen-dev/stamen/internal/auth"
	"github.com/stamen-dev/stamen/internal/redact"
	"github.com/stamen-dev/stamen/internal/signin"
)

// signInOptions are the options of signing in through a browser (Flower's
// --auth with --auth_provider, or any OpenID Connect issuer) and through a
// proxy's identity header.
type signInOptions struct {
	auth         string
	authProvider string
	oauth2Key    string
	// oauth2Secret is Flower's --oauth2_secret or FLOWER_OAUTH2_SECRET.
	oauth2Secret      string
	oauth2SecretFlag  bool
	oauth2RedirectURI string

	oidcIssuer           string
	oidcClientID         string
	oidcClientSecretFile string
	oidcScopes           string
	oidcGroupsClaim      string
	oidcOperatorGroups   string
	oidcViewerGroups     string
	authOperators        string
	authViewers          string

	cookieSecret     string
	cookieSecretFile string
	sessionLifetime  time.Duration

	authHeader       string
	authGroupsHeader string
	trustedProxies   string
}

// registerSignIn adds the sign-in's flags to fs.
func registerSignIn(o *signInOptions, fs *flag.FlagSet, e *envParser,
	str func(p *string, name, def, usage string), hidden func(p *string, name, def, usage string),
	both func(string, func(string))) {
	str(&o.auth, "auth", envString("AUTH"), "Flower's --auth: the e-mail addresses that may sign in: an address, a|b|c, or one .* in the local part (.*@example.com)")
	str(&o.authProvider, "auth_provider", envString("AUTH_PROVIDER"),
		"sign in with: flower.views.auth.GoogleAuth2LoginHandler, GithubLoginHandler, GitLabLoginHandler or OktaLoginHandler (Flower's names; google, github, gitlab, okta too); with --oidc_issuer, any OpenID Connect provider")
	str(&o.oauth2Key, "oauth2_key", envString("OAUTH2_KEY"), "Flower's OAuth client id (as --oidc_client_id)")
	hidden(&o.oauth2Secret, "oauth2_secret", envString("OAUTH2_SECRET"), "Flower's OAuth client secret: prefer FLOWER_OAUTH2_SECRET, STAMEN_OIDC_CLIENT_SECRET or --oidc_client_secret_file, which no process listing shows")
	str(&o.oauth2RedirectURI, "oauth2_redirect_uri", envString("OAUTH2_REDIRECT_URI"),
		"the redirect URI registered with the provider: https://<host>[<url_prefix>]/login (default: built from each request's Host)")
	str(&o.oidcIssuer, "oidc_issuer", envString("OIDC_ISSUER"), "an OpenID Connect issuer URL, whose endpoints are discovered at the first sign-in")
	str(&o.oidcClientID, "oidc_client_id", envString("OIDC_CLIENT_ID"), "the OpenID Connect client id (its secret: STAMEN_OIDC_CLIENT_SECRET or --oidc_client_secret_file)")
	str(&o.oidcClientSecretFile, "oidc_client_secret_file", envString("OIDC_CLIENT_SECRET_FILE"), "a file holding the client secret")
	str(&o.oidcScopes, "oidc_scopes", envString("OIDC_SCOPES"), "the scopes asked for, comma-separated (default: the provider's; openid,email,profile for --oidc_issuer)")
	str(&o.oidcGroupsClaim, "oidc_groups_claim", orDefault(envString("OIDC_GROUPS_CLAIM"), "groups"), "the ID token claim holding the user's groups")
	str(&o.oidcOperatorGroups, "oidc_operator_groups", envString("OIDC_OPERATOR_GROUPS"), "groups whose members sign in as operators, comma-separated (GitLab: group full paths; GitHub: organisations)")
	str(&o.oidcViewerGroups, "oidc_viewer_groups", envString("OIDC_VIEWER_GROUPS"), "groups whose members sign in as viewers, comma-separated")
	str(&o.authOperators, "auth_operators", envString("AUTH_OPERATORS"), "e-mail pattern (as --auth) of the users who sign in as operators")
	str(&o.authViewers, "auth_viewers", envString("AUTH_VIEWERS"), "e-mail pattern (as --auth) of the users who sign in as viewers")
	hidden(&o.cookieSecret, "cookie_secret", envString("COOKIE_SECRET"),
		"Flower's cookie secret, which keys the session cookies (at least 16 bytes): give every replica the same; prefer the environment or --cookie_secret_file")
	str(&o.cookieSecretFile, "cookie_secret_file", envString("COOKIE_SECRET_FILE"), "a file holding the cookie secret")
	both("session_lifetime", func(n string) {
		fs.DurationVar(&o.sessionLifetime, n, e.duration("SESSION_LIFETIME", signin.DefaultLifetime), "how long a session lasts from its sign-in")
	})
	str(&o.authHeader, "auth_header", envString("AUTH_HEADER"), "take the user's e-mail from this header (X-Forwarded-Email, X-Auth-Request-Email) set by a proxy in --trusted_proxies")
	str(&o.authGroupsHeader, "auth_groups_header", envString("AUTH_GROUPS_HEADER"), "with --auth_header: the header holding the user's groups, comma-separated (X-Forwarded-Groups)")
	str(&o.trustedProxies, "trusted_proxies", envString("TRUSTED_PROXIES"), "the addresses (CIDRs) of the proxies whose --auth_header is believed, comma-separated")
}

// flowerProviders maps Flower's --auth_provider handler names, and short
// names, to providers.
var flowerProviders = map[string]string{
	"flower.views.auth.GoogleAuth2LoginHandler": signin.MethodGoogle,
	"flower.views.auth.GithubLoginHandler":      signin.MethodGitHub,
	"flower.views.auth.GitLabLoginHandler":      signin.MethodGitLab,
	"flower.views.auth.OktaLoginHandler":        signin.MethodOkta,
	signin.MethodGoogle:                         signin.MethodGoogle,
	signin.MethodGitHub:                         signin.MethodGitHub,
	signin.MethodGitLab:                         signin.MethodGitLab,
	signin.MethodOkta:                           signin.MethodOkta,
	signin.MethodOIDC:                           signin.MethodOIDC,
}

// providerTimeout bounds each call to a sign-in provider.
const providerTimeout = 10 * time.Second

func splitComma(s string) []string {
	var out []string
	for _, f := range strings.Split(s, ",") {
		if f = strings.TrimSpace(f); f != "" {
			out = append(out, f)
		}
	}
	return out
}

// rules reads who may sign in, and as what.
func (o signInOptions) rules() (signin.Rules, error) {
	var r signin.Rules
	var err error
	for _, p := range []struct {
		dst  **signin.Pattern
		v    string
		name string
	}{{&r.Allow, o.auth, "auth"}, {&r.Operators, o.authOperators, "auth_operators"}, {&r.Viewers, o.authViewers, "auth_viewers"}} {
		if *p.dst, err = signin.ParsePattern(p.v); err != nil {
			return r, fmt.Errorf("invalid --%s %q: %w", p.name, p.v, err)
		}
	}
	r.OperatorGroups, r.ViewerGroups = splitComma(o.oidcOperatorGroups), splitComma(o.oidcViewerGroups)
	return r, nil
}

// clientSecret reads the client secret: STAMEN_OIDC_CLIENT_SECRET (or
// FLOWER_OIDC_CLIENT_SECRET), the
// file, then Flower's FLOWER_OAUTH2_SECRET or --oauth2_secret.
func (o signInOptions) clientSecret() (string, error) {
	if v := envString("OIDC_CLIENT_SECRET"); v != "" {
		return v, nil
	}
	if o.oidcClientSecretFile != "" {
		b, err := os.ReadFile(o.oidcClientSecretFile)
		if err != nil {
			return "", fmt.Errorf("read --oidc_client_secret_file: %w", err)
		}
		return strings.TrimSpace(string(b)), nil
	}
	return o.oauth2Secret, nil
}

// cookieKey reads the cookie secret; with none it draws one, which ends
// the sessions at every restart and holds on this replica only.
func (o signInOptions) cookieKey(log *slog.Logger) ([]byte, error) {
	secret := o.cookieSecret
	if o.cookieSecretFile != "" {
		b, err := os.ReadFile(o.cookieSecretFile)
		if err != nil {
			return nil, fmt.Errorf("read --cookie_secret_file: %w", err)
		}
		secret = strings.TrimSpace(string(b))
	}
	if secret == "" {
		log.Warn("no --cookie_secret: sessions end when stamen restarts and hold on this replica only; give every replica the same secret")
		b := make([]byte, 32)
		_, _ = rand.Read(b)
		return b, nil
	}
	redact.Register(secret)
	if len(secret) < signin.MinSecretLen {
		return nil, fmt.Errorf("--cookie_secret: want at least %d bytes", signin.MinSecretLen)
	}
	return []byte(secret), nil
}

// provider builds the sign-in provider the options name; nil when none.
func (o signInOptions) provider(rules signin.Rules) (signin.Provider, error) {
	name := o.authProvider
	if name == "" && o.oidcIssuer != "" {
		name = signin.MethodOIDC
	}
	if name == "" {
		return nil, nil
	}
	kind, ok := flowerProviders[name]
	if !ok {
		return nil, fmt.Errorf("--auth_provider %q: stamen signs in with Flower's GoogleAuth2LoginHandler, GithubLoginHandler, GitLabLoginHandler or OktaLoginHandler, or any OpenID Connect provider (--oidc_issuer); a custom Python handler cannot run here", name)
	}
	secret, err := o.clientSecret()
	if err != nil {
		return nil, err
	}
	if secret != "" {
		redact.Register(secret)
	}
	c := signin.Client{ID: orDefault(o.oidcClientID, o.oauth2Key), Secret: secret}
	if c.ID == "" || c.Secret == "" {
		return nil, errors.New("sign-in needs the client id (--oidc_client_id, or Flower's --oauth2_key / FLOWER_OAUTH2_KEY) and its secret (STAMEN_OIDC_CLIENT_SECRET, --oidc_client_secret_file, or FLOWER_OAUTH2_SECRET)")
	}
	if o.oidcScopes != "" {
		c.Scopes = splitComma(o.oidcScopes)
	}
	hc := &http.Client{Timeout: providerTimeout}
	withGroups := len(rules.OperatorGroups) > 0 || len(rules.ViewerGroups) > 0
	switch kind {
	case signin.MethodGoogle:
		return signin.Google(c, hc), nil
	case signin.MethodGitHub:
		return &signin.GitHub{Client: c, Domain: envString("GITHUB_OAUTH_DOMAIN"), WithOrgs: withGroups, HTTP: hc}, nil
	case signin.MethodGitLab:
		level := 20
		if v := envString("GITLAB_MIN_ACCESS_LEVEL"); v != "" {
			if level, err = strconv.Atoi(v); err != nil {
				return nil, fmt.Errorf("invalid FLOWER_GITLAB_MIN_ACCESS_LEVEL %q: want a number", v)
			}
		}
		return signin.GitLab(envString("GITLAB_OAUTH_DOMAIN"), splitComma(envString("GITLAB_AUTH_ALLOWED_GROUPS")), level, withGroups, c, hc), nil
	case signin.MethodOkta:
		return signin.Okta(envString("OAUTH2_OKTA_BASE_URL"), c, hc)
	}
	if o.oidcIssuer == "" {
		return nil, errors.New("--auth_provider oidc needs --oidc_issuer")
	}
	if c.Scopes == nil {
		c.Scopes = []string{"openid", "email", "profile"}
	}
	return &signin.OIDC{Name: signin.MethodOIDC, Issuer: o.oidcIssuer, Client: c, GroupsClaim: o.oidcGroupsClaim, HTTP: hc}, nil
}

// setUp adds the sign-ins the options ask for to authn, and returns the
// handler of the sign-in's pages (nil without a provider).
func (o signInOptions) setUp(authn *auth.Authenticator, prefix string, log *slog.Logger) (http.Handler, error) {
	rules, err := o.rules()
	if err != nil {
		return nil, err
	}
	p, err := o.provider(rules)
	if err != nil {
		return nil, err
	}
	if p == nil && o.authHeader == "" {
		if o.auth != "" || rules.Operators != nil || rules.Viewers != nil {
			return nil, errors.New("--auth needs a way to sign in: --auth_provider, --oidc_issuer, or --auth_header behind a proxy")
		}
		return nil, nil
	}
	if err := rules.Check(); err != nil {
		return nil, err
	}
	if o.oauth2SecretFlag {
		log.Warn("--oauth2_secret on the command line shows in process listings: prefer FLOWER_OAUTH2_SECRET, STAMEN_OIDC_CLIENT_SECRET or --oidc_client_secret_file")
	}
	if o.authHeader != "" {
		trusted, err := signin.ParseTrusted(o.trustedProxies)
		if err != nil {
			return nil, fmt.Errorf("--trusted_proxies: %w", err)
		}
		if len(trusted) == 0 {
			return nil, errors.New("--auth_header needs --trusted_proxies: the addresses of the proxies that set it")
		}
		authn.UseProxy(&signin.Proxy{Header: o.authHeader, GroupsHeader: o.authGroupsHeader, Trusted: trusted, Rules: rules, Log: log})
	}
	if p == nil {
		return nil, nil
	}
	key, err := o.cookieKey(log)
	if err != nil {
		return nil, err
	}
	svc, err := signin.New(signin.Config{
		Provider: p, Rules: rules, Secret: key, Lifetime: o.sessionLifetime,
		Prefix: prefix, RedirectURL: o.oauth2RedirectURI, Log: log,
	})
	if err != nil {
		return nil, err
	}
	authn.UseSessions(svc)
	authn.AddPublic(signin.Paths...)
	return svc, nil
}
