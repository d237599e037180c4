package main

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/big"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/stamen-dev/stamen/internal/testcluster"
)

func writeFile(t *testing.T, path string, data []byte) {
	t.Helper()
	if err := os.WriteFile(path, data, 0o600); err != nil {
		t.Fatal(err)
	}
}

// httpsClient trusts roots and presents cert, if any; it opens a new
// connection for every request, so that each one sees the certificate the
// server serves then.
func httpsClient(roots *x509.CertPool, cert *tls.Certificate) *http.Client {
	cfg := &tls.Config{RootCAs: roots}
	if cert != nil {
		cfg.Certificates = []tls.Certificate{*cert}
	}
	return &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{TLSClientConfig: cfg, DisableKeepAlives: true}}
}

// TestHTTPS runs the binary with Flower's --certfile, --keyfile and
// --ca_certs: the API answers over TLS with the given certificate, a plain
// HTTP request is refused and logged in the log's own format, a renewed
// certificate is served without a restart, and with --ca_certs only
// clients holding a certificate of those authorities get an answer, also
// after the authorities are rotated in place.
func TestHTTPS(t *testing.T) {
	testcluster.SkipIfShort(t, "builds and runs the binary")
	bin := buildBinary(t)
	dir := t.TempDir()
	ca := testcluster.NewCA(t, "stamen test CA")
	first := ca.Leaf(t, "stamen")
	firstSerial, certPEM, keyPEM := first.Serial, first.CertPEM, first.KeyPEM
	certFile, keyFile, caFile := filepath.Join(dir, "cert.pem"), filepath.Join(dir, "key.pem"), filepath.Join(dir, "ca.pem")
	writeFile(t, certFile, certPEM)
	writeFile(t, keyFile, keyPEM)
	writeFile(t, caFile, ca.PEM)

	// served is the TLS state of a successful GET /api/workers.
	served := func(c *http.Client, base string) (*http.Response, error) {
		resp, err := c.Get(base + "/api/workers")
		if err != nil {
			return nil, err
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		if resp.StatusCode != http.StatusOK {
			return nil, fmt.Errorf("GET /api/workers: %d %s", resp.StatusCode, body)
		}
		if resp.TLS == nil || len(resp.TLS.PeerCertificates) == 0 {
			return nil, errors.New("answered without TLS")
		}
		return resp, nil
	}
	servedSerial := func(c *http.Client, base string) (*big.Int, error) {
		resp, err := served(c, base)
		if err != nil {
			return nil, err
		}
		return resp.TLS.PeerCertificates[0].SerialNumber, nil
	}

	t.Run("certfile and keyfile", func(t *testing.T) {
		port := freePort(t)
		p := startProcess(t, bin, append(embeddedArgs(t), "--port", fmt.Sprint(port),
			"--certfile", certFile, "--keyfile", keyFile)...)
		logs := p.logs
		base := fmt.Sprintf("https://127.0.0.1:%d", port)
		client := httpsClient(ca.Pool(), nil)
		p.awaitUp(t, func() bool { _, err := servedSerial(client, base); return err == nil })
		if got, err := servedSerial(client, base); err != nil || got.Cmp(firstSerial) != 0 {
			t.Fatalf("served certificate %v (%v), want serial %v", got, err, firstSerial)
		}
		if !strings.Contains(logs.String(), "address=https://127.0.0.1:") {
			t.Errorf("the start line does not give the https address:\n%s", logs.String())
		}
		h2 := httpsClient(ca.Pool(), nil)
		h2.Transport.(*http.Transport).ForceAttemptHTTP2 = true
		if resp, err := served(h2, base); err != nil || resp.ProtoMajor != 2 {
			t.Errorf("a client offering HTTP/2: %v, want HTTP/2 (%v)", resp, err)
		}

		// Plain HTTP: Go answers 400 and its server logs the failed
		// handshake, which must come through slog (and so the redaction).
		resp, err := http.Get(fmt.Sprintf("http://127.0.0.1:%d/api/workers", port))
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusBadRequest {
			t.Errorf("plain HTTP to the TLS port: %d, want 400", resp.StatusCode)
		}
		testcluster.Eventually(t, 10*time.Second, "the refused handshake in the log, as a slog line", func() bool {
			return strings.Contains(logs.String(), `level=WARN msg="http: TLS handshake error from 127.0.0.1:`)
		})

		// A renewal writes new files in place; new connections get the
		// new certificate within the reload interval.
		next := ca.Leaf(t, "stamen renewed")
		renewed, certPEM2, keyPEM2 := next.Serial, next.CertPEM, next.KeyPEM
		writeFile(t, keyFile+".new", keyPEM2)
		writeFile(t, certFile+".new", certPEM2)
		for _, p := range []string{keyFile, certFile} {
			if err := os.Rename(p+".new", p); err != nil {
				t.Fatal(err)
			}
		}
		testcluster.Eventually(t, 3*tlsReloadInterval, "the renewed certificate served", func() bool {
			got, err := servedSerial(client, base)
			return err == nil && got.Cmp(renewed) == 0
		})
		if !strings.Contains(logs.String(), "TLS files reloaded") {
			t.Errorf("the reload is not logged:\n%s", logs.String())
		}
		// Restore the first pair for the next case.
		writeFile(t, certFile, certPEM)
		writeFile(t, keyFile, keyPEM)
	})

	t.Run("ca_certs", func(t *testing.T) {
		port := freePort(t)
		// Beyond loopback without credentials: the client certificates
		// are the authentication.
		p := startProcess(t, bin, append(embeddedArgs(t), "--port", fmt.Sprint(port), "--address", "0.0.0.0",
			"--certfile", certFile, "--keyfile", keyFile, "--ca_certs", caFile)...)
		base := fmt.Sprintf("https://127.0.0.1:%d", port)
		trusted := ca.Leaf(t, "operator laptop").Pair
		other := testcluster.NewCA(t, "another CA")
		stranger := other.Leaf(t, "stranger").Pair
		p.awaitUp(t, func() bool {
			_, err := servedSerial(httpsClient(ca.Pool(), &trusted), base)
			return err == nil
		})
		for _, tc := range []struct {
			name string
			cert *tls.Certificate
			ok   bool
		}{
			{"a certificate of the authority", &trusted, true},
			{"no certificate", nil, false},
			{"a certificate of another authority", &stranger, false},
		} {
			_, err := servedSerial(httpsClient(ca.Pool(), tc.cert), base)
			if tc.ok && err != nil {
				t.Errorf("%s: %v", tc.name, err)
			}
			if !tc.ok && err == nil {
				t.Errorf("%s: the API answered", tc.name)
			}
		}

		// The audit log names the caller by its certificate.
		var users []string
		for _, r := range revokeAudited(t, httpsClient(ca.Pool(), &trusted), base, "cert-audited") {
			users = append(users, r.User)
		}
		if want := "cert:CN=operator laptop"; len(users) != 1 || users[0] != want {
			t.Errorf("audit records of the revoke name %q, want [%s]", users, want)
		}

		// A client that resumes TLS sessions, holding a session of the
		// first authority's certificate when --ca_certs is rotated in place
		// to the other authority.
		resuming := httpsClient(ca.Pool(), &trusted)
		resuming.Transport.(*http.Transport).TLSClientConfig.ClientSessionCache = tls.NewLRUClientSessionCache(4)
		testcluster.Eventually(t, 10*time.Second, "a resumed TLS session", func() bool {
			resp, err := served(resuming, base)
			return err == nil && resp.TLS.DidResume
		})
		writeFile(t, caFile+".new", other.PEM)
		if err := os.Rename(caFile+".new", caFile); err != nil {
			t.Fatal(err)
		}
		testcluster.Eventually(t, 3*tlsReloadInterval, "the other authority's certificate accepted", func() bool {
			_, err := servedSerial(httpsClient(ca.Pool(), &stranger), base)
			return err == nil
		})
		for _, tc := range []struct {
			name   string
			client *http.Client
		}{
			{"a certificate of the removed authority", httpsClient(ca.Pool(), &trusted)},
			{"a resumed session of the removed authority's certificate", resuming},
		} {
			if _, err := served(tc.client, base); err == nil {
				t.Errorf("%s: the API answered after the rotation", tc.name)
			}
		}
		if !strings.Contains(p.logs.String(), "TLS files reloaded") {
			t.Errorf("the rotation is not logged:\n%s", p.logs.String())
		}
		writeFile(t, caFile, ca.PEM)
	})

	t.Run("refused at start", func(t *testing.T) {
		badKey := filepath.Join(dir, "bad-key.pem")
		const secretish = "NOT-A-KEY-but-maybe-secret-material"
		writeFile(t, badKey, []byte(secretish))
		for _, tc := range []struct {
			name string
			args []string
			want string
		}{
			{"certfile alone", []string{"--certfile", certFile}, "--certfile and --keyfile go together"},
			{"keyfile alone", []string{"--keyfile", keyFile}, "--certfile and --keyfile go together"},
			{"ca_certs alone", []string{"--ca_certs", caFile}, "--ca_certs needs --certfile and --keyfile"},
			{"a key that is not PEM", []string{"--certfile", certFile, "--keyfile", badKey}, "bad-key.pem"},
			{"a missing file", []string{"--certfile", filepath.Join(dir, "none.pem"), "--keyfile", keyFile}, "none.pem: no such file"},
			{"ca_certs without a certificate", []string{"--certfile", certFile, "--keyfile", keyFile, "--ca_certs", badKey}, "no PEM certificate"},
			{"beyond loopback with neither credentials nor client certificates", []string{"--certfile", certFile, "--keyfile", keyFile,
				"--address", "0.0.0.0"}, "refusing to serve the API without authentication"},
		} {
			t.Run(tc.name, func(t *testing.T) {
				out, code := runToExit(t, bin, append(embeddedArgs(t), append(tc.args, "--port", fmt.Sprint(freePort(t)))...)...)
				if code != 2 || !strings.Contains(out, tc.want) {
					t.Errorf("exit %d, want 2 with %q:\n%s", code, tc.want, out)
				}
				if strings.Contains(out, secretish) {
					t.Errorf("the error shows the file's contents:\n%s", out)
				}
			})
		}
	})
}

// runToExit runs bin until it exits (within 20 s) and returns its log and
// exit status.
func runToExit(t *testing.T, bin string, args ...string) (string, int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, args...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	err := cmd.Run()
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		return stderr.String(), ee.ExitCode()
	}
	if err != nil {
		t.Fatal(err)
	}
	return stderr.String(), 0
}

