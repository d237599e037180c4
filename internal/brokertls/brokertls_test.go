package brokertls

import (
	"crypto/tls"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/stamen-dev/stamen/internal/testcluster"
)

func TestParse(t *testing.T) {
	for _, tc := range []struct {
		name, raw string
		kind      Kind
		want      *Settings
		err       string
	}{
		{"empty", "", AMQP, nil, ""},
		{"blank", "  ", Redis, nil, ""},
		{"amqp all", `{"ca_certs": "/ca.pem", "certfile": "/c.pem", "keyfile": "/k.pem", "cert_reqs": "CERT_REQUIRED", "server_hostname": "rabbit.internal"}`, AMQP,
			&Settings{CACerts: "/ca.pem", CertFile: "/c.pem", KeyFile: "/k.pem", CertReqs: CertRequired, ServerName: "rabbit.internal", Kind: AMQP}, ""},
		{"amqp optional", `{"cert_reqs": "CERT_OPTIONAL"}`, AMQP, &Settings{CertReqs: CertOptional, Kind: AMQP}, ""},
		{"amqp none", `{"cert_reqs": "CERT_NONE"}`, AMQP, &Settings{CertReqs: CertNone, Kind: AMQP}, ""},
		{"amqp value", `{"cert_reqs": 2}`, AMQP, &Settings{CertReqs: CertRequired, Kind: AMQP}, ""},
		{"amqp value none", `{"cert_reqs": 0}`, AMQP, &Settings{CertReqs: CertNone, Kind: AMQP}, ""},
		{"amqp null hostname", `{"server_hostname": null}`, AMQP, &Settings{Kind: AMQP}, ""},
		{"amqp cert holds key", `{"certfile": "/both.pem"}`, AMQP, &Settings{CertFile: "/both.pem", Kind: AMQP}, ""},
		{"redis all", `{"ssl_ca_certs": "/ca.pem", "ssl_certfile": "/c.pem", "ssl_keyfile": "/k.pem", "ssl_cert_reqs": "required", "ssl_check_hostname": false}`, Redis,
			&Settings{CACerts: "/ca.pem", CertFile: "/c.pem", KeyFile: "/k.pem", CertReqs: CertRequired, NoHostnameCheck: true, Kind: Redis}, ""},
		{"redis optional", `{"ssl_cert_reqs": "optional"}`, Redis, &Settings{CertReqs: CertOptional, Kind: Redis}, ""},
		{"redis none", `{"ssl_cert_reqs": "none"}`, Redis, &Settings{CertReqs: CertNone, Kind: Redis}, ""},
		{"redis constant name", `{"ssl_cert_reqs": "CERT_NONE"}`, Redis, &Settings{CertReqs: CertNone, Kind: Redis}, ""},
		{"redis check hostname", `{"ssl_check_hostname": true}`, Redis, &Settings{Kind: Redis}, ""},

		{"not an object", `["ca_certs"]`, AMQP, nil, "want a JSON object"},
		{"null", `null`, AMQP, nil, "want a JSON object"},
		{"two objects", `{} {}`, AMQP, nil, "single JSON object"},
		{"syntax", `{"ca_certs": "s3cret`, AMQP, nil, "want a JSON object"},
		{"unknown", `{"ciphers": "s3cret"}`, AMQP, nil, `unknown key "ciphers"`},
		{"redis key on amqp", `{"ssl_ca_certs": "/s3cret"}`, AMQP, nil, `"ssl_ca_certs" is a Redis broker's`},
		{"amqp key on redis", `{"ca_certs": "/s3cret"}`, Redis, nil, `"ca_certs" is a RabbitMQ broker's`},
		{"path type", `{"ca_certs": 1}`, AMQP, nil, "ca_certs: want a file name"},
		{"empty path", `{"certfile": ""}`, AMQP, nil, "certfile: want a file name"},
		{"cert_reqs word", `{"cert_reqs": "s3cret"}`, AMQP, nil, "cert_reqs: want CERT_REQUIRED"},
		{"cert_reqs value", `{"cert_reqs": 3}`, AMQP, nil, "cert_reqs: want CERT_REQUIRED"},
		{"cert_reqs bool", `{"ssl_cert_reqs": true}`, Redis, nil, "ssl_cert_reqs: want CERT_REQUIRED"},
		{"hostname type", `{"server_hostname": 1}`, AMQP, nil, "server_hostname"},
		{"hostname empty", `{"server_hostname": ""}`, AMQP, nil, "server_hostname: empty"},
		{"check_hostname type", `{"ssl_check_hostname": "s3cret"}`, Redis, nil, "ssl_check_hostname: want true or false"},
		{"key alone", `{"keyfile": "/k.pem"}`, AMQP, nil, "keyfile without certfile"},
		{"redis key alone", `{"ssl_keyfile": "/k.pem"}`, Redis, nil, "ssl_keyfile without ssl_certfile"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := Parse(tc.raw, tc.kind)
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("Parse = %+v, %v; want an error saying %q", got, err, tc.err)
				}
				if strings.Contains(err.Error(), "s3cret") {
					t.Errorf("the error quotes a value: %v", err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("Parse (-want +got):\n%s", diff)
			}
		})
	}
}

