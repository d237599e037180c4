package signin

import (
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"strings"
	"sync"
	"time"
	"unicode"

	"github.com/stamen-dev/stamen/internal/auth"
)

// MethodProxy is how a caller named by a proxy's identity header signed in.
const MethodProxy = "proxy"

// Proxy takes the caller's identity from a header a proxy in front of
// stamen sets (oauth2-proxy's X-Forwarded-Email or X-Auth-Request-Email),
// only on connections from the proxy's addresses: anyone else could send
// the header. From another address the header is ignored, and logged at
// most once a minute.
type Proxy struct {
	// Header carries the e-mail address (or user name); GroupsHeader, when
	// set, the groups, comma-separated.
	Header, GroupsHeader string
	Trusted              []netip.Prefix
	Rules                Rules
	Log                  *slog.Logger

	mu     sync.Mutex
	warned time.Time
}

// maxIdentity bounds the identity a header may carry (an address is at
// most 254 bytes); maxGroups the groups read from it.
const (
	maxIdentity = 320
	maxGroups   = 64
)

// ParseTrusted reads comma-separated CIDRs or addresses.
func ParseTrusted(s string) ([]netip.Prefix, error) {
	var out []netip.Prefix
	for _, f := range strings.Split(s, ",") {
		f = strings.TrimSpace(f)
		if f == "" {
			continue
		}
		if !strings.Contains(f, "/") {
			a, err := netip.ParseAddr(f)
			if err != nil {
				return nil, err
			}
			out = append(out, netip.PrefixFrom(a.Unmap(), a.Unmap().BitLen()))
			continue
		}
		p, err := netip.ParsePrefix(f)
		if err != nil {
			return nil, err
		}
		out = append(out, p.Masked())
	}
	return out, nil
}

// Identify implements auth.SignIn.
func (p *Proxy) Identify(r *http.Request) (auth.Principal, bool) {
	values := r.Header.Values(p.Header)
	if len(values) == 0 {
		return auth.Principal{}, false
	}
	if !p.trusted(r.RemoteAddr) {
		p.warn(r.RemoteAddr)
		return auth.Principal{}, false
	}
	if len(values) != 1 {
		return auth.Principal{}, false
	}
	user := strings.TrimSpace(values[0])
	if user == "" || len(user) > maxIdentity || strings.ContainsFunc(user, unicode.IsControl) {
		return auth.Principal{}, false
	}
	var groups []string
	if p.GroupsHeader != "" {
		for _, v := range r.Header.Values(p.GroupsHeader) {
			for _, g := range strings.Split(v, ",") {
				if g = strings.TrimSpace(g); g != "" && len(groups) < maxGroups {
					groups = append(groups, g)
				}
			}
		}
	}
	return auth.Principal{Name: user, Role: p.Rules.Role(user, groups), Method: MethodProxy}, true
}

func (p *Proxy) trusted(remote string) bool {
	host, _, err := net.SplitHostPort(remote)
	if err != nil {
		host = remote
	}
	a, err := netip.ParseAddr(host)
	if err != nil {
		// A unix socket's peer has no address: no proxy is trusted there
		// unless it is named by address.
		return false
	}
	a = a.Unmap()
	for _, pre := range p.Trusted {
		if pre.Contains(a) {
			return true
		}
	}
	return false
}

// warnEvery bounds the log lines about untrusted identity headers: a
// client sending them on every request must not flood the log.
const warnEvery = time.Minute

func (p *Proxy) warn(remote string) {
	if p.Log == nil {
		return
	}
	p.mu.Lock()
	now := time.Now()
	if now.Sub(p.warned) < warnEvery {
		p.mu.Unlock()
		return
	}
	p.warned = now
	p.mu.Unlock()
	p.Log.Warn("identity header ignored: the client is not a trusted proxy (--trusted_proxies); more are not logged for a minute",
		slog.String("header", p.Header), slog.String("remote", remote))
}
