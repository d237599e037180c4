package crossorigin

import (
	"fmt"
	"net"
	"net/netip"
	"net/url"
	"strconv"
	"strings"
)

// ParseOrigins reads a comma-separated list of origins
// (scheme://host[:port], as a browser's Origin header writes them) into
// the form a browser sends, so that an exact comparison matches: scheme
// and host in lower case, a scheme's default port left out, a lone
// trailing slash dropped. Anything that no browser would send as an
// Origin is refused, rather than kept as an entry that never matches: a
// path, a query, user information, a wildcard, a scheme other than http
// and https, a host not written in ASCII.
func ParseOrigins(list string) ([]string, error) {
	var out []string
	seen := map[string]bool{}
	for _, raw := range strings.Split(list, ",") {
		raw = strings.TrimSpace(raw)
		if raw == "" {
			continue
		}
		o, err := parseOrigin(raw)
		if err != nil {
			return nil, fmt.Errorf("invalid origin %q: %w", raw, err)
		}
		if !seen[o] {
			seen[o] = true
			out = append(out, o)
		}
	}
	return out, nil
}

func parseOrigin(raw string) (string, error) {
	if strings.Contains(raw, "*") {
		return "", fmt.Errorf("wildcards are not supported: list each origin")
	}
	u, err := url.Parse(raw)
	if err != nil {
		return "", err
	}
	scheme := strings.ToLower(u.Scheme)
	if scheme != "http" && scheme != "https" {
		return "", fmt.Errorf("want http://host[:port] or https://host[:port]")
	}
	if u.Opaque != "" || u.Host == "" {
		return "", fmt.Errorf("no host: want %s://host[:port]", scheme)
	}
	if u.User != nil {
		return "", fmt.Errorf("user information is never part of an origin")
	}
	if (u.Path != "" && u.Path != "/") || u.RawQuery != "" || u.ForceQuery || u.Fragment != "" {
		return "", fmt.Errorf("an origin has no path, query or fragment: want %s://host[:port]", scheme)
	}
	host, port := u.Hostname(), u.Port()
	if !isASCII(host) {
		return "", fmt.Errorf("write the host name in its ASCII (punycode) form, as browsers send it")
	}
	host = strings.ToLower(host)
	if port != "" {
		n, err := strconv.Atoi(port)
		if err != nil || n < 1 || n > 65535 {
			return "", fmt.Errorf("port %q: want 1 to 65535", port)
		}
		if (scheme == "http" && n == 80) || (scheme == "https" && n == 443) {
			port = "" // browsers leave the default port out
		} else {
			port = strconv.Itoa(n)
		}
	}
	hostport := host
	if strings.Contains(host, ":") {
		hostport = "[" + host + "]"
	}
	if port != "" {
		hostport = net.JoinHostPort(host, port)
	}
	return scheme + "://" + hostport, nil
}

// ParseHosts reads a comma-separated list of host names (or addresses)
// that requests may name in their Host header, in lower case and without
// a trailing dot. A port is refused rather than ignored: every port is
// accepted, and a list that seems to say otherwise would mislead.
func ParseHosts(list string) ([]string, error) {
	var out []string
	seen := map[string]bool{}
	for _, raw := range strings.Split(list, ",") {
		raw = strings.TrimSpace(raw)
		if raw == "" {
			continue
		}
		h, err := parseHost(raw)
		if err != nil {
			return nil, fmt.Errorf("invalid host %q: %w", raw, err)
		}
		if !seen[h] {
			seen[h] = true
			out = append(out, h)
		}
	}
	return out, nil
}

func parseHost(raw string) (string, error) {
	if strings.Contains(raw, "://") || strings.Contains(raw, "/") {
		return "", fmt.Errorf("want a host name, such as stamen.example.com, not a URL")
	}
	if strings.Contains(raw, "*") {
		return "", fmt.Errorf("wildcards are not supported: list each name")
	}
	h := strings.TrimSuffix(strings.ToLower(raw), ".")
	if a, err := netip.ParseAddr(strings.Trim(h, "[]")); err == nil {
		return a.String(), nil
	}
	if strings.Contains(h, ":") {
		return "", fmt.Errorf("give the name without a port: every port is accepted")
	}
	if h == "" || len(h) > 253 {
		return "", fmt.Errorf("want a host name of 1 to 253 characters")
	}
	for _, label := range strings.Split(h, ".") {
		if label == "" || len(label) > 63 {
			return "", fmt.Errorf("want dot-separated labels of 1 to 63 characters")
		}
		for _, c := range label {
			if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '-' || c == '_') {
				return "", fmt.Errorf("%q: a host name holds letters, digits, '-', '_' and dots (an internationalised name in its punycode form)", c)
			}
		}
	}
	return h, nil
}

func isASCII(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] >= 0x80 {
			return false
		}
	}
	return true
}