func TestFromQuery(t *testing.T) {
	for _, tc := range []struct {
		query string
		want  Settings
		err   string
	}{
		{"", Settings{Kind: Redis}, ""},
		{"ssl_cert_reqs=CERT_REQUIRED&ssl_ca_certs=/ca.pem&ssl_certfile=/c.pem&ssl_keyfile=/k.pem",
			Settings{CACerts: "/ca.pem", CertFile: "/c.pem", KeyFile: "/k.pem", CertReqs: CertRequired, Kind: Redis}, ""},
		{"ssl_cert_reqs=optional", Settings{CertReqs: CertOptional, Kind: Redis}, ""},
		{"ssl_cert_reqs=none", Settings{CertReqs: CertNone, Kind: Redis}, ""},
		{"ssl_check_hostname=false", Settings{NoHostnameCheck: true, Kind: Redis}, ""},
		{"ssl_cert_reqs=maybe", Settings{}, "ssl_cert_reqs"},
		{"ssl_keyfile=/k.pem", Settings{}, "ssl_keyfile without ssl_certfile"},
		{"ssl_check_hostname=perhaps", Settings{}, "ssl_check_hostname"},
	} {
		q, err := url.ParseQuery(tc.query)
		if err != nil {
			t.Fatal(err)
		}
		got, err := FromQuery(q)
		if tc.err != "" {
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("FromQuery(%q) = %+v, %v; want an error saying %q", tc.query, got, err, tc.err)
			}
			continue
		}
		if err != nil {
			t.Errorf("FromQuery(%q): %v", tc.query, err)
			continue
		}
		if diff := cmp.Diff(tc.want, got); diff != "" {
			t.Errorf("FromQuery(%q) (-want +got):\n%s", tc.query, diff)
		}
	}
}

// TestOver: broker_use_ssl's keys win over the URL's parameters, which
// fill in what it leaves out.
func TestOver(t *testing.T) {
	url := Settings{CACerts: "/url-ca", CertFile: "/url-c", KeyFile: "/url-k", CertReqs: CertNone, NoHostnameCheck: true}
	got := Settings{CACerts: "/opt-ca", CertReqs: CertRequired}.Over(url)
	want := Settings{CACerts: "/opt-ca", CertFile: "/url-c", KeyFile: "/url-k", CertReqs: CertRequired, NoHostnameCheck: true}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("Over (-want +got):\n%s", diff)
	}
	// A certificate comes with its own key, not the URL's.
	got = Settings{CertFile: "/opt-c"}.Over(url)
	if got.CertFile != "/opt-c" || got.KeyFile != "" {
		t.Errorf("Over mixed the option's certificate with the URL's key: %+v", got)
	}
}

