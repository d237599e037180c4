package redis

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/url"
	"strings"
	"time"

	goredis "github.com/redis/go-redis/v9"
	"github.com/redis/go-redis/v9/maintnotifications"

	"github.com/stamen-dev/stamen/internal/brokertls"
	"github.com/stamen-dev/stamen/internal/redact"
)

// DefaultOpTimeout bounds a single Redis call when Config.OpTimeout is 0.
const DefaultOpTimeout = 5 * time.Second

// Config says where the broker and the result backend are.
type Config struct {
	// BrokerURL is redis://[[user]:password@]host[:port][/db], or rediss://
	// for TLS. Celery's ssl_cert_reqs, ssl_ca_certs, ssl_certfile and
	// ssl_keyfile query parameters (and redis-py's ssl_check_hostname) are
	// honoured; others are ignored.
	BrokerURL string
	// ResultBackendURL is the Redis result backend in the same form; it may
	// be the broker's server with another db. Empty means no result backend.
	ResultBackendURL string
	// TLS is Celery's broker_use_ssl, ResultTLS its redis_backend_use_ssl:
	// when set, every URL of theirs is dialled over TLS, redis:// too (as
	// kombu does), and their keys win over the URL's ssl_* parameters.
	TLS, ResultTLS *brokertls.Settings
	// Logger receives connection trouble; nil discards it.
	Logger *slog.Logger
	// OpTimeout bounds every Redis call that does not wait on purpose;
	// 0 means DefaultOpTimeout.
	OpTimeout time.Duration
	// Transport are the broker's transport options (Celery's
	// broker_transport_options); ResultTransport the result backend's
	// (result_backend_transport_options).
	Transport, ResultTransport TransportOptions
	// NoEnableEvents keeps ConsumeEvents from telling the workers to send
	// task events (enable_events, at every subscription and every 5 s):
	// Flower's --enable_events=false.
	NoEnableEvents bool
}

// newClient connects to a redis://, rediss:// or sentinel:// URL (a
// sentinel:// URL may list several sentinels, separated by ";"), and
// returns the database number it uses. A ";"-separated list of redis://
// URLs is Celery's failover list: each connection goes to the first server
// that accepts it, from the one in use on (listOptions).
//
// A sentinel:// URL's failover options are returned too (nil for another),
// for New's check of the master name.
func newClient(ctx context.Context, raw string, topts TransportOptions, useSSL *brokertls.Settings, opTimeout time.Duration, log *slog.Logger) (*goredis.Client, int, *goredis.FailoverOptions, error) {
	if !strings.HasPrefix(raw, "sentinel://") {
		var opts []*goredis.Options
		for part := range strings.SplitSeq(raw, ";") {
			if part = strings.TrimSpace(part); part == "" {
				continue
			}
			opt, err := options(part, useSSL, opTimeout, log)
			if err != nil {
				return nil, 0, nil, err
			}
			opts = append(opts, opt)
		}
		if len(opts) == 0 {
			return nil, 0, nil, fmt.Errorf("invalid Redis URL %s: empty", redact.URL(raw))
		}
		opt, err := listOptions(opts)
		if err != nil {
			return nil, 0, nil, err
		}
		warnUnverified(opt.TLSConfig, raw, log)
		return goredis.NewClient(opt), opt.DB, nil, nil
	}
	fopt, err := failoverOptions(raw, topts, useSSL, opTimeout, log)
	if err != nil {
		return nil, 0, nil, err
	}
	warnUnverified(fopt.TLSConfig, raw, log)
	return goredis.NewFailoverClient(fopt), fopt.DB, fopt, nil
}

// warnUnverified says once per client that its servers' certificates are
// not checked (cert_reqs CERT_NONE), as Celery warns of it.
func warnUnverified(cfg *tls.Config, raw string, log *slog.Logger) {
	if cfg != nil && cfg.InsecureSkipVerify && cfg.VerifyConnection == nil {
		log.Warn("TLS without verifying the server's certificate (cert_reqs CERT_NONE): anyone on the path can impersonate Redis",
			slog.String("url", redact.URL(raw)))
	}
}

