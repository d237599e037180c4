package testcluster

import (
	"bufio"
	"errors"
	"net"
	"os"
	"testing"
	"time"
)

// echoServer answers every line with the same line, until the test ends.
func echoServer(t *testing.T) string {
	t.Helper()
	return FakeServer(t, func(c net.Conn) {
		r := bufio.NewReader(c)
		for {
			line, err := r.ReadBytes('\n')
			if err != nil {
				return
			}
			if _, err := c.Write(line); err != nil {
				return
			}
		}
	})
}

// roundTrip sends a line and waits at most d for it to come back.
func roundTrip(c net.Conn, r *bufio.Reader, d time.Duration) (string, error) {
	if _, err := c.Write([]byte("ping\n")); err != nil {
		return "", err
	}
	_ = c.SetReadDeadline(time.Now().Add(d))
	defer c.SetReadDeadline(time.Time{})
	line, err := r.ReadString('\n')
	return line, err
}

func TestProxy(t *testing.T) {
	p := StartProxy(t, echoServer(t))
	dial := func() (net.Conn, *bufio.Reader) {
		t.Helper()
		c, err := net.DialTimeout("tcp", p.Addr(), time.Second)
		if err != nil {
			t.Fatalf("dial the proxy: %v", err)
		}
		t.Cleanup(func() { c.Close() })
		return c, bufio.NewReader(c)
	}

	c, r := dial()
	if got, err := roundTrip(c, r, 2*time.Second); err != nil || got != "ping\n" {
		t.Fatalf("through the proxy: %q %v", got, err)
	}
	if n := p.Connections(); n != 2 {
		t.Errorf("%d connections tracked, want 2 (client and server side)", n)
	}

	// A stall is silence, not an error.
	p.Stall()
	if _, err := roundTrip(c, r, 300*time.Millisecond); !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("stalled: %v, want a read timeout", err)
	}
	p.Resume()
	if got, err := r.ReadString('\n'); err != nil || got != "ping\n" {
		t.Fatalf("after resume, the held line: %q %v", got, err)
	}

	// A cut ends the connection and refuses new ones.
	p.Cut()
	if _, err := roundTrip(c, r, 2*time.Second); err == nil || errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("after the cut: %v, want the connection closed", err)
	}
	if c2, err := net.DialTimeout("tcp", p.Addr(), time.Second); err == nil {
		c2.Close()
		t.Fatal("the cut proxy still accepts connections")
	}

	// Back on the same port.
	p.Start()
	c3, r3 := dial()
	if got, err := roundTrip(c3, r3, 2*time.Second); err != nil || got != "ping\n" {
		t.Fatalf("after restart: %q %v", got, err)
	}
}
