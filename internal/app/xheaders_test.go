package app

import (
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/http/httptrace"
	"strings"
	"testing"

	"github.com/stamen-dev/stamen/internal/testcluster"
)

// TestXHeadersClientAddress: with XHeaders (--xheaders) the audit record
// and its log line take the client's address from X-Real-Ip, else from
// X-Forwarded-For's last entry, as Tornado does for Flower; a value that
// is not a plain IP address leaves the socket's address ("ip:port"), and
// without XHeaders the headers are ignored whatever they say.
func TestXHeadersClientAddress(t *testing.T) {
	testcluster.RequireRedis(t)
	testcluster.FlushRedisDB(t, auditDB)
	const socket = "" // want: the socket's address, the client's ip:port
	tests := []struct {
		name     string
		xheaders bool
		header   http.Header
		want     string
	}{
		{"last forwarded entry", true, http.Header{"X-Forwarded-For": {"1.2.3.4, 10.0.0.1"}}, "10.0.0.1"},
		{"one forwarded entry", true, http.Header{"X-Forwarded-For": {"198.51.100.2"}}, "198.51.100.2"},
		{"spaces around the last entry", true, http.Header{"X-Forwarded-For": {"1.2.3.4 ,  10.0.0.1"}}, "10.0.0.1"},
		// Two lines are one list: the nearest proxy's entry is the last line's last.
		{"two forwarded lines", true, http.Header{"X-Forwarded-For": {"1.2.3.4, 10.0.0.2", "10.0.0.3"}}, "10.0.0.3"},
		{"real ip wins", true, http.Header{"X-Forwarded-For": {"1.2.3.4, 10.0.0.1"}, "X-Real-Ip": {"203.0.113.7"}}, "203.0.113.7"},
		{"real ip alone", true, http.Header{"X-Real-Ip": {"203.0.113.7"}}, "203.0.113.7"},
		{"IPv6, canonical", true, http.Header{"X-Real-Ip": {"2001:DB8:0::1"}}, "2001:db8::1"},
		{"IPv4-mapped IPv6, unmapped", true, http.Header{"X-Forwarded-For": {"::ffff:192.0.2.9"}}, "192.0.2.9"},
		// Tornado reads only the last entry; an earlier valid one is the
		// client's own word, not the proxy's.
		{"last entry unknown", true, http.Header{"X-Forwarded-For": {"1.2.3.4, unknown"}}, socket},
		{"last entry with a port", true, http.Header{"X-Forwarded-For": {"1.2.3.4, 10.0.0.1:80"}}, socket},
		{"empty last entry", true, http.Header{"X-Forwarded-For": {"10.0.0.1,"}}, socket},
		{"inet_aton short form", true, http.Header{"X-Forwarded-For": {"127.1"}}, socket},
		{"zoned IPv6", true, http.Header{"X-Real-Ip": {"fe80::1%eth0"}}, socket},
		// X-Real-Ip present replaces the forwarded entry before it is
		// checked, so a bad one does not fall back to X-Forwarded-For.
		{"markup in real ip", true, http.Header{"X-Forwarded-For": {"10.0.0.1"}, "X-Real-Ip": {"<script>"}}, socket},
		{"empty real ip", true, http.Header{"X-Forwarded-For": {"10.0.0.1"}, "X-Real-Ip": {""}}, socket},
		{"two real ips", true, http.Header{"X-Real-Ip": {"203.0.113.7", "203.0.113.8"}}, socket},
		{"no headers", true, nil, socket},
		{"off: forwarded ignored", false, http.Header{"X-Forwarded-For": {"1.2.3.4, 10.0.0.1"}}, socket},
		{"off: real ip ignored", false, http.Header{"X-Forwarded-For": {"10.0.0.1"}, "X-Real-Ip": {"203.0.113.7"}}, socket},
	}
	servers := map[bool]*httptest.Server{}
	logs := map[bool]*lockedBuffer{}
	for _, on := range []bool{false, true} {
		logs[on] = &lockedBuffer{}
		a := openApp(t, Config{BrokerURL: testcluster.RedisURL(auditDB), XHeaders: on,
			Logger: slog.New(slog.NewTextHandler(logs[on], nil))})
		servers[on] = httptest.NewServer(a.Handler)
		t.Cleanup(servers[on].Close)
	}
	for i, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			srv := servers[tc.xheaders]
			path := fmt.Sprintf("/api/queues/purge/xheaders-%d", i)
			req, err := http.NewRequest("POST", srv.URL+path+"?force=true", nil)
			if err != nil {
				t.Fatal(err)
			}
			for k, v := range tc.header {
				req.Header[k] = v
			}
			// The socket's address as the server sees it: the client's end
			// of the connection the request went on.
			var local string
			req = req.WithContext(httptrace.WithClientTrace(req.Context(), &httptrace.ClientTrace{
				GotConn: func(c httptrace.GotConnInfo) { local = c.Conn.LocalAddr().String() },
			}))
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			if resp.StatusCode != http.StatusOK {
				t.Fatalf("purge: %d", resp.StatusCode)
			}
			want := tc.want
			if want == socket {
				want = local
			}

			resp, err = http.Get(srv.URL + "/api/audit?limit=1000")
			if err != nil {
				t.Fatal(err)
			}
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			var log struct {
				Records []struct{ Path, Remote string }
			}
			if err := json.Unmarshal(body, &log); err != nil {
				t.Fatalf("%v: %s", err, body)
			}
			var remotes []string
			for _, r := range log.Records {
				if r.Path == path {
					remotes = append(remotes, r.Remote)
				}
			}
			if len(remotes) != 1 || remotes[0] != want {
				t.Errorf("audit records of %s have remote %q, want [%q]", path, remotes, want)
			}

			// The record's log line shows the same address.
			var lines []string
			for _, l := range strings.Split(logs[tc.xheaders].String(), "\n") {
				if strings.Contains(l, " msg=audit ") && strings.Contains(l, " path="+path+" ") {
					lines = append(lines, l)
				}
			}
			if len(lines) != 1 || !strings.Contains(lines[0], " remote="+want+" ") {
				t.Errorf("audit log lines of %s: %q, want one with remote=%s", path, lines, want)
			}
		})
	}
}
