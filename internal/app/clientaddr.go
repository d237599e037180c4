package app

import (
	"net/http"
	"net/netip"
	"strings"
)

// clientAddr is the client's address as the audit log records it (its
// records and its log lines).
//
// Without xheaders it is the socket's, r.RemoteAddr: "ip:port", as every
// record has held. The headers are then ignored entirely, since a client
// sends whatever X-Forwarded-For it likes.
//
// With xheaders (Flower's --xheaders, for stamen behind a proxy that sets
// the headers) it is what Tornado's remote_ip becomes: the last entry of
// X-Forwarded-For, the one the nearest proxy added (the entries before it
// are whatever the client sent, and are not read), then X-Real-Ip instead
// if the request has one, even one that is not an address, as in Tornado.
// That value is used only if it is an IP address; otherwise the socket's
// address stays. It is recorded without a port: the headers carry none,
// and joining the socket's port to it would show the port of the proxy's
// connection as the client's. So a record's remote is "ip:port" when it is
// the socket's and "ip" when a proxy named it, which tells them apart.
//
// The headers are bounded by the server's MaxHeaderBytes; the last entry
// is found without splitting, so a long X-Forwarded-For costs no
// allocation per entry.
func clientAddr(r *http.Request, xheaders bool) string {
	if !xheaders {
		return r.RemoteAddr
	}
	var ip string
	found := false
	// Several X-Forwarded-For lines are one list (RFC 9110 5.3), as
	// Tornado joins them: the last entry is the last line's.
	if v := r.Header["X-Forwarded-For"]; len(v) > 0 {
		last := v[len(v)-1]
		ip, found = strings.TrimSpace(last[strings.LastIndexByte(last, ',')+1:]), true
	}
	if v := r.Header["X-Real-Ip"]; len(v) == 1 {
		ip, found = v[0], true
	} else if len(v) > 1 {
		// Tornado joins them with commas, which is no address: which one
		// the proxy set cannot be told, so none is believed.
		return r.RemoteAddr
	}
	if !found {
		return r.RemoteAddr
	}
	// netip takes only plain IPv4 and IPv6 text: not "1.2.3.4:80" (Tornado
	// refuses it too), nor inet_aton's "127.1", "unknown" or markup.
	addr, err := netip.ParseAddr(ip)
	if err != nil || addr.Zone() != "" {
		// A zone (fe80::1%eth0), which Tornado would keep, names an
		// interface of the proxy's host, and is free text.
		return r.RemoteAddr
	}
	// Unmapped, an IPv4 client reads the same whether the proxy wrote it
	// as ::ffff:1.2.3.4 or 1.2.3.4, and as Go writes a socket's address.
	return addr.Unmap().String()
}