// TestConfigFiles: every file named is read at once, and one that cannot
// be read or holds no PEM certificate (or key) is an error naming the key
// and the file, never what the file holds.
func TestConfigFiles(t *testing.T) {
	ca := testcluster.NewCA(t, "test CA")
	f := ca.Issue(t, "client")
	other := testcluster.NewCA(t, "other CA").Issue(t, "other")
	dir := t.TempDir()
	junk := filepath.Join(dir, "junk.pem")
	if err := os.WriteFile(junk, []byte("s3cret-contents\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		s    Settings
		err  string
	}{
		{"all", Settings{CACerts: f.CA, CertFile: f.Cert, KeyFile: f.Key}, ""},
		{"system roots", Settings{}, ""},
		{"missing ca", Settings{CACerts: filepath.Join(dir, "nope.pem"), Kind: Redis}, "ssl_ca_certs: open " + filepath.Join(dir, "nope.pem")},
		{"ca without pem", Settings{CACerts: junk}, "ca_certs: no PEM certificate in " + junk},
		{"ca is a key", Settings{CACerts: f.Key}, "ca_certs: no PEM certificate in " + f.Key},
		{"missing cert", Settings{CertFile: filepath.Join(dir, "nope.pem"), KeyFile: f.Key}, "certfile/keyfile: client certificate: open"},
		{"cert without pem", Settings{CertFile: junk, KeyFile: f.Key, Kind: Redis}, "ssl_certfile/ssl_keyfile: client certificate: no PEM certificate in " + junk},
		{"missing key", Settings{CertFile: f.Cert, KeyFile: filepath.Join(dir, "nope.pem")}, "client key: open"},
		{"key without pem", Settings{CertFile: f.Cert, KeyFile: junk}, "client key: no PEM private key in " + junk},
		{"key not in cert", Settings{CertFile: f.Cert}, "client key: no PEM private key in " + f.Cert},
		{"key of another cert", Settings{CertFile: f.Cert, KeyFile: other.Key}, "client certificate " + f.Cert + " and key " + other.Key},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg, err := tc.s.Config()
			if tc.err == "" {
				if err != nil {
					t.Fatal(err)
				}
				if cfg.InsecureSkipVerify || cfg.ServerName != "" {
					t.Errorf("Config() = %+v: want verification, against the URL's host", cfg)
				}
				if tc.s.CertFile != "" && len(cfg.Certificates) != 1 {
					t.Errorf("no client certificate")
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Fatalf("Config() error = %v, want one saying %q", err, tc.err)
			}
			if strings.Contains(err.Error(), "s3cret") || strings.Contains(err.Error(), "BEGIN") {
				t.Errorf("the error shows a file's contents: %v", err)
			}
		})
	}
}

// tlsFixture starts a TLS server (tlsServer) whose certificate and
// client authority are one CA's, and returns a client's files of that CA,
// a stranger's of another CA, and the server's address.
func tlsFixture(t *testing.T) (client, stranger testcluster.CertFiles, addr string) {
	t.Helper()
	ca := testcluster.NewCA(t, "test CA")
	client = ca.Issue(t, "client")
	stranger = testcluster.NewCA(t, "stranger CA").Issue(t, "stranger")
	return client, stranger, tlsServer(t, ca.Issue(t, "server"))
}

