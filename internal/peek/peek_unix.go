//go:build unix

package peek

import (
	"crypto/tls"
	"net"
	"syscall"
)

// Of looks at nc's socket (under TLS, the connection beneath it) with
// MSG_PEEK|MSG_DONTWAIT.
func Of(nc net.Conn) State {
	if tc, ok := nc.(*tls.Conn); ok {
		nc = tc.NetConn()
	}
	sc, ok := nc.(syscall.Conn)
	if !ok {
		return Unknown
	}
	rc, err := sc.SyscallConn()
	if err != nil {
		return Unknown
	}
	s := Unknown
	var b [1]byte
	err = rc.Read(func(fd uintptr) bool {
		n, _, err := syscall.Recvfrom(int(fd), b[:], syscall.MSG_PEEK|syscall.MSG_DONTWAIT)
		for err == syscall.EINTR {
			n, _, err = syscall.Recvfrom(int(fd), b[:], syscall.MSG_PEEK|syscall.MSG_DONTWAIT)
		}
		// Returning true: never wait for input.
		switch {
		case err == syscall.EAGAIN || err == syscall.EWOULDBLOCK:
			s = Nothing
		case err != nil:
			s = Failed
		case n == 0:
			s = EOF
		default:
			s = Data
		}
		return true
	})
	if err != nil {
		return Failed
	}
	return s
}
