package proxy

import (
	"bytes"
	"net"
	"strings"
	"time"

	"github.com/tidwall/redcon"
)

// Pub/sub. A client that subscribes gets a backend connection of its own for
// as long as it has subscriptions, and a relay goroutine that copies what
// the backend sends on it (confirmations, messages, the replies to PING and
// to refused commands) to the client, byte for byte, in the order the
// backend sent it. While the client is subscribed, everything it sends goes
// to that connection, so the backend itself answers every command in
// subscribed mode exactly as Redis does; only QUIT and RESET end the
// subscription and are then served as usual, and the proxy counts the
// client's channels, patterns and shard channels to know when the last
// UNSUBSCRIBE ends subscribed mode, after which its commands are served as
// before (lock commands on the quorum).
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
	bc       *backendConn
	channels map[string]struct{}
	patterns map[string]struct{}
	shards   map[string]struct{}
	// until is the one simple-string reply the backend sends while the
	// client is subscribed: the answer to the QUIT, RESET or PING (after
	// the last UNSUBSCRIBE) the proxy sent to end the relay. The relay
	// stops there, without passing it on. Set before that command is sent.
	until []byte
	done  chan struct{} // closed when the relay has ended
	ended bool          // the relay reached until (read after done)
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
func cmdSubscribe(s *Server, c redcon.Conn, st *client, args [][]byte) {
	name := strings.ToLower(string(args[0]))
	if len(args) < 2 {
		wrongArgs(c, name)
		return
	}
	ss, ok := c.(*session)
	if !ok {
		c.WriteError("ERR redlock-proxy: '" + strings.ToUpper(name) + "' is not supported here")
		return
	}
	// A small read buffer: an idle subscriber's memory is mostly its
	// buffers. It holds a reply's header line (the longest a status or
	// error line of the backend's); messages are read past it.
	bc, err := s.be.dialSize(subReadBuf)
	if err != nil {
		s.log.Warn().Err(err).Msg("passthrough backend unreachable")
		c.WriteError("ERR redlock-proxy: passthrough backend unreachable")
		return
	}
	sub := &subscription{bc: bc, channels: map[string]struct{}{}, patterns: map[string]struct{}{},
		shards: map[string]struct{}{}, done: make(chan struct{})}
	// What the client was answered before goes out first; from now on the
	// relay writes too, under outMu.
	ss.outMu.Lock()
	_ = ss.flush()
	ss.subbed = true
	ss.outMu.Unlock()
	st.sub = sub
	s.m.subscribers.Inc()
	go s.relay(ss, sub)
	s.subscribed(ss, st, name, args)
}

// subscribed serves a command of a subscribed client (name: its lower-case
// name).
func (s *Server) subscribed(ss *session, st *client, name string, args [][]byte) {
	sub := st.sub
	switch name {
	case "quit":
		s.endSubscription(ss, st, args, "+OK\r\n")
		cmdQuit(s, ss, st, args)
		return
	case "reset":
		s.endSubscription(ss, st, args, "+RESET\r\n")
		cmdReset(s, ss, st, args)
		return
	case "subscribe", "psubscribe", "ssubscribe", "unsubscribe", "punsubscribe", "sunsubscribe":
		sub.track(name, args)
	}
	if !s.sendSub(ss, st, args) {
		return
	}
	if sub.count() == 0 {
		// The last UNSUBSCRIBE: the backend connection leaves subscribed
		// mode, and answers a PING with +PONG, after every reply before.
		s.endSubscription(ss, st, [][]byte{[]byte("PING")}, "+PONG\r\n")
	}
}

// sendSub sends a command on the client's subscription connection; a
// failure closes the client (its subscriptions are gone).
func (s *Server) sendSub(ss *session, st *client, args [][]byte) bool {
	bc := st.sub.bc
	bc.buf = appendCommand(bc.buf[:0], args)
	_ = bc.nc.SetWriteDeadline(time.Now().Add(s.passthroughTimeout()))
	if _, err := bc.nc.Write(bc.buf); err != nil {
		s.log.Warn().Err(err).Str("client", ss.addr).Msg("subscription connection failed; closing the client")
		_ = ss.Close()
		return false
	}
	return true
}

// endSubscription sends args, whose reply is until, on the subscription
// connection, waits for the relay to pass on every reply before it, and
// closes the connection: the client is no longer subscribed.
func (s *Server) endSubscription(ss *session, st *client, args [][]byte, until string) {
	sub := st.sub
	ss.outMu.Lock()
	sub.until = []byte(until)
	ss.outMu.Unlock()
	if s.sendSub(ss, st, args) {
		select {
		case <-sub.done:
		case <-time.After(s.passthroughTimeout()):
		}
	}
	sub.bc.close()
	<-sub.done
	st.sub = nil
	ss.outMu.Lock()
	ss.subbed = false
	ss.outMu.Unlock()
	if !sub.ended {
		_ = ss.Close() // the backend did not answer: the client's state is unknown
	}
}

// relay copies what the backend sends on a subscription connection to the
// client until the reply that ends the subscription, or until either side
// fails, which closes the client.
func (s *Server) relay(ss *session, sub *subscription) {
	defer s.m.subscribers.Dec()
	defer close(sub.done)
	var buf []byte
	for {
		// No deadline: a subscriber waits for messages as long as it wants.
		_ = sub.bc.nc.SetReadDeadline(time.Time{})
		var err error
		buf, err = readReply(sub.bc.r, buf[:0])
		if err != nil {
			if ne, ok := err.(net.Error); !ok || !ne.Timeout() {
				s.log.Debug().Err(err).Str("client", ss.addr).Msg("subscription connection ended")
			}
			_ = ss.cc.Close() // its subscriptions are gone; unblocks the session
			return
		}
		ss.outMu.Lock()
		if buf[0] == '+' && sub.until != nil && bytes.Equal(buf, sub.until) {
			sub.ended = true
			ss.outMu.Unlock()
			return
		}
		_, werr := ss.cc.Write(buf)
		ss.outMu.Unlock()
		if werr != nil {
			_ = ss.cc.Close()
			_ = sub.bc.nc.Close()
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
func cmdUnsubscribe(s *Server, c redcon.Conn, st *client, args [][]byte) {
	name := strings.ToLower(string(args[0]))
	if len(args) == 1 {
		c.WriteArray(3)
		c.WriteBulkString(name)
		c.WriteNull()
		c.WriteInt(0)
		return
	}
	for _, a := range args[1:] {
		c.WriteArray(3)
		c.WriteBulkString(name)
		c.WriteBulk(a)
		c.WriteInt(0)
	}
}

// closeSubscription ends a client's subscription when it leaves.
func (st *client) closeSubscription() {
	if sub := st.sub; sub != nil {
		sub.bc.close()
		<-sub.done
		st.sub = nil
	}
}
