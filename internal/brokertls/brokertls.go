// Package brokertls reads Celery's broker_use_ssl (and the Redis result
// backend's redis_backend_use_ssl, and the ssl_* parameters of a rediss://
// URL) and builds the TLS client configuration both brokers dial with.
//
// Celery hands broker_use_ssl to the transport's library untouched, so its
// keys depend on the broker: py-amqp's (ca_certs, certfile, keyfile,
// cert_reqs, server_hostname) for RabbitMQ, redis-py's (ssl_ca_certs,
// ssl_certfile, ssl_keyfile, ssl_cert_reqs, ssl_check_hostname) for Redis.
// Errors name the key and the file, never a file's contents.
package brokertls

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"net"
	"net/url"
	"os"
	"sort"
	"strconv"
	"strings"
	"time"
)

// Kind is the library whose keys a broker_use_ssl is written in.
type Kind int

const (
	// AMQP is py-amqp's keys (RabbitMQ).
	AMQP Kind = iota
	// Redis is redis-py's ssl_* keys (Redis, and the Redis result backend).
	Redis
)

// CertReqs is Python's ssl.VerifyMode as cert_reqs / ssl_cert_reqs give it.
type CertReqs int

const (
	// Unset verifies, as CertRequired: both libraries' default.
	Unset CertReqs = iota
	// CertNone skips verifying the server's certificate.
	CertNone
	// CertOptional verifies the certificate: a TLS client always gets one,
	// and OpenSSL's client checks it under CERT_OPTIONAL as under
	// CERT_REQUIRED.
	CertOptional
	// CertRequired verifies the certificate.
	CertRequired
)

// Settings are what a broker_use_ssl says, whichever library's keys it
// was written in. The zero value is TLS with the system's roots and no
// client certificate.
type Settings struct {
	// CACerts is a PEM file of the authorities the server's certificate
	// must chain to; empty means the system's roots.
	CACerts string
	// CertFile and KeyFile are the client's PEM certificate (chain) and
	// private key; KeyFile empty means the key is in CertFile, as Python's
	// load_cert_chain reads it.
	CertFile, KeyFile string
	CertReqs          CertReqs
	// ServerName is py-amqp's server_hostname: the name the server's
	// certificate must hold (and SNI sends); empty means the URL's host.
	ServerName string
	// NoHostnameCheck is redis-py's ssl_check_hostname=false: the chain is
	// verified, the name in it is not.
	NoHostnameCheck bool
	// Kind is whose keys the settings were written in, for errors to name
	// them as the user wrote them.
	Kind Kind
}

// Verify reports whether the server's certificate is verified.
func (s Settings) Verify() bool { return s.CertReqs != CertNone }

// Over returns s with the fields it leaves empty taken from base: a
// broker_use_ssl key wins over the same ssl_* parameter of the URL, as
// kombu applies broker_use_ssl after the URL's.
func (s Settings) Over(base Settings) Settings {
	if s.CACerts == "" {
		s.CACerts = base.CACerts
	}
	if s.CertFile == "" && s.KeyFile == "" {
		s.CertFile, s.KeyFile = base.CertFile, base.KeyFile
	}
	if s.CertReqs == Unset {
		s.CertReqs = base.CertReqs
	}
	if s.ServerName == "" {
		s.ServerName = base.ServerName
	}
	s.NoHostnameCheck = s.NoHostnameCheck || base.NoHostnameCheck
	return s
}

// keys are the accepted keys of each kind, for parsing and for the error
// that lists them.
var keys = map[Kind][]string{
	AMQP:  {"ca_certs", "certfile", "keyfile", "cert_reqs", "server_hostname"},
	Redis: {"ssl_ca_certs", "ssl_certfile", "ssl_keyfile", "ssl_cert_reqs", "ssl_check_hostname"},
}