// unknownMaster asks each sentinel of f for f.MasterName's master and
// returns the addresses of those that answered that they know no such
// master, none when any sentinel knows it or none answered (an outage,
// which is retried). The sentinels are asked one at a time, each within
// opTimeout.
func unknownMaster(ctx context.Context, f *goredis.FailoverOptions, opTimeout time.Duration) []string {
	var unknown []string
	for _, addr := range f.SentinelAddrs {
		c := goredis.NewSentinelClient(&goredis.Options{Addr: addr, Username: f.SentinelUsername, Password: f.SentinelPassword,
			DialTimeout: opTimeout, ReadTimeout: opTimeout, WriteTimeout: opTimeout, MaxRetries: -1,
			Protocol: f.Protocol, DisableIdentity: true})
		octx, cancel := context.WithTimeout(ctx, opTimeout)
		_, err := c.GetMasterAddrByName(octx, f.MasterName).Result()
		cancel()
		_ = c.Close()
		switch {
		case err == nil:
			return nil
		case errors.Is(err, goredis.Nil):
			unknown = append(unknown, addr)
		}
	}
	return unknown
}

// defaultSentinelPort is the port of a sentinel:// URL that names none.
const defaultSentinelPort = "26379"

// failoverOptions reads Celery's sentinel URLs,
// sentinel://[[user]:password@]host[:port][/db][;sentinel://...], as kombu
// and Celery's result backend read them: every URL names a sentinel, the
// first URL's password and db are the master's, master_name comes from the
// transport options and the sentinels' own credentials from their
// sentinel_kwargs.
func failoverOptions(raw string, topts TransportOptions, useSSL *brokertls.Settings, opTimeout time.Duration, log *slog.Logger) (*goredis.FailoverOptions, error) {
	if topts.MasterName == "" {
		return nil, fmt.Errorf("sentinel URL %s: master_name missing from the transport options", redact.URL(raw))
	}
	var addrs []string
	var master *url.URL
	for part := range strings.SplitSeq(raw, ";") {
		part = strings.TrimSpace(part)
		if part == "" {
			continue
		}
		u, err := url.Parse(part)
		if err != nil || u.Scheme != "sentinel" || u.Hostname() == "" {
			return nil, fmt.Errorf("invalid sentinel URL %s: want sentinel://[:password@]host[:port][/db], separated by ;", redact.URL(raw))
		}
		port := u.Port()
		if port == "" {
			port = defaultSentinelPort
		}
		addrs = append(addrs, net.JoinHostPort(u.Hostname(), port))
		if master == nil {
			master = u
		}
		for k := range u.Query() {
			log.Debug("ignoring sentinel URL parameter", slog.String("param", k))
		}
	}
	if master == nil {
		return nil, fmt.Errorf("invalid sentinel URL %s: no sentinel", redact.URL(raw))
	}
	// The master's connection is tuned like any other: parse the first URL
	// as a redis:// one for its credentials and db.
	bare := *master
	bare.Scheme, bare.Host, bare.RawQuery, bare.Fragment = "redis", "sentinel", "", ""
	// broker_use_ssl applies to the master (kombu's
	// SentinelManagedSSLConnection), not to the sentinels.
	opt, err := options(bare.String(), useSSL, opTimeout, log)
	if err != nil {
		return nil, fmt.Errorf("invalid sentinel URL %s: %w", redact.URL(raw), errors.Unwrap(err))
	}
	f := &goredis.FailoverOptions{
		MasterName:    topts.MasterName,
		SentinelAddrs: addrs,

		Username: opt.Username,
		Password: opt.Password,
		DB:       opt.DB,

		DialTimeout:           opt.DialTimeout,
		ReadTimeout:           opt.ReadTimeout,
		WriteTimeout:          opt.WriteTimeout,
		PoolTimeout:           opt.PoolTimeout,
		ContextTimeoutEnabled: opt.ContextTimeoutEnabled,
		MaxRetries:            opt.MaxRetries,
		DialerRetries:         opt.DialerRetries,
		Protocol:              opt.Protocol,
		DisableIdentity:       opt.DisableIdentity,
		ClientName:            opt.ClientName,
		TLSConfig:             opt.TLSConfig,
	}
	if k := topts.SentinelKwargs; k != nil {
		f.SentinelUsername, f.SentinelPassword = k.Username, k.Password
	}
	return f, nil
}

