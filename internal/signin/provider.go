package signin

import (
	"context"
	"crypto/subtle"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"

	"github.com/coreos/go-oidc/v3/oidc"
	"golang.org/x/oauth2"
)

// The methods of the providers: how a session's holder signed in, as the
// audit log records it.
const (
	MethodOIDC   = "oidc"
	MethodGoogle = "google"
	MethodGitHub = "github"
	MethodGitLab = "gitlab"
	MethodOkta   = "okta"
)

// person is who a provider says signed in.
type person struct {
	// Emails are the verified addresses, the preferred first.
	Emails  []string
	Subject string
	Groups  []string
}

// errDenied is a provider's own refusal (GitLab's allowed groups).
var errDenied = errors.New("access denied by the provider's rules")

// Provider is a way to sign in: an OpenID Connect issuer, or GitHub's
// OAuth 2.
type Provider interface {
	// Method names the provider in sessions and the audit log.
	Method() string
	// config is the OAuth 2 client without its redirect URL; an OpenID
	// Connect issuer's endpoints are discovered on first use.
	config(ctx context.Context) (*oauth2.Config, error)
	// usesNonce tells whether the ID token carries the nonce.
	usesNonce() bool
	// person verifies what the token endpoint answered and says who it is.
	person(ctx context.Context, tok *oauth2.Token, nonce string) (person, error)
}

// Client is what a provider needs to know of stamen's registration.
type Client struct {
	ID, Secret string
	// Scopes replace the provider's default scopes when set.
	Scopes []string
}

// OIDC is an OpenID Connect provider: found by discovery at Issuer, or
// given by its endpoints (Endpoints), as the well-known providers are, so
// that stamen starts without reaching them.
type OIDC struct {
	Name   string
	Issuer string
	// Endpoints, when set, are used instead of discovery.
	Endpoints *oidc.ProviderConfig
	Client    Client
	// GroupsClaim is the ID token claim holding the groups (default
	// "groups").
	GroupsClaim string
	// groups, when set, reads the person's groups from the provider's API
	// instead of a claim (GitLab), and may refuse them.
	groups func(ctx context.Context, hc *http.Client, tok *oauth2.Token) ([]string, error)
	// HTTP makes every call to the provider: discovery, keys, tokens.
	HTTP *http.Client

	mu       sync.Mutex
	provider *oidc.Provider
}

// Method implements Provider.
func (o *OIDC) Method() string { return o.Name }

func (o *OIDC) usesNonce() bool { return true }

// discover returns the provider, discovered once (a failure is tried again
// on the next sign-in, so that stamen starts while the issuer is down).
func (o *OIDC) discover(ctx context.Context) (*oidc.Provider, error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.provider != nil {
		return o.provider, nil
	}
	// The keys are fetched later, with this context's client and without
	// its deadline.
	keysCtx := oidc.ClientContext(context.Background(), o.HTTP)
	if o.Endpoints != nil {
		o.provider = o.Endpoints.NewProvider(keysCtx)
		return o.provider, nil
	}
	p, err := oidc.NewProvider(oidc.ClientContext(ctx, o.HTTP), o.Issuer)
	if err != nil {
		return nil, fmt.Errorf("discover the OpenID Connect issuer: %w", err)
	}
	// NewProvider's key set keeps its context for later fetches: rebuild
	// it from the discovered endpoints with one that outlives this call.
	var cfg oidc.ProviderConfig
	if err := p.Claims(&cfg); err != nil {
		return nil, fmt.Errorf("read the issuer's discovery document: %w", err)
	}
	o.provider = cfg.NewProvider(keysCtx)
	return o.provider, nil
}

func (o *OIDC) config(ctx context.Context) (*oauth2.Config, error) {
	p, err := o.discover(ctx)
	if err != nil {
		return nil, err
	}
	return &oauth2.Config{
		ClientID: o.Client.ID, ClientSecret: o.Client.Secret,
		Endpoint: p.Endpoint(), Scopes: o.Client.Scopes,
	}, nil
}