// unixClient sends every request to the socket at path.
func unixClient(path string) *http.Client {
	return &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			var d net.Dialer
			return d.DialContext(ctx, "unix", path)
		},
	}}
}

// TestUnixSocket runs the binary with Flower's --unix_socket: the API
// answers on the socket (without credentials, though --address is not
// loopback), the socket is closed to other users, a socket left by a
// killed stamen is replaced, a file that is not a socket or a socket in use
// is left alone, the Host check is on, and the socket goes when stamen
// stops.
func TestUnixSocket(t *testing.T) {
	testcluster.SkipIfShort(t, "builds and runs the binary")
	bin := buildBinary(t)
	dir := t.TempDir()
	sock := filepath.Join(dir, "stamen.sock")

	// A socket nobody accepts on, as a killed stamen leaves it.
	stale, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	stale.(*net.UnixListener).SetUnlinkOnClose(false)
	stale.Close()

	p := startProcess(t, bin, append(embeddedArgs(t), "--unix_socket", sock, "--address", "0.0.0.0")...)
	logs := p.logs
	client := unixClient(sock)
	p.awaitUp(t, func() bool {
		resp, err := client.Get("http://localhost/api/workers")
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK
	})
	fi, err := os.Stat(sock)
	if err != nil {
		t.Fatal(err)
	}
	if mode := fi.Mode().Perm(); mode != unixSocketMode {
		t.Errorf("socket mode %o, want %o", mode, unixSocketMode)
	}
	if !strings.Contains(logs.String(), "address=http://unix:"+sock) {
		t.Errorf("the start line does not give the socket:\n%s", logs.String())
	}

	// The audit log names the caller by its credentials: this process.
	want := fmt.Sprintf("unix:uid=%d,pid=%d", os.Getuid(), os.Getpid())
	if runtime.GOOS != "linux" {
		want = "unix"
	}
	var remotes []string
	for _, r := range revokeAudited(t, client, "http://localhost", "over-the-socket") {
		remotes = append(remotes, r.Remote)
	}
	if len(remotes) != 1 || remotes[0] != want {
		t.Errorf("audit remotes of the revoke %q, want [%s]", remotes, want)
	}

	// A proxy in front of the socket may pass on any Host: only
	// localhost's names are answered, which keeps out a page that reaches
	// the proxy by a name of its own (DNS rebinding).
	resp, err := client.Get("http://stamen/api/workers")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusMisdirectedRequest {
		t.Errorf("Host stamen over the socket: %d, want 421", resp.StatusCode)
	}

	t.Run("in use", func(t *testing.T) {
		out, code := runToExit(t, bin, append(embeddedArgs(t), "--unix_socket", sock)...)
		if code != 1 || !strings.Contains(out, "is in use by another process") {
			t.Errorf("exit %d, want 1 saying the socket is in use:\n%s", code, out)
		}
	})
	t.Run("not a socket", func(t *testing.T) {
		file := filepath.Join(dir, "notes.txt")
		writeFile(t, file, []byte("keep me"))
		out, code := runToExit(t, bin, append(embeddedArgs(t), "--unix_socket", file)...)
		if code != 1 || !strings.Contains(out, "exists and is not a socket") {
			t.Errorf("exit %d, want 1 saying it is not a socket:\n%s", code, out)
		}
		if b, err := os.ReadFile(file); err != nil || string(b) != "keep me" {
			t.Errorf("the file was touched: %q, %v", b, err)
		}
	})

	if err := p.stop(); err != nil {
		t.Fatalf("stop: %v\n%s", err, logs.String())
	}
	if _, err := os.Lstat(sock); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the socket is still there after stamen stopped: %v", err)
	}
}

// auditRecord is what the tests read of an audit record.
type auditRecord struct {
	User   string `json:"user"`
	Auth   string `json:"auth"`
	Remote string `json:"remote"`
	Path   string `json:"path"`
}

// revokeAudited revokes task id through the API at base and returns the
// audit records of that call.
func revokeAudited(t *testing.T, client *http.Client, base, id string) []auditRecord {
	t.Helper()
	resp, err := client.Post(base+"/api/task/revoke/"+id, "application/json", nil)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("revoke: %d", resp.StatusCode)
	}
	resp, err = client.Get(base + "/api/audit")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var log struct {
		Records []auditRecord `json:"records"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&log); err != nil {
		t.Fatal(err)
	}
	var out []auditRecord
	for _, r := range log.Records {
		if r.Path == "/api/task/revoke/"+id {
			out = append(out, r)
		}
	}
	return out
}
