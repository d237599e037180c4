package main

import (
	"encoding/json"
	"io"
	"net"
	"net/http"
	"os"
	"testing"

	"github.com/stamen-dev/stamen/internal/testcluster"
)

// unsetXHeadersEnv leaves only what a case sets of the switch's variables.
func unsetXHeadersEnv(t *testing.T) {
	t.Helper()
	for _, k := range []string{"STAMEN_XHEADERS", "FLOWER_XHEADERS"} {
		t.Setenv(k, "")
		os.Unsetenv(k)
	}
}

// TestXHeadersOption: --xheaders (Flower's) is a switch, off by default,
// falling back to STAMEN_XHEADERS then FLOWER_XHEADERS with Flower's values;
// an unreadable variable stops stamen unless the flag is given.
func TestXHeadersOption(t *testing.T) {
	unsetXHeadersEnv(t)
	for _, tc := range []struct {
		name    string
		env     map[string]string
		args    []string
		want    bool
		wantErr string
	}{
		{name: "default off"},
		{name: "--xheaders", args: []string{"--xheaders"}, want: true},
		{name: "--xheaders=false", args: []string{"--xheaders=false"}},
		{name: "FLOWER_XHEADERS=1", env: map[string]string{"FLOWER_XHEADERS": "1"}, want: true},
		{name: "STAMEN_XHEADERS=yes", env: map[string]string{"STAMEN_XHEADERS": "yes"}, want: true},
		{name: "STAMEN_ wins over FLOWER_", env: map[string]string{"STAMEN_XHEADERS": "off", "FLOWER_XHEADERS": "1"}},
		{name: "unreadable", env: map[string]string{"FLOWER_XHEADERS": "maybe"}, wantErr: `invalid FLOWER_XHEADERS="maybe"`},
		{name: "the flag overrides an unreadable variable", env: map[string]string{"FLOWER_XHEADERS": "maybe"},
			args: []string{"--xheaders=true"}, want: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if o, ok := parseCase(t, tc.env, tc.args, tc.wantErr); ok && o.xheaders != tc.want {
				t.Fatalf("xheaders = %v, want %v", o.xheaders, tc.want)
			}
		})
	}
}

// TestXHeadersReachTheAuditLog runs the binary: with --xheaders or
// FLOWER_XHEADERS=1 a write call's audit record has the address the
// proxy's X-Forwarded-For entry names; without, the socket's.
func TestXHeadersReachTheAuditLog(t *testing.T) {
	testcluster.SkipIfShort(t, "builds and runs the binary")
	bin := buildBinary(t)
	unsetXHeadersEnv(t)
	for _, tc := range []struct {
		name  string
		env   string
		args  []string
		proxy bool // the record names the proxy's entry, not the socket
	}{
		{name: "--xheaders", args: []string{"--xheaders"}, proxy: true},
		{name: "FLOWER_XHEADERS=1", env: "FLOWER_XHEADERS", proxy: true},
		{name: "off"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if tc.env != "" {
				t.Setenv(tc.env, "1")
			}
			base, logs, _ := runStamen(t, bin, tc.args...)
			req, err := http.NewRequest("POST", base+"/api/task/revoke/xheaders-task", nil)
			if err != nil {
				t.Fatal(err)
			}
			req.Header.Set("X-Forwarded-For", "1.2.3.4, 10.0.0.1")
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatalf("revoke: %v\n%s", err, logs.String())
			}
			resp.Body.Close()
			if resp.StatusCode != http.StatusOK {
				t.Fatalf("revoke: %d\n%s", resp.StatusCode, logs.String())
			}
			resp, err = http.Get(base + "/api/audit")
			if err != nil {
				t.Fatal(err)
			}
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			var audit struct {
				Records []struct{ Path, Remote string }
			}
			if err := json.Unmarshal(body, &audit); err != nil || len(audit.Records) != 1 {
				t.Fatalf("audit log: %v: %s", err, body)
			}
			got := audit.Records[0].Remote
			if tc.proxy {
				if got != "10.0.0.1" {
					t.Errorf("remote %q, want X-Forwarded-For's last entry 10.0.0.1", got)
				}
				return
			}
			// The socket's address: the test's own loopback connection.
			if host, _, err := net.SplitHostPort(got); err != nil || host != "127.0.0.1" {
				t.Errorf("remote %q, want the socket's 127.0.0.1:port", got)
			}
		})
	}
}
