package proxy

import (
	"bytes"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"net"
	"strings"
	"time"

	"github.com/redlock-proxy/redlock-proxy/proxy/backend"
	"github.com/redlock-proxy/redlock-proxy/proxy/wire"
	"github.com/tidwall/redcon"
)

// Pub/sub. A client that subscribes gets a backend connection of its own for
// as long as it has subscriptions, in the client's protocol, and a relay
// goroutine that copies what the backend sends on it (confirmations,
// messages, the replies to PING and to refused commands) to the client,
// byte for byte, in the order the backend sent it. In RESP2 everything the
// subscribed client sends goes to that connection, so the backend itself
// answers every command in subscribed mode exactly as Redis does. In RESP3
// a subscribed client may run any command: pub/sub commands and plain
// passthrough commands go to that connection, and the others are served by
// the proxy as usual (lock commands on the quorum) once every reply the
// connection owes has been relayed (sync). QUIT and RESET end the
// subscription and are then served as usual; the proxy counts the client's
// channels, patterns and shard channels to know when the last UNSUBSCRIBE
// ends it too.
//
// One backend connection per subscriber, rather than one shared
// subscription per proxy that fans messages out: no message can reach a
// client it was not for, per-client order needs no bookkeeping, and the
// backend's own client-output-buffer-limit for pub/sub applies to each
// subscriber, as it would without the proxy. The price is a backend
// connection per subscribed client (docs/commands.md gives the memory of
// idle subscribers).
//
// A slow subscriber cannot grow the proxy's memory: the relay holds one
// message at a time and waits while the client does not read (up to
// proxy.write_timeout, then the client is closed); meanwhile the backend
// buffers, up to its client-output-buffer-limit pubsub, and closes the
// connection beyond it, which closes the client too. A client that leaves
// closes its backend connection, which ends the relay.

// subReadBuf is the read buffer of a subscription's backend connection.
const subReadBuf = 1 << 10

// subscription is a subscribed client's backend connection and what it is
// subscribed to.
type subscription struct {
	bc       *backend.Conn
	resp3    bool
	channels map[string]struct{}
	patterns map[string]struct{}
	shards   map[string]struct{}
	// tracking: client-side caching is on (CLIENT TRACKING, tracking.go);
	// the connection stays while it is, subscribed or not.
	tracking bool
	// stand-ins: the proxy's own replies to commands it refused in MULTI,
	// each taking the place of the backend's error to a stand-in command
	// (tracking.go). Under session.outMu.
	standIns []standIn
	// unsynced: commands were sent whose replies the relay may not have
	// passed on yet (session goroutine only).
	unsynced bool
	// marks are the replies to the PING <token> that sync sends, in and
	// out of RESP2's subscribed mode; the relay swallows the first that
	// comes and signals synced. Under session.outMu.
	marks  [2][]byte
	synced chan struct{} // receives when the relay met a mark
	done   chan struct{} // closed when the relay has ended
}

func (sub *subscription) count() int { return len(sub.channels) + len(sub.patterns) + len(sub.shards) }

// set is the set of names a subscribe-family command adds to or removes
// from, by the command's prefix: "" (channels), "p" (patterns) or "s"
// (shard channels).
func (sub *subscription) set(prefix string) map[string]struct{} {
	switch prefix {
	case "p":
		return sub.patterns
	case "s":
		return sub.shards
	}
	return sub.channels
}

// track records what a (un)subscribe command does to the client's
// subscriptions, as the backend does it.
func (sub *subscription) track(name string, args [][]byte) {
	if strings.HasSuffix(name, "unsubscribe") {
		set := sub.set(strings.TrimSuffix(name, "unsubscribe"))
		if len(args) == 1 {
			clear(set)
		}
		for _, a := range args[1:] {
			delete(set, string(a))
		}
		return
	}
	if len(args) < 2 {
		return // refused by the backend: wrong number of arguments
	}
	set := sub.set(strings.TrimSuffix(name, "subscribe"))
	for _, a := range args[1:] {
		set[string(a)] = struct{}{}
	}
}

