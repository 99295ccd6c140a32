package proxy

import "syscall"

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
