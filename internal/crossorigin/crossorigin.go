// Package crossorigin keeps the web pages an operator's browser visits
// from using stamen through that browser. A browser is a client of every
// server it can reach, loopback included, and any site may make it send
// requests:
//
//   - a form or fetch() of another site's page sends write calls (cross-site
//     request forgery), with the credentials the browser has cached for
//     stamen. CheckWrites refuses every write call a browser marks as sent
//     from a page of another origin, with net/http's CrossOriginProtection.
//   - a page whose host name the attacker makes resolve to 127.0.0.1 (DNS
//     rebinding) is, to the browser, of the same origin as the server it
//     reaches there, and reads all it answers. CheckHost answers only
//     requests whose Host names this server.
//
// CORS lets the pages of the origins an operator lists (a dashboard served
// elsewhere) call the API all the same. Clients that are not browsers send
// neither Origin nor Sec-Fetch-Site, and are not affected.
package crossorigin

import (
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"strings"
	"time"
)

// The reasons a request is refused for, which label the refusal metric:
// a fixed set, whatever the requests hold.
const (
	// ReasonCrossSite: the browser said, in Sec-Fetch-Site, that another
	// site's page, or another origin's of the same site, sent the call.
	ReasonCrossSite = "cross_site"
	// ReasonOrigin: no Sec-Fetch-Site (an old browser, or a page served
	// over plain HTTP by a name that is not loopback, where browsers do
	// not send it), and an Origin that is not the request's Host.
	ReasonOrigin = "origin"
	// ReasonHost: the Host header names another server (DNS rebinding).
	ReasonHost = "host"
)

// Reasons are all the reasons, for metrics that show every one from the
// start.
var Reasons = []string{ReasonCrossSite, ReasonOrigin, ReasonHost}

// Deny writes a refusal: status and a message saying why. It is the
// caller's, which answers in its own format and records what it records.
type Deny func(w http.ResponseWriter, r *http.Request, status int, msg string)

// Config says whom the guard lets through.
type Config struct {
	// AllowedOrigins are the origins (ParseOrigins' form) whose pages may
	// call the API: their write calls are let through, and they get CORS
	// answers, preflights included.
	AllowedOrigins []string
	// CheckHost turns the Host check on: only requests whose Host is
	// localhost, an IP address or one of AllowedHosts are answered.
	CheckHost bool
	// AllowedHosts are ParseHosts' names.
	AllowedHosts []string
	// Log gets one line per reason and origin (or Host) a minute at most
	// (nil: none).
	Log *slog.Logger
	// Count is called on every refusal (nil: nothing counted).
	Count func(reason string)
}

// Guard holds the checks of one server.
type Guard struct {
	origins   map[string]bool
	checkHost bool
	hosts     map[string]bool
	log       *slog.Logger
	count     func(string)
	throttle  *throttle
	cop       *http.CrossOriginProtection
}

// maxLogged bounds the origins whose refusals are logged apart in a
// minute; the refusals from further ones share one line a minute.
const maxLogged = 256

// New builds the guard. The origins are those ParseOrigins returns;
// others are refused here too.
func New(cfg Config) (*Guard, error) {
	g := &Guard{
		origins:   map[string]bool{},
		checkHost: cfg.CheckHost,
		hosts:     map[string]bool{},
		log:       cfg.Log,
		count:     cfg.Count,
		throttle:  newThrottle(time.Minute, maxLogged),
		cop:       http.NewCrossOriginProtection(),
	}
	for _, o := range cfg.AllowedOrigins {
		norm, err := parseOrigin(o)
		if err != nil || norm != o {
			return nil, fmt.Errorf("allowed origin %q: not in the form ParseOrigins returns", o)
		}
		if err := g.cop.AddTrustedOrigin(o); err != nil {
			return nil, err
		}
		g.origins[o] = true
	}
	for _, h := range cfg.AllowedHosts {
		g.hosts[h] = true
	}
	return g, nil
}

// CheckWrites refuses, with 403, the write calls (every method but GET,
// HEAD and OPTIONS) a browser sent from a page of another origin than the
// server's, unless that origin is allowed.
//
// net/http's CrossOriginProtection decides, and its defaults are what
// stamen needs on three counts: it refuses Sec-Fetch-Site: same-site as
// well as cross-site (127.0.0.1:8080 and 127.0.0.1:5555 are the same site,
// and any local web server's page would otherwise be trusted); it falls
// back on comparing Origin with Host when Sec-Fetch-Site is missing; and
// it lets through a request with neither header, which is what curl, the
// generated clients and Celery's tooling send. Where it differs from what
// stamen needs:
//   - its refusal is a text/plain 403 that does not say which check
//     failed, and its deny handler is not told either. Check is called
//     instead, whose error says, so that the answer is stamen's JSON error
//     naming the reason, and the refusal is counted and logged by it.
//   - a trusted origin passes the check, but the browser still keeps its
//     page from reading the answer, or from sending anything but a simple
//     request: CrossOriginProtection answers no CORS. CORS does.
//   - it trusts an Origin only as exactly written; ParseOrigins writes the
//     allowed origins as browsers send them.
//   - it knows nothing of DNS rebinding, where the page is of the same
//     origin as far as the browser knows: CheckHost is that check.
//   - GET, HEAD and OPTIONS always pass: stamen's write operations are all
//     POSTs (auth.IsWrite is the same rule), and a read from another origin
//     is sent but the browser does not let the page see the answer.
func (g *Guard) CheckWrites(deny Deny, next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		err := g.cop.Check(r)
		if err == nil {
			next.ServeHTTP(w, r)
			return
		}
		origin := r.Header.Get("Origin")
		var reason, msg string
		if site := r.Header.Get("Sec-Fetch-Site"); site != "" {
			reason = ReasonCrossSite
			msg = fmt.Sprintf("cross-origin request refused: the browser sent it from a page of another origin (Sec-Fetch-Site: %s, Origin: %s)",
				quote(site), quote(origin))
		} else {
			reason = ReasonOrigin
			msg = fmt.Sprintf("cross-origin request refused: its Origin %s is not this server's (Host %s)", quote(origin), quote(r.Host))
		}
		msg += "; write calls are taken from stamen's own pages, clients that are not browsers, and the origins in --allowed_origins"
		g.refused(r, reason, origin)
		deny(w, r, http.StatusForbidden, msg)
	})
}

