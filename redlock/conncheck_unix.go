//go:build unix

package redlock

import (
	"crypto/tls"
	"net"
	"syscall"
)

// connAlive peeks at a connection without blocking: a master that closed
// it (its idle timeout, a restart) left an end of file, or an error reply,
// to read. Such a connection is replaced before a batch is sent on it.
func connAlive(c net.Conn) bool {
	if tc, ok := c.(*tls.Conn); ok {
		c = tc.NetConn()
	}
	sc, ok := c.(syscall.Conn)
	if !ok {
		return true
	}
	rc, err := sc.SyscallConn()
	if err != nil {
		return true
	}
	alive := true
	var b [1]byte
	err = rc.Read(func(fd uintptr) bool {
		_, _, err := syscall.Recvfrom(int(fd), b[:], syscall.MSG_PEEK|syscall.MSG_DONTWAIT)
		switch {
		case err == syscall.EAGAIN || err == syscall.EWOULDBLOCK:
			// Nothing to read: as it should be between batches.
		case err == syscall.EINTR:
			return false // try again
		default:
			alive = false // end of file, data nobody asked for, or an error
		}
		return true
	})
	return alive && err == nil
}
