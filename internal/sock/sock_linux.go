//go:build linux

package sock

import (
	"io"
	"net"
	"os"
	"sync"
	"syscall"
	"unsafe"
)

// Conn is a *net.TCPConn whose Read and Write are those of this package;
// everything else is the TCPConn's.
type Conn struct {
	*net.TCPConn
	rc syscall.RawConn

	// A Read's buffer, what it read and its error, under rmu; readFn is
	// read, bound once (a closure per call would be an allocation).
	rmu    sync.Mutex
	rp     []byte
	rn     int
	rerr   error
	readFn func(uintptr) bool
	// The same for Write.
	wmu     sync.Mutex
	wp      []byte
	wn      int
	werr    error
	writeFn func(uintptr) bool
}

// Wrap returns nc as a *Conn when it is a *net.TCPConn, else nc itself.
func Wrap(nc net.Conn) net.Conn {
	tc, ok := nc.(*net.TCPConn)
	if !ok {
		return nc
	}
	rc, err := tc.SyscallConn()
	if err != nil {
		return nc
	}
	c := &Conn{TCPConn: tc, rc: rc}
	c.readFn = c.read
	c.writeFn = c.write
	return c
}

// maxRW is the most one system call reads or writes, as in internal/poll.
const maxRW = 1 << 30

// read is the callback of a Read; false: wait for input, then again.
//
// It always tries before it waits, as net.TCPConn does, even after a read
// that emptied the socket: every RawConn.Read starts by forgetting the
// poller's news of input, so one that waited first could wait for input
// that came since the last read.
func (c *Conn) read(fd uintptr) bool {
	for {
		r, _, e := syscall.RawSyscall(syscall.SYS_READ, fd, uintptr(unsafe.Pointer(unsafe.SliceData(c.rp))), uintptr(len(c.rp)))
		switch e {
		case 0:
			c.rn = int(r)
			return true
		case syscall.EINTR:
			continue
		case syscall.EAGAIN:
			return false
		default:
			c.rerr = os.NewSyscallError("read", e)
			return true
		}
	}
}

// Read reads as net.TCPConn's Read does.
func (c *Conn) Read(p []byte) (int, error) {
	if len(p) == 0 {
		return c.TCPConn.Read(p)
	}
	if len(p) > maxRW {
		p = p[:maxRW]
	}
	c.rmu.Lock()
	defer c.rmu.Unlock()
	c.rp, c.rn, c.rerr = p, 0, nil
	err := c.rc.Read(c.readFn)
	n := c.rn
	c.rp = nil
	switch {
	case err != nil:
		return 0, c.opError("read", err)
	case c.rerr != nil:
		return 0, c.opError("read", c.rerr)
	case n == 0:
		return 0, io.EOF
	}
	return n, nil
}

// write is the callback of a Write; false: wait until it can write more.
func (c *Conn) write(fd uintptr) bool {
	for c.wn < len(c.wp) {
		b := c.wp[c.wn:]
		if len(b) > maxRW {
			b = b[:maxRW]
		}
		r, _, e := syscall.RawSyscall(syscall.SYS_WRITE, fd, uintptr(unsafe.Pointer(unsafe.SliceData(b))), uintptr(len(b)))
		switch e {
		case 0:
			if r == 0 {
				c.werr = io.ErrUnexpectedEOF
				return true
			}
			c.wn += int(r)
		case syscall.EINTR:
		case syscall.EAGAIN:
			return false
		default:
			c.werr = os.NewSyscallError("write", e)
			return true
		}
	}
	return true
}

// Write writes as net.TCPConn's Write does.
func (c *Conn) Write(p []byte) (int, error) {
	if len(p) == 0 {
		return c.TCPConn.Write(p)
	}
	c.wmu.Lock()
	defer c.wmu.Unlock()
	c.wp, c.wn, c.werr = p, 0, nil
	err := c.rc.Write(c.writeFn)
	n := c.wn
	c.wp = nil
	if err == nil {
		err = c.werr
	}
	if err != nil {
		return n, c.opError("write", err)
	}
	return n, nil
}

// opError wraps err as net.TCPConn's Read and Write do: the RawConn's own
// errors (a deadline, a closed connection) come wrapped for "raw-read" or
// "raw-write", and are unwrapped first.
func (c *Conn) opError(op string, err error) error {
	if oe, ok := err.(*net.OpError); ok {
		err = oe.Err
	}
	return &net.OpError{Op: op, Net: "tcp", Source: c.LocalAddr(), Addr: c.RemoteAddr(), Err: err}
}
