package backend

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
	"github.com/redlock-proxy/redlock-proxy/redlock/engine"
)

// Conn is one raw connection to the passthrough backend. Replies are
// copied to the client byte for byte, so status, bulk and error replies keep
// their exact form.
type Conn struct {
	home *Pool // the pool it came from
	NC   net.Conn
	R    *bufio.Reader
	Buf  []byte
	idle time.Time // when it went back to the pool
	// readonly: it answered READONLY, as a replica does (a Sentinel
	// group's backend: sentinel.go); it goes back to no pool.
	readonly bool
}

// idleCheck is how long a backend connection may sit unused before it is
// checked for a close by the server (peek.Of) ahead of its next use.
const idleCheck = time.Second

// Do sends one command and returns its raw reply, valid until the next call.
// timeout 0 waits without a deadline (blocking commands).
func (b *Conn) Do(args [][]byte, timeout time.Duration) ([]byte, error) {
	var deadline time.Time
	if timeout > 0 {
		deadline = time.Now().Add(timeout)
	}
	_ = b.NC.SetDeadline(deadline)
	b.Buf = wire.AppendCommand(b.Buf[:0], args)
	if _, err := b.NC.Write(b.Buf); err != nil {
		return nil, err
	}
	var err error
	b.Buf, err = wire.ReadReply(b.R, b.Buf[:0])
	if err == nil && b.home.follow != nil {
		b.home.follow.saw(b, b.Buf)
	}
	return b.Buf, err
}

// DoMany sends several commands in one write and hands each raw reply to
// each, in order, as it is read (valid only during the call), so that large
// replies are not all held at once. It stops at the first error.
func (b *Conn) DoMany(cmds []redcon.Command, timeout time.Duration, each func(reply []byte)) (int, error) {
	_ = b.NC.SetDeadline(time.Now().Add(timeout))
	b.Buf = b.Buf[:0]
	for _, cmd := range cmds {
		b.Buf = wire.AppendRequest(b.Buf, cmd)
	}
	if _, err := b.NC.Write(b.Buf); err != nil {
		return 0, err
	}
	for i := range cmds {
		var err error
		if b.Buf, err = wire.ReadReply(b.R, b.Buf[:0]); err != nil {
			return i, err
		}
		if b.home.follow != nil {
			b.home.follow.saw(b, b.Buf)
		}
		each(b.Buf)
	}
	return len(cmds), nil
}

// Close closes the connection.
func (b *Conn) Close() { _ = b.NC.Close() }

// Pool is the pool the connection was dialled by: a pooled one goes back
// there (Put).
func (b *Conn) Pool() *Pool { return b.home }

// Pool dials and pools connections to the passthrough backend.
type Pool struct {
	proto    int // 3: connections say HELLO 3, for clients that speak RESP3
	db       int // connections SELECT it when not 0 (package proxy's databases.go)
	addr     string
	identity func() (user, pass string) // AUTH credentials, read at every dial: a reload may change them
	timeout  time.Duration
	idle     chan *Conn
	tls      *tls.Config // nil: plain TCP
	// follow: addr names a Sentinel group, and connections go to the
	// primary it follows (sentinel.go); nil for one Redis.
	follow *Sentinel
}

// Options say where the backend is and how to reach it.
type Options struct {
	// Addr is the backend: host:port, or a Sentinel group,
	// sentinel://[user:password@]host:port[,host:port…]/name, whose
	// primary every connection goes to.
	Addr string
	// Identity returns the AUTH credentials, read at every dial (a
	// reload may change them); "" for none.
	Identity func() (user, pass string)
	// Timeout bounds a dial and a command's round trip.
	Timeout time.Duration
	// PoolSize caps the idle connections kept.
	PoolSize int
	// TLS, if set, wraps every connection.
	TLS *tls.Config
	// SentinelEvery is how often a Sentinel group's sentinels are asked
	// which server is the primary (default 1 s); Logf receives the
	// group's warnings.
	SentinelEvery time.Duration
	Logf          func(format string, args ...any)
}

// New is a pool of at most o.PoolSize idle connections to the backend o
// names; for a Sentinel group it starts following the group (Close the
// Sentinel when done).
func New(o Options) (*Pool, error) {
	identity := o.Identity
	if identity == nil {
		identity = func() (string, string) { return "", "" }
	}
	logf := o.Logf
	if logf == nil {
		logf = func(string, ...any) {}
	}
	p := &Pool{addr: o.Addr, identity: identity, timeout: o.Timeout, idle: make(chan *Conn, o.PoolSize), tls: o.TLS}
	if engine.IsSentinelAddr(o.Addr) {
		p.addr = label(o.Addr)
		var err error
		if p.follow, err = newSentinel(o.Addr, p, o.SentinelEvery, logf); err != nil {
			return nil, err
		}
	}
	return p, nil
}

