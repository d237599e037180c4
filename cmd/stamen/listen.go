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

// tlsReloadInterval is how often, at most, a handshake looks whether
// --certfile, --keyfile or --ca_certs changed: a renewed certificate
// (certbot, cert-manager) or a rotated client authority is served without
// a restart.
const tlsReloadInterval = 5 * time.Second

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
	files, err := newTLSReloader(o.certFile, o.keyFile, o.caCerts, log)
	if err != nil {
		return nil, err
	}
	// Every handshake gets the configuration built from the files as they
	// were last read; this one only hands it out.
	return &tls.Config{MinVersion: tls.VersionTLS12, GetConfigForClient: files.config}, nil
}

// tlsReloader serves a TLS configuration built from the certificate, key
// and client authority files, built again when any of them changes.
type tlsReloader struct {
	certFile, keyFile, caFile string
	log                       *slog.Logger

	mu      sync.Mutex
	cfg     *tls.Config
	stamp   []fileStamp
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

func newTLSReloader(certFile, keyFile, caFile string, log *slog.Logger) (*tlsReloader, error) {
	r := &tlsReloader{certFile: certFile, keyFile: keyFile, caFile: caFile, log: log}
	if err := r.load(); err != nil {
		return nil, err
	}
	return r, nil
}

// files are the files the configuration is built from.
func (r *tlsReloader) files() []string {
	if r.caFile == "" {
		return []string{r.certFile, r.keyFile}
	}
	return []string{r.certFile, r.keyFile, r.caFile}
}

// load reads the files and builds the configuration; r.mu is held, or r
// is not shared yet. Errors name the files, never their contents.
func (r *tlsReloader) load() error {
	stamp := make([]fileStamp, 0, 3)
	for _, path := range r.files() {
		s, err := stampOf(path)
		if err != nil {
			return fmt.Errorf("TLS: %w", err)
		}
		stamp = append(stamp, s)
	}
	cert, err := tls.LoadX509KeyPair(r.certFile, r.keyFile)
	if err != nil {
		return fmt.Errorf("TLS certificate %s and key %s: %w", r.certFile, r.keyFile, err)
	}
	cfg := &tls.Config{
		MinVersion:   tls.VersionTLS12,
		Certificates: []tls.Certificate{cert},
		// The configuration a handshake gets replaces the server's whole,
		// so it must offer HTTP/2 itself, as ServeTLS would have.
		NextProtos: []string{"h2", "http/1.1"},
	}
	if r.caFile != "" {
		pem, err := os.ReadFile(r.caFile)
		if err != nil {
			return fmt.Errorf("--ca_certs: %w", err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return fmt.Errorf("--ca_certs %s: no PEM certificate in it", r.caFile)
		}
		// A session resumed from a ticket is checked against this pool
		// too (crypto/tls checks it at resumption), so one issued before an
		// authority was removed does not get in.
		cfg.ClientCAs = pool
		cfg.ClientAuth = tls.RequireAndVerifyClientCert
	}
	r.cfg, r.stamp = cfg, stamp
	return nil
}

func (r *tlsReloader) config(*tls.ClientHelloInfo) (*tls.Config, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if now := time.Now(); now.Sub(r.checked) >= tlsReloadInterval {
		r.checked = now
		if r.changed() {
			// Files caught half written, or a bad renewal, keep the
			// configuration being served; the next check tries again.
			if err := r.load(); err != nil {
				r.log.Warn("TLS files not reloaded; serving the previous ones", slog.Any("err", err))
			} else {
				r.log.Info("TLS files reloaded", slog.String("certfile", r.certFile), slog.String("ca_certs", r.caFile))
			}
		}
	}
	return r.cfg, nil
}

func (r *tlsReloader) changed() bool {
	for i, path := range r.files() {
		s, err := stampOf(path)
		if err != nil || s != r.stamp[i] {
			return true
		}
	}
	return false
}