// cmdSubscribe serves SUBSCRIBE, PSUBSCRIBE and SSUBSCRIBE of a client that
// is not subscribed: it opens the client's subscription.
func cmdSubscribe(s *Server, c redcon.Conn, st *client, args [][]byte) route {
	name := strings.ToLower(string(args[0]))
	ss, ok := c.(*session)
	if !ok {
		c.WriteError("ERR redlock-proxy: '" + strings.ToUpper(name) + "' is not supported here")
		return replied
	}
	// A small read buffer: an idle subscriber's memory is mostly its
	// buffers. It holds a reply's header line (the longest a status or
	// error line of the backend's); messages are read past it.
	bc, err := s.beFor(st).DialSize(subReadBuf)
	if err != nil {
		s.log.Warn().Err(err).Msg("passthrough backend unreachable")
		c.WriteError("ERR redlock-proxy: passthrough backend unreachable")
		return replied
	}
	s.openSub(ss, st, bc)
	s.subscribed(ss, st, lookup(args[0]), name, args)
	return replied
}

// openSub makes bc the client's own connection, relayed (subscriptions,
// client-side caching).
func (s *Server) openSub(ss *session, st *client, bc *backend.Conn) {
	sub := &subscription{bc: bc, resp3: st.proto == 3, channels: map[string]struct{}{}, patterns: map[string]struct{}{},
		shards: map[string]struct{}{}, synced: make(chan struct{}, 1), done: make(chan struct{})}
	// What the client was answered before goes out first; from now on the
	// relay writes too, under outMu.
	ss.outMu.Lock()
	_ = ss.flush()
	ss.subbed = true
	ss.outMu.Unlock()
	st.sub = sub
	s.m.Subscribers.Inc()
	go s.relay(ss, sub)
}

// subscribed serves a command of a subscribed client (e: its entry in the
// command table, name: its lower-case name). It reports whether it served
// it; if not (RESP3), the command is served as usual, after the replies the
// subscription connection owed.
func (s *Server) subscribed(ss *session, st *client, e *command, name string, args [][]byte) bool {
	sub := st.sub
	switch name {
	case "quit", "reset":
		s.endSubscription(ss, st)
		return false
	case "subscribe", "psubscribe", "ssubscribe", "unsubscribe", "punsubscribe", "sunsubscribe":
		if sub.resp3 && st.multi && !strings.Contains(name, "unsub") {
			s.refuseInMulti(ss, st, s.multiRefusal(st, name, args))
			return true
		}
		if sub.resp3 {
			ss.waitIdle() // its reply comes after those of lock operations in flight
		}
		sub.track(name, args)
		if s.sendSub(ss, st, args) && sub.count() == 0 && !sub.tracking {
			s.endSubscription(ss, st) // the last UNSUBSCRIBE
		}
		return true
	}
	if sub.resp3 && s.ownConnCommand(st, name, args) {
		ss.waitIdle()
		s.m.Passthrough.Inc()
		s.sendSub(ss, st, args)
		return true
	}
	if sub.resp3 && st.multi {
		// Refused in MULTI: a lock command, or one that cannot be queued.
		msg := s.multiRefusal(st, name, args)
		if sub.tracking && msg == errLockInMulti {
			msg += " (a client-side cache reads in MULTI, and lock keys cannot be cached: read them uncached, rueidis: Do, not DoCache)"
		}
		s.refuseInMulti(ss, st, msg)
		return true
	}
	if !sub.resp3 {
		// RESP2: the backend refuses what subscribed mode does not allow,
		// but Redis checks the user's permissions first.
		if msg := s.userRefusal(st, e, args); msg != "" {
			if s.sync(ss, st) {
				ss.WriteError(msg)
			}
			return true
		}
	}
	if !sub.resp3 || s.plainPassthrough(st, e, args) {
		// RESP2: the backend refuses what subscribed mode does not allow.
		// RESP3: a plain command runs there, its reply in order.
		if sub.resp3 {
			ss.waitIdle()
		}
		s.m.Passthrough.Inc()
		s.sendSub(ss, st, args)
		return true
	}
	if !s.sync(ss, st) {
		return true
	}
	return false
}

// sendSub sends a command on the client's subscription connection; a
// failure closes the client (its subscriptions are gone).
func (s *Server) sendSub(ss *session, st *client, args [][]byte) bool {
	sub := st.sub
	sub.bc.Buf = wire.AppendCommand(sub.bc.Buf[:0], args)
	_ = sub.bc.NC.SetWriteDeadline(time.Now().Add(s.passthroughTimeout()))
	if _, err := sub.bc.NC.Write(sub.bc.Buf); err != nil {
		s.log.Warn().Err(err).Str("client", ss.addr).Msg("subscription connection failed; closing the client")
		_ = ss.Close()
		return false
	}
	sub.unsynced = true
	return true
}

