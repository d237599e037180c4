package redis

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"sync/atomic"
	"time"

	goredis "github.com/redis/go-redis/v9"
)

// listOptions turns the options of a failover list (Celery's
// "redis://h1;redis://h2") into one client's: its connections are dialled
// by a failoverDialer, so a server lost while stamen runs is replaced by the
// next one, as kombu's round-robin failover does, and not only at start.
// One client authenticates and selects the database the same way on every
// server, so the list's URLs must share them; a list that does not is
// refused rather than half used.
func listOptions(opts []*goredis.Options) (*goredis.Options, error) {
	first := opts[0]
	if len(opts) == 1 {
		return first, nil
	}
	d := &failoverDialer{timeout: first.DialTimeout, tls: first.TLSConfig}
	for i, o := range opts {
		if o.Username != first.Username || o.Password != first.Password || o.DB != first.DB ||
			(o.TLSConfig == nil) != (first.TLSConfig == nil) {
			return nil, fmt.Errorf("redis failover list: URL %d differs from the first in user, password, database or TLS; they must be the same servers' replicas", i+1)
		}
		d.addrs = append(d.addrs, o.Addr)
	}
	opt := *first
	opt.Addr = d.addrs[0]
	opt.Dialer = d.dial
	return &opt, nil
}

// failoverDialer dials the servers of a failover list in turn, starting
// from the one that answered last.
type failoverDialer struct {
	addrs   []string
	timeout time.Duration
	tls     *tls.Config
	current atomic.Int32
}

func (d *failoverDialer) dial(ctx context.Context, network, _ string) (net.Conn, error) {
	start := int(d.current.Load())
	var errs []error
	for i := range d.addrs {
		j := (start + i) % len(d.addrs)
		c, err := d.dialOne(ctx, network, d.addrs[j])
		if err == nil {
			d.current.Store(int32(j))
			return c, nil
		}
		errs = append(errs, err)
		if ctx.Err() != nil {
			break
		}
	}
	return nil, errors.Join(errs...)
}

func (d *failoverDialer) dialOne(ctx context.Context, network, addr string) (net.Conn, error) {
	nd := &net.Dialer{Timeout: d.timeout, KeepAlive: 5 * time.Minute}
	if d.tls == nil {
		return nd.DialContext(ctx, network, addr)
	}
	cfg := d.tls.Clone()
	if cfg.ServerName == "" {
		if host, _, err := net.SplitHostPort(addr); err == nil {
			cfg.ServerName = host
		}
	}
	return (&tls.Dialer{NetDialer: nd, Config: cfg}).DialContext(ctx, network, addr)
}