// idClaims are the ID token's claims stamen reads.
type idClaims struct {
	Email         string          `json:"email"`
	EmailVerified json.RawMessage `json:"email_verified"`
}

func (o *OIDC) person(ctx context.Context, tok *oauth2.Token, nonce string) (person, error) {
	p, err := o.discover(ctx)
	if err != nil {
		return person{}, err
	}
	raw, _ := tok.Extra("id_token").(string)
	if raw == "" {
		return person{}, errors.New("the provider answered no ID token")
	}
	// Signature (the issuer's published keys), issuer, audience (our
	// client id) and expiry.
	idt, err := p.VerifierContext(oidc.ClientContext(ctx, o.HTTP), &oidc.Config{ClientID: o.Client.ID}).Verify(ctx, raw)
	if err != nil {
		return person{}, fmt.Errorf("ID token refused: %w", err)
	}
	if subtle.ConstantTimeCompare([]byte(idt.Nonce), []byte(nonce)) != 1 {
		return person{}, errors.New("ID token refused: its nonce is not this sign-in's")
	}
	var c idClaims
	if err := idt.Claims(&c); err != nil {
		return person{}, fmt.Errorf("read the ID token's claims: %w", err)
	}
	email, verified := c.Email, verifiedClaim(c.EmailVerified)
	if email == "" && p.UserInfoEndpoint() != "" {
		ui, err := p.UserInfo(oidc.ClientContext(ctx, o.HTTP), oauth2.StaticTokenSource(tok))
		if err != nil {
			return person{}, fmt.Errorf("read the user's profile: %w", err)
		}
		if ui.Subject != idt.Subject {
			return person{}, errors.New("the profile is not the ID token's subject")
		}
		email, verified = ui.Email, ui.EmailVerified || verifiedUnsaid(ui)
	}
	out := person{Subject: idt.Subject}
	if email != "" && verified {
		out.Emails = []string{email}
	}
	if o.groups != nil {
		out.Groups, err = o.groups(ctx, o.HTTP, tok)
		if err != nil {
			return person{}, err
		}
	} else {
		var all map[string]json.RawMessage
		if idt.Claims(&all) == nil {
			out.Groups = stringList(all[orDefault(o.GroupsClaim, "groups")])
		}
	}
	return out, nil
}

// verifiedClaim reads email_verified: absent counts as verified (a
// provider that does not say vouches for the address it gives), true or
// "true" as verified, anything else not.
func verifiedClaim(raw json.RawMessage) bool {
	if len(raw) == 0 || string(raw) == "null" {
		return true
	}
	var b bool
	if json.Unmarshal(raw, &b) == nil {
		return b
	}
	var s string
	if json.Unmarshal(raw, &s) == nil {
		v, err := strconv.ParseBool(s)
		return err == nil && v
	}
	return false
}

// verifiedUnsaid tells a profile that does not say whether its address is
// verified.
func verifiedUnsaid(ui *oidc.UserInfo) bool {
	var c idClaims
	return ui.Claims(&c) == nil && len(c.EmailVerified) == 0
}

// stringList reads a claim holding a list of strings, or one string.
func stringList(raw json.RawMessage) []string {
	var list []string
	if json.Unmarshal(raw, &list) == nil {
		return list
	}
	var one string
	if json.Unmarshal(raw, &one) == nil && one != "" {
		return []string{one}
	}
	return nil
}

func orDefault(v, def string) string {
	if v == "" {
		return def
	}
	return v
}

// Google is Google's OpenID Connect provider, by its published endpoints.
func Google(c Client, hc *http.Client) *OIDC {
	if c.Scopes == nil {
		c.Scopes = []string{oidc.ScopeOpenID, "email", "profile"}
	}
	return &OIDC{Name: MethodGoogle, Client: c, HTTP: hc, Endpoints: &oidc.ProviderConfig{
		IssuerURL:   "https://accounts.google.com",
		AuthURL:     "https://accounts.google.com/o/oauth2/v2/auth",
		TokenURL:    "https://oauth2.googleapis.com/token",
		UserInfoURL: "https://openidconnect.googleapis.com/v1/userinfo",
		JWKSURL:     "https://www.googleapis.com/oauth2/v3/certs",
	}}
}

