package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/stamen-dev/stamen/internal/brokertls"
	"github.com/stamen-dev/stamen/internal/testcluster"
)

// TestBrokerUseSSLOptions: --broker_use_ssl and --redis_backend_use_ssl,
// from flags and the environment, take Celery's keys of the broker's
// library; an unknown key, a wrong type, the other library's key, an
// unreadable file or one with no PEM certificate stops stamen at start,
// naming the key and the file and nothing the file holds.
func TestBrokerUseSSLOptions(t *testing.T) {
	for _, p := range []string{"STAMEN_", "FLOWER_"} {
		for _, k := range []string{"BROKER", "BROKER_USE_SSL", "REDIS_BACKEND_USE_SSL", "RESULT_BACKEND"} {
			t.Setenv(p+k, "")
			os.Unsetenv(p + k)
		}
	}
	t.Setenv("CELERY_BROKER_URL", "")
	os.Unsetenv("CELERY_BROKER_URL")
	f := testcluster.NewCA(t, "test CA").Issue(t, "client")
	dir := t.TempDir()
	junk := filepath.Join(dir, "junk.pem")
	if err := os.WriteFile(junk, []byte("s3cret-contents"), 0o600); err != nil {
		t.Fatal(err)
	}
	missing := filepath.Join(dir, "missing.pem")
	amqp := []string{"--broker", "amqps://guest:s3cret-pw@rabbit:5671/"}
	redis := []string{"--broker", "rediss://:s3cret-pw@redis:6380/0"}
	with := func(base []string, more ...string) []string { return append(append([]string{}, base...), more...) }
	amqpAll := `{"ca_certs": "` + f.CA + `", "certfile": "` + f.Cert + `", "keyfile": "` + f.Key + `", "cert_reqs": "CERT_REQUIRED", "server_hostname": "rabbit.internal"}`
	redisAll := `{"ssl_ca_certs": "` + f.CA + `", "ssl_certfile": "` + f.Cert + `", "ssl_keyfile": "` + f.Key + `", "ssl_cert_reqs": "required", "ssl_check_hostname": false}`

	for _, tc := range []struct {
		name    string
		env     map[string]string
		args    []string
		broker  *brokertls.Settings
		backend *brokertls.Settings
		wantErr string
	}{
		{name: "none", args: amqp},
		{name: "amqp keys", args: with(amqp, "--broker_use_ssl", amqpAll),
			broker: &brokertls.Settings{CACerts: f.CA, CertFile: f.Cert, KeyFile: f.Key, CertReqs: brokertls.CertRequired, ServerName: "rabbit.internal", Kind: brokertls.AMQP}},
		{name: "amqp:// takes them too", args: []string{"--broker", "amqp://guest@rabbit/", "--broker-use-ssl", `{"cert_reqs": "CERT_OPTIONAL"}`},
			broker: &brokertls.Settings{CertReqs: brokertls.CertOptional, Kind: brokertls.AMQP}},
		{name: "failover list", args: []string{"--broker", "amqp://a/;amqp://b/", "--broker_use_ssl", `{"cert_reqs": "CERT_NONE"}`},
			broker: &brokertls.Settings{CertReqs: brokertls.CertNone, Kind: brokertls.AMQP}},
		{name: "redis keys", args: with(redis, "--broker_use_ssl", redisAll),
			broker: &brokertls.Settings{CACerts: f.CA, CertFile: f.Cert, KeyFile: f.Key, CertReqs: brokertls.CertRequired, NoHostnameCheck: true, Kind: brokertls.Redis}},
		{name: "sentinel takes redis keys", args: []string{"--broker", "sentinel://s1:26379", "--broker_use_ssl", `{"ssl_cert_reqs": "none"}`},
			broker: &brokertls.Settings{CertReqs: brokertls.CertNone, Kind: brokertls.Redis}},
		{name: "environment", env: map[string]string{"STAMEN_BROKER": "amqps://rabbit/", "FLOWER_BROKER_USE_SSL": `{"ca_certs": "` + f.CA + `"}`},
			broker: &brokertls.Settings{CACerts: f.CA, Kind: brokertls.AMQP}},
		{name: "flag wins over the environment", env: map[string]string{"STAMEN_BROKER_USE_SSL": `{"ca_certs": "` + missing + `"}`},
			args:   with(amqp, "--broker_use_ssl", `{"cert_reqs": 2}`),
			broker: &brokertls.Settings{CertReqs: brokertls.CertRequired, Kind: brokertls.AMQP}},
		{name: "redis result backend", args: with(amqp, "--result_backend", "rediss://:s3cret-pw@redis:6380/1", "--redis_backend_use_ssl", `{"ssl_ca_certs": "`+f.CA+`"}`),
			backend: &brokertls.Settings{CACerts: f.CA, Kind: brokertls.Redis}},

		{name: "unknown key", args: with(amqp, "--broker_use_ssl", `{"ciphers": "s3cret"}`), wantErr: `--broker_use_ssl: unknown key "ciphers"`},
		{name: "redis key on amqp", args: with(amqp, "--broker_use_ssl", `{"ssl_ca_certs": "/s3cret"}`), wantErr: `"ssl_ca_certs" is a Redis broker's`},
		{name: "amqp key on redis", args: with(redis, "--broker_use_ssl", `{"ca_certs": "/s3cret"}`), wantErr: `"ca_certs" is a RabbitMQ broker's`},
		{name: "wrong type", args: with(amqp, "--broker_use_ssl", `{"certfile": 1}`), wantErr: "certfile: want a file name"},
		{name: "bad cert_reqs", args: with(redis, "--broker_use_ssl", `{"ssl_cert_reqs": "s3cret"}`), wantErr: "ssl_cert_reqs: want CERT_REQUIRED"},
		{name: "not JSON", args: with(amqp, "--broker_use_ssl", `ca_certs=s3cret`), wantErr: "want a JSON object"},
		{name: "unreadable file", args: with(amqp, "--broker_use_ssl", `{"ca_certs": "`+missing+`"}`), wantErr: "ca_certs: open " + missing},
		{name: "no PEM certificate", args: with(redis, "--broker_use_ssl", `{"ssl_ca_certs": "`+junk+`"}`), wantErr: "ssl_ca_certs: no PEM certificate in " + junk},
		{name: "no PEM client certificate", args: with(amqp, "--broker_use_ssl", `{"certfile": "`+junk+`", "keyfile": "`+f.Key+`"}`), wantErr: "certfile/keyfile: client certificate: no PEM certificate in " + junk},
		{name: "no PEM key", args: with(amqp, "--broker_use_ssl", `{"certfile": "`+f.Cert+`", "keyfile": "`+junk+`"}`), wantErr: "client key: no PEM private key in " + junk},
		{name: "unreadable file in the environment", env: map[string]string{"STAMEN_BROKER_USE_SSL": `{"ca_certs": "` + missing + `"}`}, args: amqp, wantErr: "--broker_use_ssl: ca_certs: open"},
		{name: "embedded broker", args: []string{"--broker_use_ssl", `{"cert_reqs": "CERT_NONE"}`}, wantErr: "the embedded broker has no TLS"},
		{name: "backend option without a redis backend", args: with(amqp, "--redis_backend_use_ssl", `{"ssl_cert_reqs": "none"}`), wantErr: "--redis_backend_use_ssl: needs a --result_backend redis://"},
		{name: "backend option takes redis keys", args: with(amqp, "--result_backend", "redis://redis/1", "--redis_backend_use_ssl", `{"ca_certs": "/x"}`), wantErr: `--redis_backend_use_ssl: "ca_certs" is a RabbitMQ broker's`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o, ok := parseCase(t, tc.env, tc.args, tc.wantErr)
			if !ok {
				var stderr bytes.Buffer
				if code := run(tc.args, &stderr); code != 2 {
					t.Errorf("run = %d, want 2", code)
				}
				for _, s := range []string{"s3cret", "BEGIN"} {
					if strings.Contains(stderr.String(), s) {
						t.Errorf("stderr shows %q: %s", s, stderr.String())
					}
				}
				return
			}
			if diff := cmp.Diff(tc.broker, o.brokerSSL); diff != "" {
				t.Errorf("broker settings (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tc.backend, o.backendSSL); diff != "" {
				t.Errorf("result backend settings (-want +got):\n%s", diff)
			}
		})
	}
}
