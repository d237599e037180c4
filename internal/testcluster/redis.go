package testcluster

import (
	"fmt"
	"net"
	"net/url"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"
	"time"
)

// Redis is a private redis-server on its own port, for tests that take the
// broker away: stopping the shared one would break every other test.
type Redis struct {
	t    testing.TB
	Port int
	dir  string
	cmd  *exec.Cmd
	// args are appended to redis-server's command line (replicaof,
	// requirepass).
	args []string
	// tls, when set, makes Port a TLS port (StartRedisTLS).
	tls *CertFiles
}

// StartRedis starts a redis-server on a free loopback port, without
// persistence; a cleanup registered on t stops it.
func StartRedis(t testing.TB) *Redis {
	t.Helper()
	if _, err := exec.LookPath("redis-server"); err != nil {
		t.Fatalf("testcluster: redis-server not found (scripts/services.sh installs it): %v", err)
	}
	r := &Redis{t: t, Port: FreePort(t), dir: t.TempDir()}
	r.Start()
	t.Cleanup(r.Stop)
	return r
}

// StartRedisTLS is StartRedis for a server that speaks TLS only: Port is
// its TLS port (no plain one), it presents server's certificate and
// requires clients to present one signed by server's CA (tls-auth-clients
// yes). Debian's redis-server is built with TLS.
func StartRedisTLS(t testing.TB, server CertFiles) *Redis {
	t.Helper()
	if _, err := exec.LookPath("redis-server"); err != nil {
		t.Fatalf("testcluster: redis-server not found (scripts/services.sh installs it): %v", err)
	}
	r := &Redis{t: t, Port: FreePort(t), dir: t.TempDir(), tls: &server}
	r.Start()
	t.Cleanup(r.Stop)
	return r
}

// TLSURL is the rediss:// URL of a StartRedisTLS server's database db for
// a client holding client's certificate, in Celery's ssl_* parameters.
func (r *Redis) TLSURL(db int, client CertFiles) string {
	q := url.Values{
		"ssl_cert_reqs": {"required"},
		"ssl_ca_certs":  {client.CA},
		"ssl_certfile":  {client.Cert},
		"ssl_keyfile":   {client.Key},
	}
	return fmt.Sprintf("rediss://127.0.0.1:%d/%d?%s", r.Port, db, q.Encode())
}

// URL is the server's URL for database db.
func (r *Redis) URL(db int) string { return fmt.Sprintf("redis://127.0.0.1:%d/%d", r.Port, db) }

// Start (re)starts the server on its port and waits until it accepts
// connections (10 s at most).
func (r *Redis) Start() {
	r.t.Helper()
	port := []string{"--port", fmt.Sprint(r.Port)}
	if r.tls != nil {
		port = []string{"--port", "0", "--tls-port", fmt.Sprint(r.Port),
			"--tls-cert-file", r.tls.Cert, "--tls-key-file", r.tls.Key,
			"--tls-ca-cert-file", r.tls.CA, "--tls-auth-clients", "yes"}
	}
	r.cmd = exec.Command("redis-server", append(append([]string{"--bind", "127.0.0.1"}, port...),
		"--save", "", "--appendonly", "no", "--dir", r.dir,
		"--logfile", filepath.Join(r.dir, "redis.log"))...)
	r.cmd.Args = append(r.cmd.Args, r.args...)
	if err := r.cmd.Start(); err != nil {
		r.t.Fatalf("testcluster: start redis-server: %v", err)
	}
	addr := fmt.Sprintf("127.0.0.1:%d", r.Port)
	deadline := time.Now().Add(10 * time.Second)
	for {
		c, err := net.DialTimeout("tcp", addr, 200*time.Millisecond)
		if err == nil {
			c.Close()
			return
		}
		if time.Now().After(deadline) {
			r.Stop()
			r.t.Fatalf("testcluster: redis-server on %s did not start: %v", addr, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// Stop kills the server, as a crash or a network cut would take it away.
func (r *Redis) Stop() {
	if r.cmd == nil || r.cmd.Process == nil {
		return
	}
	_ = r.cmd.Process.Signal(syscall.SIGKILL)
	_ = r.cmd.Wait()
	r.cmd = nil
}