// Parse reads a broker_use_ssl JSON object written with kind's keys.
// Unknown keys and values of the wrong type are errors that name the key,
// never the value; "" is no settings (nil).
func Parse(raw string, kind Kind) (*Settings, error) {
	if strings.TrimSpace(raw) == "" {
		return nil, nil
	}
	var m map[string]json.RawMessage
	dec := json.NewDecoder(strings.NewReader(raw))
	if err := dec.Decode(&m); err != nil || m == nil {
		return nil, errors.New("want a JSON object")
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return nil, errors.New("want a single JSON object")
	}
	names := make([]string, 0, len(m))
	for k := range m {
		names = append(names, k)
	}
	sort.Strings(names)
	s := Settings{Kind: kind}
	for _, k := range names {
		if !accepted(kind, k) {
			return nil, unknownKey(kind, k)
		}
		v := m[k]
		var err error
		switch k {
		case "ca_certs", "ssl_ca_certs":
			err = path(v, &s.CACerts)
		case "certfile", "ssl_certfile":
			err = path(v, &s.CertFile)
		case "keyfile", "ssl_keyfile":
			err = path(v, &s.KeyFile)
		case "cert_reqs", "ssl_cert_reqs":
			s.CertReqs, err = certReqs(v)
		case "server_hostname":
			// null is kombu's "the URL's host", which is the default.
			if string(v) != "null" {
				err = json.Unmarshal(v, &s.ServerName)
				if err == nil && s.ServerName == "" {
					err = errors.New("empty")
				}
			}
		case "ssl_check_hostname":
			var check bool
			if json.Unmarshal(v, &check) != nil {
				err = errors.New("want true or false")
			}
			s.NoHostnameCheck = !check
		}
		if err != nil {
			return nil, fmt.Errorf("%s: %w", k, err)
		}
	}
	if s.KeyFile != "" && s.CertFile == "" {
		return nil, fmt.Errorf("%s without %s", keyName(kind, "keyfile"), keyName(kind, "certfile"))
	}
	return &s, nil
}

func accepted(kind Kind, k string) bool {
	for _, a := range keys[kind] {
		if a == k {
			return true
		}
	}
	return false
}

// unknownKey explains a key stamen does not take, pointing at the other
// library's spelling when it is one.
func unknownKey(kind Kind, k string) error {
	other, hint := Redis, "a Redis broker's (redis-py's) key: RabbitMQ takes py-amqp's"
	if kind == Redis {
		other, hint = AMQP, "a RabbitMQ broker's (py-amqp's) key: Redis takes redis-py's"
	}
	if accepted(other, k) {
		return fmt.Errorf("%q is %s: %s", k, hint, strings.Join(keys[kind], ", "))
	}
	return fmt.Errorf("unknown key %q (stamen takes %s)", k, strings.Join(keys[kind], ", "))
}

func keyName(kind Kind, k string) string {
	if kind == Redis {
		return "ssl_" + k
	}
	return k
}

func path(v json.RawMessage, p *string) error {
	if json.Unmarshal(v, p) != nil || *p == "" {
		return errors.New("want a file name")
	}
	return nil
}

// certReqs reads cert_reqs as Celery users can write it in JSON: the ssl
// module's constant names, redis-py's and Celery's lower-case names, or
// the constants' values (json.dumps(ssl.CERT_REQUIRED) is 2).
func certReqs(v json.RawMessage) (CertReqs, error) {
	var s string
	if json.Unmarshal(v, &s) != nil {
		var n int
		if json.Unmarshal(v, &n) != nil {
			return Unset, errors.New("want CERT_REQUIRED, CERT_OPTIONAL or CERT_NONE")
		}
		s = strconv.Itoa(n)
	}
	return ParseCertReqs(s)
}

// ParseCertReqs reads a cert_reqs name: CERT_NONE, CERT_OPTIONAL,
// CERT_REQUIRED in any case, redis-py's none, optional, required, or the
// ssl module's values 0, 1, 2.
func ParseCertReqs(s string) (CertReqs, error) {
	switch strings.ToLower(strings.TrimSpace(s)) {
	case "cert_required", "required", "2":
		return CertRequired, nil
	case "cert_optional", "optional", "1":
		return CertOptional, nil
	case "cert_none", "none", "0":
		return CertNone, nil
	}
	return Unset, errors.New("want CERT_REQUIRED, CERT_OPTIONAL or CERT_NONE")
}

