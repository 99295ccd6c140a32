package engine

import (
	"context"
	"crypto/tls"
	"fmt"
	"net"
	"time"
)

// SentinelFollower follows the primary of a Sentinel group for a caller
// that opens and uses its own connections to it (the proxy's passthrough
// backend), as a master given as a Sentinel group does for its node: the
// same subscription to +switch-master, the same question to every
// sentinel each interval, and on a switch every connection Dial opened to
// the old primary is closed.
type SentinelFollower struct{ s *sentinel }

// FollowOptions configures FollowSentinels.
type FollowOptions struct {
	// Every is how often the sentinels are asked; 0: every second.
	Every time.Duration
	// Timeout bounds a sentinel's answer and a connection to one; 0: 1 s.
	Timeout time.Duration
	// TLS is for the sentinels, and for the primary unless Dialer is set.
	TLS *tls.Config
	// Dialer opens a connection to the primary at addr (its TLS
	// included); nil: TCP, then TLS when TLS is set.
	Dialer func(ctx context.Context, network, addr string) (net.Conn, error)
	// Who names the follower in log lines ("proxy: backend sentinel://…").
	Who string
	// Logf receives the log lines: switches, sentinels out of reach.
	Logf func(format string, args ...any)
}

// FollowSentinels starts following the group addr names,
// sentinel://[user:password@]host:port[,host:port…]/name. Close stops it.
func FollowSentinels(addr string, o FollowOptions) (*SentinelFollower, error) {
	a, err := ParseSentinelAddr(addr)
	if err != nil {
		return nil, fmt.Errorf("redlock: %w", err)
	}
	if o.Every <= 0 {
		o.Every = time.Second
	}
	if o.Timeout <= 0 {
		o.Timeout = time.Second
	}
	if o.Who == "" {
		o.Who = Redact(addr)
	}
	logf := o.Logf
	if logf == nil {
		logf = func(string, ...any) {}
	}
	s := newSentinel(a, o.Who, logf, o.Every, o.Timeout, o.TLS, o.Dialer)
	s.start()
	return &SentinelFollower{s: s}, nil
}

// Dial opens a connection to the primary the sentinels named last, asking
// them first when none is known yet. The connection is closed when the
// sentinels name another primary; one that the switch overtook while it
// opened fails.
func (f *SentinelFollower) Dial(ctx context.Context) (net.Conn, error) {
	return f.s.dial(ctx, "tcp", "")
}

// Stale reports whether nc, opened by Dial, goes to a primary the
// sentinels no longer name: it has been closed, or is being closed.
func (f *SentinelFollower) Stale(nc net.Conn) bool { return f.s.stale(nc) }

// Primary is host:port of the primary the sentinels named last; "" before
// any answered.
func (f *SentinelFollower) Primary() string {
	addr, _ := f.s.current()
	return addr
}

// Ask puts the question to every sentinel now, rather than at the next
// interval (a server that answered as a replica), and follows their
// answer.
func (f *SentinelFollower) Ask(ctx context.Context) { f.s.ask(ctx) }

// Status describes the group as the follower sees it.
func (f *SentinelFollower) Status() SentinelStatus { return *f.s.status() }

// Close stops following the sentinels. Connections Dial opened stay
// open: their owners close them.
func (f *SentinelFollower) Close() { f.s.close() }