// options turns a Celery-style Redis URL into go-redis options with every
// timeout bounded by opTimeout. useSSL (broker_use_ssl), when set, turns
// TLS on whatever the scheme, as kombu does.
func options(raw string, useSSL *brokertls.Settings, opTimeout time.Duration, log *slog.Logger) (*goredis.Options, error) {
	u, err := url.Parse(raw)
	if err != nil {
		return nil, fmt.Errorf("invalid Redis URL %s: %w", redact.URL(raw), redact.ParseError(err))
	}
	if u.Scheme != "redis" && u.Scheme != "rediss" {
		return nil, fmt.Errorf("invalid Redis URL %s: scheme must be redis or rediss", redact.URL(raw))
	}
	// Celery URLs carry kombu and redis-py parameters that go-redis rejects;
	// take the ones that matter here and hand go-redis the bare address.
	query := u.Query()
	u.RawQuery = ""
	u.Fragment = ""
	opt, err := goredis.ParseURL(u.String())
	if err != nil {
		return nil, fmt.Errorf("invalid Redis URL %s: %w", redact.URL(raw), err)
	}
	if opt.TLSConfig != nil || useSSL != nil {
		cfg, err := tlsConfig(query, useSSL)
		if err != nil {
			return nil, fmt.Errorf("invalid Redis URL %s: %w", redact.URL(raw), err)
		}
		opt.TLSConfig = cfg
	}
	for k := range query {
		if !strings.HasPrefix(k, "ssl_") {
			log.Debug("ignoring Redis URL parameter", slog.String("param", k))
		}
	}

	opt.DialTimeout = opTimeout
	opt.ReadTimeout = opTimeout
	opt.WriteTimeout = opTimeout
	opt.PoolTimeout = opTimeout
	// Let each call's context deadline bound its socket I/O, so a call
	// never outlives its caller.
	opt.ContextTimeoutEnabled = true
	// No transparent retries: a retried LPUSH whose reply was lost would
	// run the task twice. Dead pooled connections are weeded out on
	// checkout, and callers see ErrUnavailable for the rest.
	opt.MaxRetries = -1
	// Two dial attempts: ride out a blip, but answer 503 quickly when Redis
	// is down instead of after go-redis's default five.
	opt.DialerRetries = 2
	// RESP2 like redis-py: nothing here needs RESP3, and RESP2 works with
	// every Redis Celery supports and with the embedded miniredis broker.
	opt.Protocol = 2
	opt.DisableIdentity = true
	// Named connections are easy to find in CLIENT LIST.
	opt.ClientName = "stamen"
	opt.MaintNotificationsConfig = &maintnotifications.Config{Mode: maintnotifications.ModeDisabled}
	return opt, nil
}

// tlsConfig is the TLS configuration of one URL: its ssl_* parameters
// under broker_use_ssl's keys. It names no server, so that each dial (of a
// failover list too) checks the host it reaches, unless server_hostname
// says otherwise.
func tlsConfig(query url.Values, useSSL *brokertls.Settings) (*tls.Config, error) {
	s, err := brokertls.FromQuery(query)
	if err != nil {
		return nil, err
	}
	if useSSL != nil {
		s = useSSL.Over(s)
	}
	return s.Config()
}