// CheckHost answers 421 Misdirected Request to a request whose Host
// header does not name this server, when the check is on.
//
// The Host the connection carried is what is checked, never
// X-Forwarded-Host, even with --xheaders: a page on a rebinding name sets
// headers as it likes on its own requests. A proxy in front passes the
// check when it sends its upstream's address as Host (nginx's default), or
// a name listed in AllowedHosts.
//
// Every IP address passes, loopback or not: DNS rebinding works through a
// name the attacker controls, and a browser sends an address as Host only
// to the server at that address, from a page it loaded by that address.
// An empty Host (HTTP/1.0 without one) passes too: no browser sends it.
func (g *Guard) CheckHost(deny Deny, next http.Handler) http.Handler {
	if !g.checkHost {
		return next
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if g.hostAllowed(r.Host) {
			next.ServeHTTP(w, r)
			return
		}
		g.refused(r, ReasonHost, r.Host)
		deny(w, r, http.StatusMisdirectedRequest, fmt.Sprintf(
			"the Host %s is not a name of this server: stamen answers to localhost, IP addresses and the names in --allowed_hosts only, "+
				"so that a web page cannot reach it by a name of its own (DNS rebinding)", quote(r.Host)))
	})
}

// hostAllowed tells whether a Host header (host, or host:port) names
// this server.
func (g *Guard) hostAllowed(hostport string) bool {
	host := hostport
	if h, _, err := net.SplitHostPort(hostport); err == nil {
		host = h
	}
	host = strings.TrimSuffix(strings.ToLower(host), ".")
	if host == "" || host == "localhost" {
		return true
	}
	if _, err := netip.ParseAddr(strings.TrimSuffix(strings.TrimPrefix(host, "["), "]")); err == nil {
		return true
	}
	return g.hosts[host]
}

// corsMaxAge is how long a browser may keep a preflight's answer, in
// seconds.
const corsMaxAge = "600"

// CORS answers the CORS requests of the allowed origins' pages: their
// preflights (OPTIONS with Access-Control-Request-Method) at once, with
// 204, and their other requests with the headers that let the page read
// the answer. Credentials are allowed (basic credentials the browser
// cached, a session cookie), since the operator named the origin. Any
// other origin gets no CORS header at all, and its preflight goes on to
// the API, which refuses it. Without allowed origins it does nothing.
//
// It runs before authentication: a browser sends a preflight without
// credentials.
func (g *Guard) CORS(next http.Handler) http.Handler {
	if len(g.origins) == 0 {
		return next
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h := w.Header()
		// The answer depends on the Origin, whatever it is: a cache must
		// not give one origin's answer to another.
		h.Add("Vary", "Origin")
		origin := r.Header.Get("Origin")
		if !g.origins[origin] {
			next.ServeHTTP(w, r)
			return
		}
		h.Set("Access-Control-Allow-Origin", origin)
		h.Set("Access-Control-Allow-Credentials", "true")
		if r.Method == http.MethodOptions && r.Header.Get("Access-Control-Request-Method") != "" {
			h.Set("Access-Control-Allow-Methods", "GET, HEAD, POST")
			h.Set("Access-Control-Allow-Headers", "Authorization, Content-Type, Last-Event-ID")
			// Chromium asks before a public page reaches a private or
			// loopback address (Private Network Access).
			if r.Header.Get("Access-Control-Request-Private-Network") == "true" {
				h.Set("Access-Control-Allow-Private-Network", "true")
			}
			h.Set("Access-Control-Max-Age", corsMaxAge)
			w.WriteHeader(http.StatusNoContent)
			return
		}
		h.Set("Access-Control-Expose-Headers", "Retry-After, WWW-Authenticate, X-Stamen-Timed-Out")
		next.ServeHTTP(w, r)
	})
}

// maxShown bounds what a refusal quotes of a header.
const maxShown = 200

// quote is a header's value as a refusal quotes it: Go-quoted, cut.
func quote(s string) string {
	if len(s) > maxShown {
		s = strings.ToValidUTF8(s[:maxShown], "") + "..."
	}
	return fmt.Sprintf("%q", s)
}

// refused counts a refusal and logs it, once a minute at most for its
// reason and from (the Origin, or the Host).
func (g *Guard) refused(r *http.Request, reason, from string) {
	if g.count != nil {
		g.count(reason)
	}
	if g.log == nil {
		return
	}
	if len(from) > maxShown {
		from = strings.ToValidUTF8(from[:maxShown], "") + "..."
	}
	ok, skipped, other := g.throttle.allow(reason + " " + from)
	if !ok {
		return
	}
	attrs := []any{slog.String("reason", reason), slog.String("method", r.Method), slog.String("path", r.URL.Path)}
	if other {
		attrs = append(attrs, slog.String("from", fmt.Sprintf("(one of more than %d origins or hosts refused this minute; one line a minute for them all)", maxLogged)))
	} else {
		attrs = append(attrs, slog.String("from", from))
	}
	if skipped > 0 {
		attrs = append(attrs, slog.Int("not_logged_since", skipped))
	}
	g.log.Warn("refused a request of another origin, or for a Host that is not this server (one line a minute per origin or Host)", attrs...)
}
