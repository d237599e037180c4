package testcluster

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"sync"
	"testing"
	"time"
)

// Proxy is a TCP proxy from a loopback port to a server, for tests that
// take the broker away from stamen alone: workers connect to the server
// directly and keep running, and the shared server stays up for the other
// tests. The port stays the same across Cut and Start, so that a client
// reconnecting to the address it was given finds the server again.
type Proxy struct {
	// Port is where the proxy listens on 127.0.0.1.
	Port   int
	target string
	t      testing.TB
	// tls, when set, makes the proxy a TLS terminator (StartTLSProxy).
	tls *tls.Config

	mu    sync.Mutex
	ln    net.Listener
	conns map[net.Conn]struct{}
	// stalled, while not nil, holds every byte in flight (and every new
	// connection) until it is closed by Resume or Cut.
	stalled chan struct{}
	wg      sync.WaitGroup
}

// StartProxy listens on a free loopback port and forwards each connection
// to target (host:port); a cleanup registered on t cuts it.
func StartProxy(t testing.TB, target string) *Proxy {
	t.Helper()
	p := &Proxy{Port: FreePort(t), target: target, t: t, conns: map[net.Conn]struct{}{}}
	p.Start()
	t.Cleanup(p.Cut)
	return p
}

// StartTLSProxy is StartProxy for a TLS terminator: clients speak TLS to
// it, presenting server's certificate and requiring theirs to be signed by
// server's CA (as RabbitMQ's ssl_options with fail_if_no_peer_cert does),
// and it forwards the plain bytes to target. A client it refuses has its
// handshake failed and reaches nothing.
func StartTLSProxy(t testing.TB, target string, server CertFiles) *Proxy {
	t.Helper()
	p := &Proxy{Port: FreePort(t), target: target, t: t, conns: map[net.Conn]struct{}{}, tls: serverTLS(t, server)}
	p.Start()
	t.Cleanup(p.Cut)
	return p
}

// Addr is the proxy's host:port.
func (p *Proxy) Addr() string { return fmt.Sprintf("127.0.0.1:%d", p.Port) }

// Start listens again on the proxy's port after a Cut. Go sets
// SO_REUSEADDR, so the connections the cut left in TIME_WAIT do not keep
// the port; a port taken by someone else meanwhile fails the test.
func (p *Proxy) Start() {
	p.t.Helper()
	var ln net.Listener
	var err error
	// The old listener's socket may take a moment to be released.
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		if ln, err = net.Listen("tcp", p.Addr()); err == nil || time.Now().After(deadline) {
			break
		}
	}
	if err != nil {
		p.t.Fatalf("testcluster: proxy listen on %s: %v", p.Addr(), err)
	}
	if p.tls != nil {
		ln = tls.NewListener(ln, p.tls)
	}
	p.mu.Lock()
	p.ln = ln
	p.mu.Unlock()
	p.wg.Go(func() { p.accept(ln) })
}

func (p *Proxy) accept(ln net.Listener) {
	for {
		c, err := ln.Accept()
		if err != nil {
			return // closed by Cut
		}
		if !p.track(c) {
			_ = c.Close()
			return
		}
		p.wg.Go(func() { p.serve(c) })
	}
}

// track registers a connection, unless the listener it came from has been
// closed meanwhile.
func (p *Proxy) track(c net.Conn) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.ln == nil {
		return false
	}
	p.conns[c] = struct{}{}
	return true
}

func (p *Proxy) untrack(cs ...net.Conn) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, c := range cs {
		delete(p.conns, c)
		_ = c.Close()
	}
}

// serve connects the client to the target and copies both ways until
// either side closes or Cut closes both.
func (p *Proxy) serve(client net.Conn) {
	p.hold()
	if tc, ok := client.(*tls.Conn); ok {
		// The client is checked before anything reaches the target.
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		err := tc.HandshakeContext(ctx)
		cancel()
		if err != nil {
			p.untrack(client)
			return
		}
	}
	server, err := net.DialTimeout("tcp", p.target, 5*time.Second)
	if err != nil || !p.track(server) {
		if server != nil {
			_ = server.Close()
		}
		p.untrack(client)
		return
	}
	var wg sync.WaitGroup
	pipe := func(dst, src net.Conn) {
		defer wg.Done()
		buf := make([]byte, 32*1024)
		for {
			n, err := src.Read(buf)
			if n > 0 {
				p.hold()
				if _, werr := dst.Write(buf[:n]); werr != nil {
					break
				}
			}
			if err != nil {
				break
			}
		}
		// Ending one direction ends the connection, as a broker or a
		// client going away would.
		p.untrack(client, server)
	}
	wg.Add(2)
	go pipe(server, client)
	go pipe(client, server)
	wg.Wait()
}

// hold waits while the proxy is stalled.
func (p *Proxy) hold() {
	p.mu.Lock()
	s := p.stalled
	p.mu.Unlock()
	if s != nil {
		<-s
	}
}

// Stall stops forwarding while keeping every connection open, as a
// network path that silently drops packets would: clients see no error,
// only silence, until Resume or Cut.
func (p *Proxy) Stall() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.stalled == nil {
		p.stalled = make(chan struct{})
	}
}

// Resume forwards again what Stall held.
func (p *Proxy) Resume() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.stalled != nil {
		close(p.stalled)
		p.stalled = nil
	}
}

// Cut closes the listener and every connection through the proxy, and
// returns once nothing of it runs any more: clients see their connection
// reset and new connections refused until Start.
func (p *Proxy) Cut() {
	p.mu.Lock()
	ln := p.ln
	p.ln = nil
	for c := range p.conns {
		_ = c.Close()
	}
	p.conns = map[net.Conn]struct{}{}
	// Only now that every connection is closed: what Stall held must not
	// get through.
	if p.stalled != nil {
		close(p.stalled)
		p.stalled = nil
	}
	p.mu.Unlock()
	if ln != nil {
		if err := ln.Close(); err != nil && !errors.Is(err, net.ErrClosed) {
			p.t.Logf("testcluster: proxy close: %v", err)
		}
	}
	p.wg.Wait()
}

// Connections is how many connections (both sides counted) go through
// the proxy right now.
func (p *Proxy) Connections() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.conns)
}
