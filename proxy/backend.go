package proxy

import (
	"bufio"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"strconv"
	"time"

	"github.com/tidwall/redcon"

	"github.com/redlock-proxy/redlock-proxy/internal/peek"
	"github.com/redlock-proxy/redlock-proxy/internal/sock"
	"github.com/redlock-proxy/redlock-proxy/proxy/wire"
)

// backendConn is one raw connection to the passthrough backend. Replies are
// copied to the client byte for byte, so status, bulk and error replies keep
// their exact form.
type backendConn struct {
	home *backend // the pool it came from
	nc   net.Conn
	r    *bufio.Reader
	buf  []byte
	idle time.Time // when it went back to the pool
}

// idleCheck is how long a backend connection may sit unused before it is
// checked for a close by the server (peek.Of) ahead of its next use.
const idleCheck = time.Second

// do sends one command and returns its raw reply, valid until the next call.
// timeout 0 waits without a deadline (blocking commands).
func (b *backendConn) do(args [][]byte, timeout time.Duration) ([]byte, error) {
	var deadline time.Time
	if timeout > 0 {
		deadline = time.Now().Add(timeout)
	}
	_ = b.nc.SetDeadline(deadline)
	b.buf = wire.AppendCommand(b.buf[:0], args)
	if _, err := b.nc.Write(b.buf); err != nil {
		return nil, err
	}
	var err error
	b.buf, err = wire.ReadReply(b.r, b.buf[:0])
	return b.buf, err
}

// doMany sends several commands in one write and hands each raw reply to
// each, in order, as it is read (valid only during the call), so that large
// replies are not all held at once. It stops at the first error.
func (b *backendConn) doMany(cmds []redcon.Command, timeout time.Duration, each func(reply []byte)) (int, error) {
	_ = b.nc.SetDeadline(time.Now().Add(timeout))
	b.buf = b.buf[:0]
	for _, cmd := range cmds {
		b.buf = wire.AppendRequest(b.buf, cmd)
	}
	if _, err := b.nc.Write(b.buf); err != nil {
		return 0, err
	}
	for i := range cmds {
		var err error
		if b.buf, err = wire.ReadReply(b.r, b.buf[:0]); err != nil {
			return i, err
		}
		each(b.buf)
	}
	return len(cmds), nil
}

func (b *backendConn) close() { _ = b.nc.Close() }

// backend dials and pools connections to the passthrough backend.
type backend struct {
	proto    int // 3: connections say HELLO 3, for clients that speak RESP3
	db       int // connections SELECT it when not 0 (databases.go)
	addr     string
	identity func() (user, pass string) // AUTH credentials, read at every dial: a reload may change them
	timeout  time.Duration
	idle     chan *backendConn
	tls      *tls.Config // nil: plain TCP
}

func newBackend(addr string, identity func() (string, string), timeout time.Duration, poolSize int, tlsCfg *tls.Config) *backend {
	return &backend{addr: addr, identity: identity, timeout: timeout, idle: make(chan *backendConn, poolSize), tls: tlsCfg}
}

func (p *backend) dial() (*backendConn, error) { return p.dialSize(16 << 10) }

// dialSize dials a connection with a read buffer of readBuf bytes.
func (p *backend) dialSize(readBuf int) (*backendConn, error) {
	var nc net.Conn
	var err error
	if p.tls != nil {
		nc, err = tls.DialWithDialer(&net.Dialer{Timeout: p.timeout}, "tcp", p.addr, p.tls)
	} else {
		nc, err = net.DialTimeout("tcp", p.addr, p.timeout)
	}
	if err != nil {
		return nil, err
	}
	nc = sock.Wrap(nc) // plain TCP: its reads and writes, package sock's
	b := &backendConn{home: p, nc: nc, r: bufio.NewReaderSize(nc, readBuf)}
	if user, pass := p.identity(); pass != "" {
		auth := [][]byte{[]byte("AUTH"), []byte(pass)}
		if user != "" {
			auth = [][]byte{[]byte("AUTH"), []byte(user), []byte(pass)}
		}
		reply, err := b.do(auth, p.timeout)
		if err != nil || len(reply) == 0 || reply[0] != '+' {
			b.close()
			return nil, errors.Join(errors.New("proxy: backend refused AUTH"), err)
		}
	}
	if p.proto == 3 {
		reply, err := b.do([][]byte{[]byte("HELLO"), []byte("3")}, p.timeout)
		if err != nil || len(reply) == 0 || reply[0] != '%' {
			b.close()
			return nil, errors.Join(errors.New("proxy: backend refused HELLO 3"), err)
		}
	}
	if p.db != 0 {
		reply, err := b.do([][]byte{[]byte("SELECT"), []byte(strconv.Itoa(p.db))}, p.timeout)
		if err != nil || len(reply) == 0 || reply[0] != '+' {
			b.close()
			return nil, errors.Join(fmt.Errorf("proxy: backend refused SELECT %d", p.db), err)
		}
	}
	return b, nil
}

// resp3 is a pool of the same backend whose connections speak RESP3.
func (p *backend) resp3() *backend {
	return &backend{proto: 3, db: p.db, addr: p.addr, identity: p.identity, timeout: p.timeout, idle: make(chan *backendConn, cap(p.idle)), tls: p.tls}
}

// inDB is a pool of the same backend whose connections SELECT database n.
func (p *backend) inDB(n int) *backend {
	return &backend{proto: p.proto, db: n, addr: p.addr, identity: p.identity, timeout: p.timeout, idle: make(chan *backendConn, cap(p.idle)), tls: p.tls}
}

// get takes an idle pooled connection or dials a new one. A pooled one the
// server closed meanwhile is dropped.
func (p *backend) get() (*backendConn, error) {
	for {
		select {
		case b := <-p.idle:
			if time.Since(b.idle) > idleCheck && peek.Of(b.nc).Broken() {
				b.close()
				continue
			}
			return b, nil
		default:
			return p.dial()
		}
	}
}

// put returns a healthy connection to the pool, or closes it when full.
func (p *backend) put(b *backendConn) {
	b.idle = time.Now()
	select {
	case p.idle <- b:
	default:
		b.close()
	}
}

func (p *backend) close() {
	for {
		select {
		case b := <-p.idle:
			b.close()
		default:
			return
		}
	}
}