// Addr is the backend's address (a Sentinel group's without its
// credentials).
func (p *Pool) Addr() string { return p.addr }

// Sentinel is the Sentinel group the pool's connections follow, or nil
// for one Redis.
func (p *Pool) Sentinel() *Sentinel { return p.follow }

// Dial dials a connection, not pooled.
func (p *Pool) Dial() (*Conn, error) { return p.DialSize(16 << 10) }

// DialSize dials a connection with a read buffer of readBuf bytes.
func (p *Pool) DialSize(readBuf int) (*Conn, error) {
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
	b := &Conn{home: p, NC: nc, R: bufio.NewReaderSize(nc, readBuf)}
	if user, pass := p.identity(); pass != "" {
		auth := [][]byte{[]byte("AUTH"), []byte(pass)}
		if user != "" {
			auth = [][]byte{[]byte("AUTH"), []byte(user), []byte(pass)}
		}
		reply, err := b.Do(auth, p.timeout)
		if err != nil || len(reply) == 0 || reply[0] != '+' {
			b.Close()
			return nil, errors.Join(errors.New("proxy: backend refused AUTH"), err)
		}
	}
	if p.follow != nil {
		if err := p.follow.checkPrimary(b); err != nil { // not a replica
			b.Close()
			return nil, err
		}
	}
	if p.proto == 3 {
		reply, err := b.Do([][]byte{[]byte("HELLO"), []byte("3")}, p.timeout)
		if err != nil || len(reply) == 0 || reply[0] != '%' {
			b.Close()
			return nil, errors.Join(errors.New("proxy: backend refused HELLO 3"), err)
		}
	}
	if p.db != 0 {
		reply, err := b.Do([][]byte{[]byte("SELECT"), []byte(strconv.Itoa(p.db))}, p.timeout)
		if err != nil || len(reply) == 0 || reply[0] != '+' {
			b.Close()
			return nil, errors.Join(fmt.Errorf("proxy: backend refused SELECT %d", p.db), err)
		}
	}
	return b, nil
}

// dialAddr opens a connection to the Redis at addr: TCP, with TLS when
// configured.
func (p *Pool) dialAddr(ctx context.Context, network, addr string) (net.Conn, error) {
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

// RESP3 is a pool of the same backend whose connections speak RESP3.
func (p *Pool) RESP3() *Pool {
	return &Pool{proto: 3, db: p.db, addr: p.addr, identity: p.identity, timeout: p.timeout, idle: make(chan *Conn, cap(p.idle)), tls: p.tls, follow: p.follow}
}

// InDB is a pool of the same backend whose connections SELECT database n.
func (p *Pool) InDB(n int) *Pool {
	return &Pool{proto: p.proto, db: n, addr: p.addr, identity: p.identity, timeout: p.timeout, idle: make(chan *Conn, cap(p.idle)), tls: p.tls, follow: p.follow}
}

// Get takes an idle pooled connection or dials a new one. A pooled one the
// server closed meanwhile is dropped, as is one to a Sentinel group's
// former primary.
func (p *Pool) Get() (*Conn, error) {
	for {
		select {
		case b := <-p.idle:
			if p.Stale(b.NC) || time.Since(b.idle) > idleCheck && peek.Of(b.NC).Broken() {
				b.Close()
				continue
			}
			return b, nil
		default:
			return p.Dial()
		}
	}
}

// Put returns a healthy connection to the pool, or closes it when full,
// or when it goes to a server that is not (or no longer) a Sentinel
// group's primary.
func (p *Pool) Put(b *Conn) {
	if b.readonly || p.Stale(b.NC) {
		b.Close()
		return
	}
	b.idle = time.Now()
	select {
	case p.idle <- b:
	default:
		b.Close()
	}
}

// Stale reports whether nc goes to a Sentinel group's former primary.
func (p *Pool) Stale(nc net.Conn) bool { return p.follow != nil && p.follow.Follower.Stale(nc) }

// Close closes the idle connections.
func (p *Pool) Close() {
	for {
		select {
		case b := <-p.idle:
			b.Close()
		default:
			return
		}
	}
}