// FromQuery reads a rediss:// URL's ssl_* parameters (Celery's
// ssl_cert_reqs, ssl_ca_certs, ssl_certfile, ssl_keyfile, and redis-py's
// ssl_check_hostname). Other parameters are left to the caller.
func FromQuery(q url.Values) (Settings, error) {
	s := Settings{Kind: Redis}
	if v := q.Get("ssl_cert_reqs"); v != "" {
		r, err := ParseCertReqs(v)
		if err != nil {
			return Settings{}, fmt.Errorf("ssl_cert_reqs: %w", err)
		}
		s.CertReqs = r
	}
	s.CACerts, s.CertFile, s.KeyFile = q.Get("ssl_ca_certs"), q.Get("ssl_certfile"), q.Get("ssl_keyfile")
	if s.KeyFile != "" && s.CertFile == "" {
		return Settings{}, errors.New("ssl_keyfile without ssl_certfile")
	}
	if v := q.Get("ssl_check_hostname"); v != "" {
		check, err := strconv.ParseBool(v)
		if err != nil {
			return Settings{}, errors.New("ssl_check_hostname: want true or false")
		}
		s.NoHostnameCheck = !check
	}
	return s, nil
}

// Config builds the TLS client configuration s describes, reading its
// files. It is the one place either broker's TLS is configured. The
// result names no server: amqp091 and go-redis take the URL's host unless
// ServerName (server_hostname) is set. Each dial must use a Clone, as
// amqp091 writes the host into the configuration it is given.
func (s Settings) Config() (*tls.Config, error) {
	cfg := &tls.Config{MinVersion: tls.VersionTLS12, ServerName: s.ServerName}
	if s.CACerts != "" {
		pool, err := readCAs(s.CACerts)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", keyName(s.Kind, "ca_certs"), err)
		}
		cfg.RootCAs = pool
	}
	if s.CertFile != "" {
		cert, err := readKeyPair(s.CertFile, s.KeyFile)
		if err != nil {
			return nil, fmt.Errorf("%s/%s: %w", keyName(s.Kind, "certfile"), keyName(s.Kind, "keyfile"), err)
		}
		cfg.Certificates = []tls.Certificate{cert}
	}
	switch {
	case !s.Verify():
		cfg.InsecureSkipVerify = true
	case s.NoHostnameCheck:
		// Go verifies the chain and the name together or not at all:
		// skip both, then verify the chain alone.
		roots := cfg.RootCAs
		cfg.InsecureSkipVerify = true
		cfg.VerifyConnection = func(cs tls.ConnectionState) error {
			return verifyChain(cs.PeerCertificates, roots)
		}
	}
	return cfg, nil
}

// verifyChain checks that the server's certificate chains to roots (the
// system's when nil), whatever names it holds.
func verifyChain(certs []*x509.Certificate, roots *x509.CertPool) error {
	if len(certs) == 0 {
		return errors.New("tls: the server sent no certificate")
	}
	inter := x509.NewCertPool()
	for _, c := range certs[1:] {
		inter.AddCert(c)
	}
	_, err := certs[0].Verify(x509.VerifyOptions{Roots: roots, Intermediates: inter})
	return err
}