// Okta is an Okta authorization server at baseURL, Flower's
// FLOWER_OAUTH2_OKTA_BASE_URL: https://<org>.okta.com/oauth2/<server id>
// (a custom server, whose issuer it is) or https://<org>.okta.com/oauth2
// (the org's own, whose issuer is the org's URL).
func Okta(baseURL string, c Client, hc *http.Client) (*OIDC, error) {
	u, err := url.Parse(strings.TrimRight(baseURL, "/"))
	if err != nil || u.Scheme != "https" || u.Host == "" {
		return nil, errors.New("FLOWER_OAUTH2_OKTA_BASE_URL: want https://<org>.okta.com/oauth2/<server id>")
	}
	base := u.String()
	issuer := base
	if strings.HasSuffix(u.Path, "/oauth2") {
		issuer = u.Scheme + "://" + u.Host
	}
	if c.Scopes == nil {
		c.Scopes = []string{oidc.ScopeOpenID, "email"}
	}
	return &OIDC{Name: MethodOkta, Client: c, HTTP: hc, Endpoints: &oidc.ProviderConfig{
		IssuerURL:   issuer,
		AuthURL:     base + "/v1/authorize",
		TokenURL:    base + "/v1/token",
		UserInfoURL: base + "/v1/userinfo",
		JWKSURL:     base + "/v1/keys",
	}}, nil
}

// GitLab is GitLab's OpenID Connect provider on domain (Flower's
// FLOWER_GITLAB_OAUTH_DOMAIN, gitlab.com by default). With allowedGroups
// (FLOWER_GITLAB_AUTH_ALLOWED_GROUPS, full paths) only members of one of
// them with at least minAccess (FLOWER_GITLAB_MIN_ACCESS_LEVEL) sign in;
// with allowedGroups or withGroups the person's groups, by full path, are
// read from GitLab's API for the role rules, which needs the read_api
// scope.
func GitLab(domain string, allowedGroups []string, minAccess int, withGroups bool, c Client, hc *http.Client) *OIDC {
	base := "https://" + orDefault(domain, "gitlab.com")
	o := &OIDC{Name: MethodGitLab, Client: c, HTTP: hc, Endpoints: &oidc.ProviderConfig{
		IssuerURL:   base,
		AuthURL:     base + "/oauth/authorize",
		TokenURL:    base + "/oauth/token",
		UserInfoURL: base + "/oauth/userinfo",
		JWKSURL:     base + "/oauth/discovery/keys",
	}}
	needAPI := len(allowedGroups) > 0 || withGroups
	if o.Client.Scopes == nil {
		o.Client.Scopes = []string{oidc.ScopeOpenID, "email"}
		if needAPI {
			o.Client.Scopes = append(o.Client.Scopes, "read_api")
		}
	}
	if needAPI {
		o.groups = func(ctx context.Context, hc *http.Client, tok *oauth2.Token) ([]string, error) {
			var groups []struct {
				FullPath string `json:"full_path"`
			}
			u := base + "/api/v4/groups?per_page=100&min_access_level=" + strconv.Itoa(minAccess)
			if err := getJSON(ctx, hc, u, "Bearer "+tok.AccessToken, &groups); err != nil {
				return nil, fmt.Errorf("read the user's GitLab groups: %w", err)
			}
			var out []string
			for _, g := range groups {
				out = append(out, g.FullPath)
			}
			if len(allowedGroups) > 0 && !anyIn(out, allowedGroups) {
				return nil, errDenied
			}
			return out, nil
		}
	}
	return o
}

