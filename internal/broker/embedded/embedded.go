// Package embedded runs the embedded broker: an in-process Redis-protocol
// server (miniredis) that real Celery workers can join, for a stamen
// started without a broker. stamen reaches it through internal/broker like
// any Redis broker, at the URLs Start returns.
package embedded

import (
	"crypto/rand"
	"fmt"
	"log/slog"
	"net"
	"net/url"
	"time"

	"github.com/alicebob/miniredis/v2"

	"github.com/stamen-dev/stamen/internal/redact"
)

// DefaultAddr is where the embedded broker listens unless told otherwise.
const DefaultAddr = "127.0.0.1:6380"

// Config is what Start needs.
type Config struct {
	// Addr is where the broker listens (empty: DefaultAddr).
	Addr string
	// Password is the password the broker requires of every client. Empty
	// generates one; a non-loopback Addr needs it given.
	Password string
	// ResultBackend is the operator's result backend URL; empty keeps the
	// results in the embedded broker too (its database 1).
	ResultBackend string
	Logger        *slog.Logger
}

// Broker is a running embedded broker. Close stops it.
type Broker struct {
	// BrokerURL is the URL workers (and stamen) use, with the password.
	BrokerURL string
	// ResultBackendURL is Config.ResultBackend, or when that is empty the
	// embedded broker's database 1, with the password.
	ResultBackendURL string

	m    *miniredis.Miniredis
	stop chan struct{}
}

// Start runs the embedded broker. It requires a password: whoever reaches
// it could otherwise shut workers down or forge events, whatever stamen's
// roles say.
func Start(cfg Config) (*Broker, error) {
	log := cfg.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	addr := cfg.Addr
	if addr == "" {
		addr = DefaultAddr
	}
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return nil, fmt.Errorf("invalid embedded broker address %q: %w", addr, err)
	}
	password := cfg.Password
	if password == "" {
		// Generated, it reaches the operator only through the log line
		// below: fine on loopback, not for workers on other hosts.
		if !IsLoopback(host) {
			return nil, fmt.Errorf("refusing to start the embedded broker on the non-loopback address %s without a password: "+
				"give one with --embedded_broker_password (STAMEN_EMBEDDED_BROKER_PASSWORD), or listen on 127.0.0.1", addr)
		}
		password = rand.Text()
	}
	m := miniredis.NewMiniRedis()
	m.RequireAuth(password)
	if err := m.StartAddr(addr); err != nil {
		return nil, fmt.Errorf("start the embedded broker on %s: %w", addr, err)
	}
	workerURL := func(db string) string {
		u := url.URL{Scheme: "redis", User: url.UserPassword("", password), Host: m.Addr(), Path: "/" + db}
		return u.String()
	}
	b := &Broker{BrokerURL: workerURL("0"), ResultBackendURL: cfg.ResultBackend, m: m, stop: make(chan struct{})}
	shownBackend := redact.URL(b.ResultBackendURL) // the operator's own, maybe with a password
	if b.ResultBackendURL == "" {
		b.ResultBackendURL = workerURL("1")
		shownBackend = b.ResultBackendURL
	}
	go b.passTime()
	if cfg.Password != "" {
		// The operator chose it and knows it, and gave it through the
		// environment or a flag to keep it out of sight: like every
		// secret stamen is given, it is masked.
		log.Info("embedded broker started: point Celery workers at it (with the password you gave)",
			slog.String("broker_url", redact.URL(b.BrokerURL)),
			slog.String("result_backend", redact.URL(shownBackend)))
		return b, nil
	}
	// The one place a generated password is shown, on purpose: this line
	// is how the operator learns the URLs to give the workers.
	log.Info("embedded broker started: point Celery workers at it",
		slog.Any("broker_url", redact.Disclosed(b.BrokerURL)),
		slog.Any("result_backend", redact.Disclosed(shownBackend)))
	return b, nil
}

// passTime tells miniredis, every second, that a second passed: it keeps
// TTLs frozen unless told, and result expiry and kombu's unacked_mutex
// rely on them lapsing.
func (b *Broker) passTime() {
	t := time.NewTicker(time.Second)
	defer t.Stop()
	for {
		select {
		case <-t.C:
			b.m.FastForward(time.Second)
		case <-b.stop:
			return
		}
	}
}

// Close stops the broker. It is called once.
func (b *Broker) Close() error {
	close(b.stop)
	b.m.Close()
	return nil
}

// IsLoopback reports whether host (an address without port, or empty for
// all interfaces) is a loopback address.
func IsLoopback(host string) bool {
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}
