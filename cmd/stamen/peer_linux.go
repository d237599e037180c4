package main

import (
	"fmt"
	"net"

	"golang.org/x/sys/unix"
)

// unixPeer names the process at the other end of c by the credentials the
// kernel recorded when it connected (SO_PEERCRED): a client cannot forge
// them, unlike anything it sends.
func unixPeer(c *net.UnixConn) string {
	raw, err := c.SyscallConn()
	if err != nil {
		return "unix"
	}
	var cred *unix.Ucred
	var credErr error
	if err := raw.Control(func(fd uintptr) {
		cred, credErr = unix.GetsockoptUcred(int(fd), unix.SOL_SOCKET, unix.SO_PEERCRED)
	}); err != nil || credErr != nil {
		return "unix"
	}
	return fmt.Sprintf("unix:uid=%d,pid=%d", cred.Uid, cred.Pid)
}