// readCAs reads a PEM file that must hold at least one certificate.
func readCAs(file string) (*x509.CertPool, error) {
	data, err := os.ReadFile(file)
	if err != nil {
		return nil, err
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(data) {
		return nil, fmt.Errorf("no PEM certificate in %s", file)
	}
	return pool, nil
}

// readKeyPair reads the client's certificate and key (from the certificate
// file when keyFile is empty). Errors say which file is at fault and how,
// never what it holds.
func readKeyPair(certFile, keyFile string) (tls.Certificate, error) {
	certPEM, err := os.ReadFile(certFile)
	if err != nil {
		return tls.Certificate{}, fmt.Errorf("client certificate: %w", err)
	}
	if !hasBlock(certPEM, func(t string) bool { return t == "CERTIFICATE" }) {
		return tls.Certificate{}, fmt.Errorf("client certificate: no PEM certificate in %s", certFile)
	}
	keyPEM, where := certPEM, certFile
	if keyFile != "" {
		if keyPEM, err = os.ReadFile(keyFile); err != nil {
			return tls.Certificate{}, fmt.Errorf("client key: %w", err)
		}
		where = keyFile
	}
	if !hasBlock(keyPEM, func(t string) bool { return t == "PRIVATE KEY" || strings.HasSuffix(t, " PRIVATE KEY") }) {
		return tls.Certificate{}, fmt.Errorf("client key: no PEM private key in %s", where)
	}
	cert, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		// crypto/tls's messages describe the mismatch, not the bytes.
		return tls.Certificate{}, fmt.Errorf("client certificate %s and key %s: %w", certFile, where, err)
	}
	return cert, nil
}

// hasBlock reports whether data holds a PEM block whose type ok accepts.
func hasBlock(data []byte, ok func(string) bool) bool {
	for {
		var b *pem.Block
		b, data = pem.Decode(data)
		if b == nil {
			return false
		}
		if ok(b.Type) {
			return true
		}
		data = bytes.TrimSpace(data)
	}
}

// IsRefusal reports whether err is a TLS handshake that failed for good:
// the server's certificate did not verify against the settings, or the
// server refused the connection with a TLS alert (most often: no client
// certificate, or one it does not trust). Unlike a server that is down,
// trying again cannot help, so stamen stops at start on it.
func IsRefusal(err error) bool { return Refusal(err) != nil }

// Refusal is the TLS failure within err that IsRefusal recognises, for an
// error that says only that (not, say, that the broker is unavailable);
// nil when there is none.
func Refusal(err error) error {
	var verify *tls.CertificateVerificationError
	var authority x509.UnknownAuthorityError
	var invalid x509.CertificateInvalidError
	var hostname x509.HostnameError
	switch {
	case errors.As(err, &verify):
		return verify
	case errors.As(err, &authority):
		return authority
	case errors.As(err, &invalid):
		return invalid
	case errors.As(err, &hostname):
		return hostname
	}
	// crypto/tls reports an alert from the peer so; the alert's own type
	// is unexported.
	var op *net.OpError
	if errors.As(err, &op) && op.Op == "remote error" {
		return op
	}
	return nil
}

// Probe asks the TLS server at addr whether it accepts cfg, for a first
// connection that failed without saying why. Under TLS 1.3 a client learns
// that the server refused its certificate only by reading the alert that
// follows the handshake, and a client that wrote its first command
// meanwhile (PING, AMQP's header) often finds the connection reset
// instead, the alert lost. Probe writes nothing: it completes the
// handshake and waits up to wait for the server's verdict. It returns the
// refusal (IsRefusal), or nil when there was none to see: the server
// accepted, said nothing in time, or could not be reached.
func Probe(ctx context.Context, addr string, cfg *tls.Config, wait time.Duration) error {
	ctx, cancel := context.WithTimeout(ctx, wait)
	defer cancel()
	// tls.Dialer takes the server's name from addr when cfg names none.
	d := tls.Dialer{NetDialer: &net.Dialer{}, Config: cfg}
	c, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		if IsRefusal(err) {
			return err
		}
		return nil
	}
	defer c.Close()
	if dl, ok := ctx.Deadline(); ok {
		_ = c.SetReadDeadline(dl)
	}
	// Redis and RabbitMQ speak only when spoken to: the read ends with
	// the server's alert, or with the deadline when it accepted us.
	if _, err := c.Read(make([]byte, 1)); IsRefusal(err) {
		return err
	}
	return nil
}
