package backend

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"strings"
	"sync/atomic"
	"time"

	"github.com/redlock-proxy/redlock-proxy/redlock/engine"
)

// A Sentinel group as the passthrough backend (proxy.backend =
// "sentinel://[user:password@]host:port[,host:port…]/name", or an empty
// backend whose first master is one). Every backend connection (the
// pools, the shared connections of mux.go, clients' own connections for
// MULTI/WATCH, blocking commands and subscriptions, in RESP2 and RESP3,
// in every database) is opened to the primary the sentinels name, by the
// same follower the voters given as a group use (engine.SentinelFollower):
// a subscription to +switch-master and a question to every sentinel each
// interval. On a switch every connection to the old primary is closed at
// once:
//
//   - a pooled or shared connection fails the commands in flight on it
//     (ERR … passthrough backend failed), and the next ones go to the new
//     primary;
//   - a client's own connection fails its next command, or the blocking
//     command waiting on it, with package proxy's errPinnedLost: WATCH is reset and an
//     open MULTI is aborted at EXEC, never run on another server;
//   - a subscribed client is disconnected (package proxy's relay), as Sentinel's own
//     CLIENT KILL TYPE pubsub disconnects it from a demoted primary: it
//     subscribes again, to the new one.
//
// Nothing is written to a replica: each new connection asks ROLE (the
// Sentinel client guidelines' check) and one to a server that answers as
// a replica is refused, after the sentinels are asked again; a reply
// -READONLY (a primary demoted before the proxy heard of it) has the
// sentinels asked again, and its connection goes back to no pool.

// Sentinel follows the backend's Sentinel group.
type Sentinel struct {
	Follower *engine.SentinelFollower
	name     string               // the group's name
	log      func(string, ...any) // warnings
	asking   atomic.Bool          // an Ask after a READONLY is running
}

// newSentinel starts following group, as be dials (TLS, timeouts).
func newSentinel(group string, be *Pool, every time.Duration, logf func(string, ...any)) (*Sentinel, error) {
	a, err := engine.ParseSentinelAddr(group)
	if err != nil {
		return nil, fmt.Errorf("proxy.backend: %w", err)
	}
	if every <= 0 {
		every = time.Second
	}
	o := engine.FollowOptions{
		Every: every, Timeout: max(be.timeout, time.Second), TLS: be.tls,
		Who: "proxy: backend " + engine.Redact(group), Logf: logf,
	}
	if be.tls == nil {
		// Plain TCP, read and written by package sock. With TLS the
		// follower dials, and its TLS is outside the connection it
		// tracks, where peek finds the socket.
		o.Dialer = be.dialAddr
	}
	f, err := engine.FollowSentinels(group, o)
	if err != nil {
		return nil, fmt.Errorf("proxy.backend: %w", err)
	}
	return &Sentinel{Follower: f, name: a.Name, log: logf}, nil
}

// dial opens a connection to the primary the sentinels named last.
func (sb *Sentinel) dial(timeout time.Duration) (net.Conn, error) {
	ctx, cancel := context.WithTimeout(context.Background(), max(timeout, time.Second))
	defer cancel()
	return sb.Follower.Dial(ctx)
}

// checkPrimary asks a new connection's server for its ROLE, and refuses
// one that answers as a replica: the sentinels are asked again, and the
// dial fails (the client's command answers that the backend is
// unreachable; its next goes where they now point). A server that does
// not answer ROLE (an ACL user without it) is asked INFO replication; one
// that answers neither is taken as the primary the sentinels name.
func (sb *Sentinel) checkPrimary(b *Conn) error {
	role := ""
	reply, err := b.Do([][]byte{[]byte("ROLE")}, b.home.timeout)
	if err != nil {
		return err
	}
	if len(reply) > 0 && reply[0] == '*' {
		// *3\r\n$6\r\nmaster\r\n…, *5\r\n$5\r\nslave\r\n…
		if f := bytes.SplitN(reply, []byte("\r\n"), 4); len(f) == 4 {
			role = string(f[2])
		}
	} else {
		reply, err = b.Do([][]byte{[]byte("INFO"), []byte("replication")}, b.home.timeout)
		if err != nil {
			return err
		}
		if len(reply) > 0 && reply[0] == '$' {
			role = infoField(string(reply), "role")
		}
	}
	if role == "" || role == "master" {
		return nil
	}
	addr := b.NC.RemoteAddr().String()
	sb.log("proxy: backend %s (Sentinel group %s) answers as a %s; not using it, and asking the sentinels again", addr, sb.name, role)
	sb.askNow()
	return fmt.Errorf("proxy: the backend's server %s, the primary of Sentinel group %s as last named, answers ROLE %s", addr, sb.name, role)
}

// saw looks at each reply of a backend connection: a -READONLY has the
// sentinels asked again, and keeps the connection out of the pool.
func (sb *Sentinel) saw(b *Conn, reply []byte) {
	if isReadonly(reply) {
		b.readonly = true
		sb.askSoon()
	}
}

// isReadonly reports whether reply is a replica's refusal of a write.
func isReadonly(reply []byte) bool {
	return len(reply) > 9 && reply[0] == '-' && bytes.HasPrefix(reply[1:], []byte("READONLY"))
}

// askSoon asks the sentinels in the background, once at a time.
func (sb *Sentinel) askSoon() {
	if !sb.asking.CompareAndSwap(false, true) {
		return
	}
	go func() {
		defer sb.asking.Store(false)
		sb.askNow()
	}()
}

// askNow asks the sentinels and follows their answer.
func (sb *Sentinel) askNow() {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	sb.Follower.Ask(ctx)
}

// Close stops following the group.
func (sb *Sentinel) Close() { sb.Follower.Close() }

// label is the backend as logs and status show it: a Sentinel
// group's password left out.
func label(addr string) string {
	if engine.IsSentinelAddr(addr) {
		return engine.Redact(addr)
	}
	return addr
}

// infoField reads one field of an INFO reply.
func infoField(info, name string) string {
	for _, line := range strings.Split(info, "\n") {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), name+":"); ok {
			return v
		}
	}
	return ""
}
