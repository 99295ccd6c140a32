package proxy

import (
	"crypto/tls"
	"net"
	"syscall"
)

// peerClosed reports whether the client has closed its side of the
// connection: a read would return end of file now. It looks without
// taking anything (MSG_PEEK) and without waiting. Input the client has
// already sent counts as alive.
func (c *clientConn) peerClosed() bool {
	sc, ok := c.Conn.(syscall.Conn)
	if !ok {
		return false // TLS: not known without reading
	}
	rc, err := sc.SyscallConn()
	if err != nil {
		return false
	}
	closed := false
	var b [1]byte
	_ = rc.Read(func(fd uintptr) bool {
		n, _, err := syscall.Recvfrom(int(fd), b[:], syscall.MSG_PEEK|syscall.MSG_DONTWAIT)
		closed = n == 0 && err == nil
		return true
	})
	return closed
}

// idleConnBroken reports whether a backend connection with nothing in
// flight has something to read: an end of file (the server closed it, as
// Redis does with its timeout setting) or bytes nobody asked for. It looks
// without taking anything and without waiting.
func idleConnBroken(nc net.Conn) bool {
	if tc, ok := nc.(*tls.Conn); ok {
		nc = tc.NetConn()
	}
	sc, ok := nc.(syscall.Conn)
	if !ok {
		return false
	}
	rc, err := sc.SyscallConn()
	if err != nil {
		return false
	}
	broken := false
	var b [1]byte
	_ = rc.Read(func(fd uintptr) bool {
		_, _, err := syscall.Recvfrom(int(fd), b[:], syscall.MSG_PEEK|syscall.MSG_DONTWAIT)
		broken = err != syscall.EAGAIN && err != syscall.EWOULDBLOCK && err != syscall.EINTR
		return true
	})
	return broken
}