// sync waits until the relay has passed on every reply the subscription
// connection owes: it sends PING with a random token and waits for its
// answer, which the relay swallows. A connection that does not answer in
// time closes the client (what it was subscribed to is unknown).
func (s *Server) sync(ss *session, st *client) bool {
	sub := st.sub
	if !sub.unsynced {
		return true
	}
	var raw [12]byte
	_, _ = rand.Read(raw[:])
	token := hex.EncodeToString(raw[:])
	ss.outMu.Lock()
	sub.marks[0] = redcon.AppendBulkString(nil, token) // out of RESP2's subscribed mode, and RESP3
	sub.marks[1] = redcon.AppendBulkString(redcon.AppendBulkString(redcon.AppendArray(nil, 2), "pong"), token)
	ss.outMu.Unlock()
	if !s.sendSub(ss, st, [][]byte{[]byte("PING"), []byte(token)}) {
		return false
	}
	select {
	case <-sub.synced:
		sub.unsynced = false
		return true
	case <-sub.done:
	case <-time.After(s.passthroughTimeout()):
	}
	s.log.Warn().Str("client", ss.addr).Msg("subscription connection did not answer; closing the client")
	_ = ss.Close()
	return false
}

// endSubscription ends the client's subscription once the relay has passed
// on every reply the connection owes, and closes the connection, which
// drops its subscriptions on the backend.
func (s *Server) endSubscription(ss *session, st *client) {
	sub := st.sub
	s.sync(ss, st)
	sub.bc.Close()
	<-sub.done
	st.sub = nil
	ss.outMu.Lock()
	ss.subbed = false
	ss.outMu.Unlock()
}

// endSubscription ends the session's subscription, if it has one, after
// the replies it owes: nothing but the session writes to the client then.
func (ss *session) endSubscription() {
	if st, _ := ss.ctx.(*client); st != nil && st.sub != nil {
		ss.s.endSubscription(ss, st)
	}
}

// relay copies what the backend sends on a subscription connection to the
// client until either side fails, which closes the client, or the
// connection is closed.
func (s *Server) relay(ss *session, sub *subscription) {
	defer s.m.Subscribers.Dec()
	defer close(sub.done)
	var buf []byte
	for {
		// No deadline: a subscriber waits for messages as long as it wants.
		_ = sub.bc.NC.SetReadDeadline(time.Time{})
		var err error
		buf, err = wire.ReadReply(sub.bc.R, buf[:0])
		if err != nil {
			// Not closed by endSubscription: by the backend, or by the
			// proxy on a Sentinel group's switch of primary.
			if !errors.Is(err, net.ErrClosed) || sub.bc.Pool().Stale(sub.bc.NC) {
				s.log.Debug().Err(err).Str("client", ss.addr).Msg("subscription connection ended")
				_ = ss.cc.Close() // its subscriptions are gone; unblocks the session
			}
			return
		}
		ss.outMu.Lock()
		if sub.marks[0] != nil && (bytes.Equal(buf, sub.marks[0]) || bytes.Equal(buf, sub.marks[1])) {
			sub.marks = [2][]byte{}
			ss.outMu.Unlock()
			sub.synced <- struct{}{}
			continue
		}
		out := buf
		if len(sub.standIns) > 0 && len(buf) > 0 && buf[0] == '-' && bytes.Contains(buf, sub.standIns[0].token) {
			out = sub.standIns[0].reply
			sub.standIns = sub.standIns[1:]
		}
		_, werr := ss.cc.Write(out)
		ss.outMu.Unlock()
		if werr != nil {
			_ = ss.cc.Close()
			_ = sub.bc.NC.Close()
			return
		}
		if cap(buf) > maxReplyBuf {
			buf = nil
		}
	}
}

// cmdUnsubscribe serves UNSUBSCRIBE, PUNSUBSCRIBE and SUNSUBSCRIBE of a
// client that is not subscribed, as Redis does: one confirmation per name,
// or one with no name, each counting 0 subscriptions.
func cmdUnsubscribe(s *Server, c redcon.Conn, st *client, args [][]byte) route {
	name := strings.ToLower(string(args[0]))
	if len(args) == 1 {
		c.WriteArray(3)
		c.WriteBulkString(name)
		c.WriteNull()
		c.WriteInt(0)
		return replied
	}
	for _, a := range args[1:] {
		c.WriteArray(3)
		c.WriteBulkString(name)
		c.WriteBulk(a)
		c.WriteInt(0)
	}
	return replied
}

// closeSubscription ends a client's subscription when it leaves.
func (st *client) closeSubscription() {
	if sub := st.sub; sub != nil {
		sub.bc.Close()
		<-sub.done
		st.sub = nil
	}
}