// GitHub signs in with GitHub's OAuth 2 (GitHub has no OpenID Connect for
// people): the person is their verified addresses, read from GitHub's API
// with the user:email scope, and, when a group rule is configured, the
// organisations they belong to (read:org), by login, as groups.
type GitHub struct {
	Client Client
	// Domain is github.com or a GitHub Enterprise host (Flower's
	// FLOWER_GITHUB_OAUTH_DOMAIN).
	Domain string
	// WithOrgs reads the organisations.
	WithOrgs bool
	HTTP     *http.Client
	// WebURL and APIURL override the sign-in's and the API's base URLs
	// (tests).
	WebURL, APIURL string
}

// Method implements Provider.
func (g *GitHub) Method() string { return MethodGitHub }

func (g *GitHub) usesNonce() bool { return false }

func (g *GitHub) domain() string { return orDefault(g.Domain, "github.com") }

func (g *GitHub) api() string {
	switch {
	case g.APIURL != "":
		return strings.TrimRight(g.APIURL, "/")
	case g.domain() == "github.com":
		return "https://api.github.com"
	}
	return "https://" + g.domain() + "/api/v3"
}

func (g *GitHub) web() string {
	if g.WebURL != "" {
		return strings.TrimRight(g.WebURL, "/")
	}
	return "https://" + g.domain()
}

func (g *GitHub) config(context.Context) (*oauth2.Config, error) {
	scopes := g.Client.Scopes
	if scopes == nil {
		scopes = []string{"user:email"}
		if g.WithOrgs {
			scopes = append(scopes, "read:org")
		}
	}
	return &oauth2.Config{
		ClientID: g.Client.ID, ClientSecret: g.Client.Secret, Scopes: scopes,
		Endpoint: oauth2.Endpoint{
			AuthURL:   g.web() + "/login/oauth/authorize",
			TokenURL:  g.web() + "/login/oauth/access_token",
			AuthStyle: oauth2.AuthStyleInParams,
		},
	}, nil
}

func (g *GitHub) person(ctx context.Context, tok *oauth2.Token, _ string) (person, error) {
	auth := "Bearer " + tok.AccessToken
	var user struct {
		ID int64 `json:"id"`
	}
	if err := getJSON(ctx, g.HTTP, g.api()+"/user", auth, &user); err != nil {
		return person{}, fmt.Errorf("read the GitHub user: %w", err)
	}
	var emails []struct {
		Email    string `json:"email"`
		Verified bool   `json:"verified"`
		Primary  bool   `json:"primary"`
	}
	if err := getJSON(ctx, g.HTTP, g.api()+"/user/emails", auth, &emails); err != nil {
		return person{}, fmt.Errorf("read the GitHub user's addresses (the app needs the user:email scope): %w", err)
	}
	out := person{Subject: "github:" + strconv.FormatInt(user.ID, 10)}
	for _, e := range emails {
		if !e.Verified {
			continue
		}
		if e.Primary {
			out.Emails = slices.Insert(out.Emails, 0, e.Email)
		} else {
			out.Emails = append(out.Emails, e.Email)
		}
	}
	if g.WithOrgs {
		var orgs []struct {
			Login string `json:"login"`
		}
		if err := getJSON(ctx, g.HTTP, g.api()+"/user/orgs?per_page=100", auth, &orgs); err != nil {
			return person{}, fmt.Errorf("read the GitHub user's organisations (the app needs the read:org scope): %w", err)
		}
		for _, o := range orgs {
			out.Groups = append(out.Groups, o.Login)
		}
	}
	return out, nil
}

// maxAPIBody bounds what a provider's API answer may be.
const maxAPIBody = 1 << 20

func getJSON(ctx context.Context, hc *http.Client, u, authorization string, v any) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return err
	}
	req.Header.Set("Authorization", authorization)
	req.Header.Set("Accept", "application/json")
	resp, err := hc.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, maxAPIBody))
	if err != nil {
		return err
	}
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("%s answered %s", req.URL.Host, resp.Status)
	}
	return json.Unmarshal(body, v)
}
