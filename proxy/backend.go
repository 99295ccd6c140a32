package proxy

import (
	"bufio"
	"context"
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
	// readonly: it answered READONLY, as a replica does (a Sentinel
	// group's backend: sentinelbackend.go); it goes back to no pool.
	readonly bool
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
	if err == nil && b.home.follow != nil {
		b.home.follow.saw(b, b.buf)
	}
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
		if b.home.follow != nil {
			b.home.follow.saw(b, b.buf)
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
	// follow: addr names a Sentinel group, and connections go to the
	// primary it follows (sentinelbackend.go); nil for one Redis.
	follow *sentinelBackend
}

func newBackend(addr string, identity func() (string, string), timeout time.Duration, poolSize int, tlsCfg *tls.Config) *backend {
	return &backend{addr: addr, identity: identity, timeout: timeout, idle: make(chan *backendConn, poolSize), tls: tlsCfg}
}

func (p *backend) dial() (*backendConn, error) { return p.dialSize(16 << 10) }

// dialSize dials a connection with a read buffer of readBuf bytes.
func (p *backend) dialSize(readBuf int) (*backendConn, error) {
	var nc net.Conn
	var err error
	if p.follow != nil {
		nc, err = p.follow.dial(p.timeout)
	} else {
		nc, err = p.dialAddr(context.Background(), "tcp", p.addr)
	}
	if err != nil {
		return nil, err
	}
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
	if p.follow != nil {
		if err := p.follow.checkPrimary(b); err != nil { // not a replica
			b.close()
			return nil, err
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

// dialAddr opens a connection to the Redis at addr: TCP, with TLS when
// configured.
func (p *backend) dialAddr(ctx context.Context, network, addr string) (net.Conn, error) {
	d := &net.Dialer{Timeout: p.timeout}
	if p.tls != nil {
		return (&tls.Dialer{NetDialer: d, Config: p.tls}).DialContext(ctx, network, addr)
	}
	nc, err := d.DialContext(ctx, network, addr)
	if err != nil {
		return nil, err
	}
	return sock.Wrap(nc), nil // plain TCP: its reads and writes, package sock's
}

// resp3 is a pool of the same backend whose connections speak RESP3.
func (p *backend) resp3() *backend {
	return &backend{proto: 3, db: p.db, addr: p.addr, identity: p.identity, timeout: p.timeout, idle: make(chan *backendConn, cap(p.idle)), tls: p.tls, follow: p.follow}
}

// inDB is a pool of the same backend whose connections SELECT database n.
func (p *backend) inDB(n int) *backend {
	return &backend{proto: p.proto, db: n, addr: p.addr, identity: p.identity, timeout: p.timeout, idle: make(chan *backendConn, cap(p.idle)), tls: p.tls, follow: p.follow}
}

// get takes an idle pooled connection or dials a new one. A pooled one the
// server closed meanwhile is dropped, as is one to a Sentinel group's
// former primary.
func (p *backend) get() (*backendConn, error) {
	for {
		select {
		case b := <-p.idle:
			if p.stale(b.nc) || time.Since(b.idle) > idleCheck && peek.Of(b.nc).Broken() {
				b.close()
				continue
			}
			return b, nil
		default:
			return p.dial()
		}
	}
}

// put returns a healthy connection to the pool, or closes it when full,
// or when it goes to a server that is not (or no longer) a Sentinel
// group's primary.
func (p *backend) put(b *backendConn) {
	if b.readonly || p.stale(b.nc) {
		b.close()
		return
	}
	b.idle = time.Now()
	select {
	case p.idle <- b:
	default:
		b.close()
	}
}

// stale reports whether nc goes to a Sentinel group's former primary.
func (p *backend) stale(nc net.Conn) bool { return p.follow != nil && p.follow.f.Stale(nc) }

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
