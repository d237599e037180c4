package main

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"net"
	"os"
	"strconv"
	"sync"
	"syscall"
	"time"
)

// unixSocketMode is the mode of --unix_socket's file: its owner and group
// may connect. Flower makes it 0777, which lets every local user call the
// API, and without credentials a unix socket needs none.
const unixSocketMode = 0o660

// listen opens where the API is served: --unix_socket if given, else
// --address:--port. It returns the listener and the address to log.
func listen(o options) (net.Listener, string, error) {
	if o.unixSocket == "" {
		ln, err := net.Listen("tcp", net.JoinHostPort(o.address, strconv.Itoa(o.port)))
		if err != nil {
			return nil, "", err
		}
		return ln, ln.Addr().String(), nil
	}
	if err := removeStaleSocket(o.unixSocket); err != nil {
		return nil, "", err
	}
	// The socket is created with the mode the umask leaves, and connections
	// are accepted from that moment: the umask, not a chmod after the
	// fact, keeps it closed to others from the start. Nothing else creates
	// files while stamen starts listening.
	old := syscall.Umask(0o777 &^ unixSocketMode)
	ln, err := net.Listen("unix", o.unixSocket)
	syscall.Umask(old)
	if err != nil {
		return nil, "", err
	}
	// Go removes the file when the listener closes.
	return peerListener{ln}, "unix:" + o.unixSocket, nil
}

// peerListener gives each connection of a unix socket its peer's
// credentials as its remote address, which the audit log records: Go's is
// "@", an unnamed socket, which tells nothing of who called.
type peerListener struct{ net.Listener }

func (l peerListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	uc, ok := c.(*net.UnixConn)
	if !ok {
		return c, nil
	}
	return peerConn{UnixConn: uc, peer: &net.UnixAddr{Name: unixPeer(uc), Net: "unix"}}, nil
}

// peerConn is a unix connection named by its peer. It embeds the concrete
// *net.UnixConn, so that net/http still finds CloseWrite on it.
type peerConn struct {
	*net.UnixConn
	peer net.Addr
}

func (c peerConn) RemoteAddr() net.Addr { return c.peer }

// removeStaleSocket removes the socket a stamen that was killed left at
// path, so that a restart can listen there. Only a socket nobody accepts
// on goes: a live stamen's socket, or a file that is not a socket, is an
// error.
func removeStaleSocket(path string) error {
	fi, err := os.Lstat(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	if fi.Mode().Type() != fs.ModeSocket {
		return fmt.Errorf("--unix_socket %s exists and is not a socket", path)
	}
	conn, err := net.DialTimeout("unix", path, time.Second)
	if err == nil {
		conn.Close()
		return fmt.Errorf("--unix_socket %s is in use by another process", path)
	}
	return os.Remove(path)
}

// certReloadInterval is how often, at most, a handshake looks whether
// --certfile or --keyfile changed: a renewed certificate (certbot,
// cert-manager) is served without a restart.
const certReloadInterval = 5 * time.Second

// tlsConfig builds the API's TLS configuration from Flower's --certfile,
// --keyfile and --ca_certs, or returns nil when none is given. With
// --ca_certs a client must present a certificate those authorities signed;
// Flower loads the file but does not ask for one, so it checks nothing.
func tlsConfig(o options, log *slog.Logger) (*tls.Config, error) {
	if o.certFile == "" && o.keyFile == "" {
		if o.caCerts != "" {
			return nil, errors.New("--ca_certs needs --certfile and --keyfile")
		}
		return nil, nil
	}
	if o.certFile == "" || o.keyFile == "" {
		// Flower then serves plain HTTP without a word.
		return nil, errors.New("--certfile and --keyfile go together")
	}
	certs, err := newCertReloader(o.certFile, o.keyFile, log)
	if err != nil {
		return nil, err
	}
	cfg := &tls.Config{
		MinVersion:     tls.VersionTLS12,
		GetCertificate: certs.get,
	}
	if o.caCerts != "" {
		pem, err := os.ReadFile(o.caCerts)
		if err != nil {
			return nil, fmt.Errorf("--ca_certs: %w", err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("--ca_certs %s: no PEM certificate in it", o.caCerts)
		}
		cfg.ClientCAs = pool
		cfg.ClientAuth = tls.RequireAndVerifyClientCert
	}
	return cfg, nil
}

// certReloader serves a certificate and key pair from files, read again
// when either file changes.
type certReloader struct {
	certFile, keyFile string
	log               *slog.Logger

	mu      sync.Mutex
	cert    *tls.Certificate
	stamp   [2]fileStamp
	checked time.Time
}

// fileStamp tells whether a file changed since it was read.
type fileStamp struct {
	mod  time.Time
	size int64
}

func stampOf(path string) (fileStamp, error) {
	fi, err := os.Stat(path)
	if err != nil {
		return fileStamp{}, err
	}
	return fileStamp{fi.ModTime(), fi.Size()}, nil
}

func newCertReloader(certFile, keyFile string, log *slog.Logger) (*certReloader, error) {
	r := &certReloader{certFile: certFile, keyFile: keyFile, log: log}
	if err := r.load(); err != nil {
		return nil, err
	}
	return r, nil
}

// load reads the pair; r.mu is held, or r is not shared yet.
func (r *certReloader) load() error {
	var stamp [2]fileStamp
	for i, path := range []string{r.certFile, r.keyFile} {
		s, err := stampOf(path)
		if err != nil {
			return fmt.Errorf("TLS certificate: %w", err)
		}
		stamp[i] = s
	}
	// Errors name the files, never their contents.
	cert, err := tls.LoadX509KeyPair(r.certFile, r.keyFile)
	if err != nil {
		return fmt.Errorf("TLS certificate %s and key %s: %w", r.certFile, r.keyFile, err)
	}
	r.cert, r.stamp = &cert, stamp
	return nil
}

func (r *certReloader) get(*tls.ClientHelloInfo) (*tls.Certificate, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if now := time.Now(); now.Sub(r.checked) >= certReloadInterval {
		r.checked = now
		if r.changed() {
			// A pair caught half written, or a bad renewal, keeps the
			// certificate being served; the next check tries again.
			if err := r.load(); err != nil {
				r.log.Warn("TLS certificate not reloaded; serving the previous one", slog.Any("err", err))
			} else {
				r.log.Info("TLS certificate reloaded", slog.String("certfile", r.certFile))
			}
		}
	}
	return r.cert, nil
}

func (r *certReloader) changed() bool {
	for i, path := range []string{r.certFile, r.keyFile} {
		s, err := stampOf(path)
		if err != nil || s != r.stamp[i] {
			return true
		}
	}
	return false
}