// TestConfigVerifies runs real handshakes against a TLS server that
// requires client certificates: what each cert_reqs and hostname setting
// accepts and refuses.
func TestConfigVerifies(t *testing.T) {
	client, stranger, addr := tlsFixture(t)

	for _, tc := range []struct {
		name       string
		s          Settings
		serverName string // what the dialer fills in from the URL
		err        string
	}{
		{"required", Settings{CACerts: client.CA, CertFile: client.Cert, KeyFile: client.Key, CertReqs: CertRequired}, "127.0.0.1", ""},
		{"optional verifies too", Settings{CACerts: stranger.CA, CertFile: client.Cert, KeyFile: client.Key, CertReqs: CertOptional}, "127.0.0.1", "unknown authority"},
		{"unknown CA", Settings{CACerts: stranger.CA, CertFile: client.Cert, KeyFile: client.Key}, "127.0.0.1", "unknown authority"},
		{"system roots", Settings{CertFile: client.Cert, KeyFile: client.Key}, "127.0.0.1", "unknown authority"},
		{"none skips", Settings{CACerts: stranger.CA, CertFile: client.Cert, KeyFile: client.Key, CertReqs: CertNone}, "127.0.0.1", ""},
		{"no client certificate", Settings{CACerts: client.CA}, "127.0.0.1", "certificate required"},
		// Go offers no certificate the server's list of authorities does
		// not name: the server sees none.
		{"stranger's client certificate", Settings{CACerts: client.CA, CertFile: stranger.Cert, KeyFile: stranger.Key}, "127.0.0.1", "certificate required"},
		{"server_hostname checked", Settings{CACerts: client.CA, CertFile: client.Cert, KeyFile: client.Key, ServerName: "rabbit.internal"}, "", "rabbit.internal"},
		{"server_hostname matching", Settings{CACerts: client.CA, CertFile: client.Cert, KeyFile: client.Key, ServerName: "localhost"}, "", ""},
		{"hostname checked", Settings{CACerts: client.CA, CertFile: client.Cert, KeyFile: client.Key}, "redis.internal", "redis.internal"},
		{"ssl_check_hostname false", Settings{CACerts: client.CA, CertFile: client.Cert, KeyFile: client.Key, NoHostnameCheck: true}, "redis.internal", ""},
		{"ssl_check_hostname false still checks the CA", Settings{CACerts: stranger.CA, CertFile: client.Cert, KeyFile: client.Key, NoHostnameCheck: true}, "redis.internal", "unknown authority"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg, err := tc.s.Config()
			if err != nil {
				t.Fatal(err)
			}
			cfg = cfg.Clone()
			if cfg.ServerName == "" {
				cfg.ServerName = tc.serverName
			}
			err = handshake(addr, cfg)
			if tc.err == "" {
				if err != nil {
					t.Fatalf("handshake: %v", err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Fatalf("handshake error = %v, want one saying %q", err, tc.err)
			}
		})
	}
}

// handshake connects and reads: with TLS 1.3 a client learns that the
// server refused its certificate only when it reads.
func handshake(addr string, cfg *tls.Config) error {
	c, err := tls.DialWithDialer(&net.Dialer{Timeout: 5 * time.Second}, "tcp", addr, cfg)
	if err != nil {
		return err
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(5 * time.Second))
	buf := make([]byte, 1)
	if _, err := c.Read(buf); err != nil {
		return err
	}
	return nil
}

// tlsServer accepts TLS connections requiring a client certificate of
// f's CA, and writes a byte to each client it accepts.
func tlsServer(t *testing.T, f testcluster.CertFiles) string {
	t.Helper()
	pair, err := tls.LoadX509KeyPair(f.Cert, f.Key)
	if err != nil {
		t.Fatal(err)
	}
	s, err := Settings{CACerts: f.CA}.Config()
	if err != nil {
		t.Fatal(err)
	}
	ln, err := tls.Listen("tcp", "127.0.0.1:0", &tls.Config{
		Certificates: []tls.Certificate{pair}, ClientCAs: s.RootCAs, ClientAuth: tls.RequireAndVerifyClientCert,
	})
	if err != nil {
		t.Fatal(err)
	}
	return testcluster.ServeFake(t, ln, func(c net.Conn) {
		_ = c.SetDeadline(time.Now().Add(5 * time.Second))
		if c.(*tls.Conn).Handshake() == nil {
			_, _ = c.Write([]byte{1})
		}
	})
}

// TestProbe: without writing anything, Probe sees a server refuse a client
// that has no certificate, or one the server does not trust, and sees no
// refusal where the server accepts it.
func TestProbe(t *testing.T) {
	client, stranger, addr := tlsFixture(t)
	for _, tc := range []struct {
		name string
		s    Settings
		err  string
	}{
		{"accepted", Settings{CACerts: client.CA, CertFile: client.Cert, KeyFile: client.Key}, ""},
		{"no client certificate", Settings{CACerts: client.CA}, "certificate required"},
		{"server not trusted", Settings{CACerts: stranger.CA, CertFile: client.Cert, KeyFile: client.Key}, "unknown authority"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg, err := tc.s.Config()
			if err != nil {
				t.Fatal(err)
			}
			err = Probe(t.Context(), addr, cfg, 5*time.Second)
			if tc.err == "" {
				if err != nil {
					t.Fatalf("Probe: %v", err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tc.err) || !IsRefusal(err) {
				t.Fatalf("Probe = %v, want a refusal saying %q", err, tc.err)
			}
		})
	}
	// Nothing listening is no refusal: the server may come up later.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	free := ln.Addr().String()
	ln.Close()
	if err := Probe(t.Context(), free, &tls.Config{}, time.Second); err != nil {
		t.Errorf("Probe of a closed port = %v, want nil", err)
	}
}
