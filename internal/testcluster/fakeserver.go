package testcluster

import (
	"net"
	"testing"
)

// FakeServer listens on a free loopback port until the test ends and runs
// serve on each connection it accepts, in a goroutine of its own, closing
// the connection when serve returns. It returns the host:port, for tests
// that need a server answering as they script it (a Redis that quotes its
// arguments back, an echo).
func FakeServer(t testing.TB, serve func(c net.Conn)) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	return ServeFake(t, ln, serve)
}

// ServeFake is FakeServer on a listener of the caller's (a TLS one, say).
func ServeFake(t testing.TB, ln net.Listener, serve func(c net.Conn)) string {
	t.Helper()
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return // closed by the cleanup
			}
			go func() {
				defer c.Close()
				serve(c)
			}()
		}
	}()
	return ln.Addr().String()
}
