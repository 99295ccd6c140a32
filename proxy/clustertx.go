package proxy

import (
	"bytes"
	"slices"
	"strings"
	"time"

	"github.com/tidwall/redcon"

	"github.com/redlock-proxy/redlock-proxy/proxy/backend"
)

// Transactions, WATCH and blocking commands on a cluster backend. They run
// on a connection of the client's own (st.pinned), as with one Redis, to
// the primary of their keys' slot:
//
//   - MULTI opens the transaction on a primary at once (so that the
//     commands queued after it are checked as Redis checks them), and the
//     first queued command with keys moves it to the primary of its slot,
//     MULTI and what was queued sent again there. Every command of a
//     transaction must name keys of that slot: one of another slot is
//     answered CROSSSLOT and the transaction aborts at EXEC (EXECABORT),
//     as Redis aborts a transaction whose queuing failed. Keyless commands
//     queued run on the transaction's primary.
//   - WATCH binds the connection to its keys' slot the same way, until
//     EXEC, DISCARD or UNWATCH.
//   - A transaction whose slot moves to another primary before EXEC (a
//     MOVED to a queued command or to EXEC) is sent again, whole, to the
//     new owner; one that WATCHes is aborted instead (its WATCH was on the
//     old owner), as if its connection had failed (errPinnedLost). One
//     whose key has left a slot being migrated (ASK) is sent again, whole,
//     to the importing node after ASKING, as cluster clients do; one that
//     WATCHes waits for the migration to end.
//   - A blocking command runs on a connection to its slot's primary,
//     which replaces the one the client had unless that one is bound.

// clusterTx is what a client's own connection to a cluster node carries.
type clusterTx struct {
	conn     *backend.Conn // the connection it describes
	slot     int           // the slot it is bound to: -1 none
	multi    bool          // MULTI is open on it
	watching bool          // WATCH is in force on it
	queued   [][][]byte    // the commands queued since MULTI, to send again
	// asked: the importing node an ASK sent the open transaction to, where
	// it stays (after ASKING) until EXEC or DISCARD; "" none.
	asked string
}

// bound reports whether the connection must stay with its slot's primary.
func (tx *clusterTx) bound() bool { return tx != nil && (tx.multi || tx.watching) }

// clusterState is the client's own-connection state, made fresh when its
// connection is not the one the state describes (a new one, or none).
func clusterState(st *client) *clusterTx {
	if st.cluster == nil || st.cluster.conn != st.pinned || st.pinned == nil {
		st.cluster = &clusterTx{conn: st.pinned, slot: -1}
	}
	return st.cluster
}

// clusterRoute passes one command through to the cluster backend (forward's
// counterpart): on the client's own connection when pin is set or it has a
// bound one, else to its slot's primary on a pooled connection.
func (s *Server) clusterRoute(c redcon.Conn, st *client, args [][]byte, pin bool) {
	if !pin && (st.pinned == nil || !clusterState(st).bound()) {
		s.clusterForward(c, st, args)
		return
	}
	s.m.Passthrough.Inc()
	s.clusterPinned(c, st, args, pin)
}

// clusterPinned runs one command on the client's own connection to the
// primary of its keys' slot (or of the slot its connection is bound to),
// moving the connection there first, following the MOVED, ASK and
// TRYAGAIN it meets, and writes its reply.
func (s *Server) clusterPinned(c redcon.Conn, st *client, args [][]byte, pin bool) {
	p := &pinnedCmd{c: c, st: st, tx: clusterState(st), args: args, name: strings.ToLower(string(args[0])), pin: pin}
	keys, err := s.clusterKeys(p.name, args)
	if err != nil {
		s.log.Warn().Err(err).Msg("passthrough command failed")
		p.fail("ERR redlock-proxy: passthrough backend failed")
		return
	}
	p.slot = slotOf(keys)
	if p.slot == -2 || p.slot >= 0 && p.tx.slot >= 0 && p.slot != p.tx.slot && p.tx.bound() {
		p.fail(strings.TrimSuffix(errCrossSlot[1:], "\r\n"))
		return
	}
	for try := 0; ; try++ {
		if !s.placePinned(p) {
			return
		}
		reply, err := st.pinned.Do(args, s.pinnedTimeout(p))
		if err != nil {
			s.log.Warn().Err(err).Msg("passthrough command failed")
			p.lost()
			return
		}
		if s.followPinned(p, reply, try) {
			continue
		}
		c.WriteRaw(reply)
		p.noteReply(reply)
		return
	}
}

// pinnedCmd is one command on a client's own connection to a cluster
// node (clusterPinned), and where it is to go next.
type pinnedCmd struct {
	c    redcon.Conn
	st   *client
	tx   *clusterTx // st's own-connection state
	args [][]byte
	name string // args[0] in lower case
	slot int    // its keys' slot: -1 none
	pin  bool   // it needs the connection of its own (a blocking command)
	// target is the node it goes to next ("": the primary of its slot, or
	// of the slot the connection is bound to, in the current map), asking
	// that the next connection opens with ASKING (an ASK redirect).
	target string
	asking bool
}

// fail answers the command with an error, which aborts an open
// transaction at EXEC.
func (p *pinnedCmd) fail(msg string) {
	if p.st.multi {
		p.st.dirty = true
	}
	p.c.WriteError(msg)
}

// lost closes the client's own connection and answers errPinnedLost: its
// WATCH and open transaction are gone.
func (p *pinnedCmd) lost() {
	if p.st.pinned != nil {
		p.st.pinned.Close()
	}
	p.st.lostPinned()
	p.st.cluster = nil
	p.c.WriteError(errPinnedLost)
}

// placePinned readies the client's own connection for the command: to the
// node the command goes to (p.target, chosen from the slot map when not
// set), a connection to another node closed (or, under WATCH, the client
// told its connection is lost) and a new one opened (openPinned). It
// reports whether the command can be sent; if not, it was answered.
func (s *Server) placePinned(p *pinnedCmd) bool {
	st, tx := p.st, p.tx
	m, err := s.cl.Current()
	if err != nil {
		s.log.Warn().Err(err).Msg("passthrough backend unreachable")
		p.fail("ERR redlock-proxy: passthrough backend unreachable")
		return false
	}
	switch {
	case p.target != "":
	case tx.multi && tx.asked != "":
		p.target = tx.asked
	case p.slot >= 0 && m.Owner(p.slot) != "":
		p.target = m.Owner(p.slot)
	case tx.slot >= 0 && m.Owner(tx.slot) != "":
		p.target = m.Owner(tx.slot)
	}
	if st.pinned != nil && p.target != "" && st.pinned.Pool().Addr() != p.target {
		if tx.watching {
			p.lost()
			return false
		}
		st.pinned.Close()
		st.pinned = nil
	}
	if st.pinned == nil {
		addr := p.target
		if addr == "" {
			addr = m.Primaries()[0]
		}
		return s.openPinned(p, addr)
	}
	return true
}

// openPinned opens the client's own connection to addr: ASKING first
// after an ASK, or for a transaction an ASK sent to addr, and the open
// transaction's MULTI and queued commands sent again (replayTx). It
// reports whether the command can be sent; if not, it was answered.
func (s *Server) openPinned(p *pinnedCmd, addr string) bool {
	st, tx := p.st, p.tx
	bc, err := s.cl.Pool(addr, st.proto == 3).Dial()
	if err != nil {
		s.log.Warn().Err(err).Msg("passthrough backend unreachable")
		st.lostPinned()
		st.cluster = nil
		p.fail("ERR redlock-proxy: passthrough backend unreachable")
		return false
	}
	st.pinned, tx.conn = bc, bc
	if p.asking || tx.multi && tx.asked != "" && tx.asked == addr {
		// Inside MULTI the flag lasts until EXEC: the whole
		// transaction runs on the importing node.
		if r, err := bc.Do([][]byte{[]byte("ASKING")}, s.passthroughTimeout()); err != nil || len(r) == 0 || r[0] != '+' {
			p.lost()
			return false
		}
		p.asking = false
	}
	if tx.multi && !s.replayTx(bc, tx) {
		p.lost()
		return false
	}
	return true
}

// pinnedTimeout bounds the command's round trip: the passthrough timeout,
// but none for a blocking command outside a transaction, which waits as
// long as the client asked.
func (s *Server) pinnedTimeout(p *pinnedCmd) time.Duration {
	if p.pin && !p.st.multi && !p.tx.multi && p.name != "multi" {
		return 0
	}
	return s.passthroughTimeout()
}

// followPinned reads a reply that sends the command elsewhere or asks to
// try again (at most backend.MaxRedirects times: try is how many came
// before), and readies the next try: a MOVED to the new owner, an ASK to
// the importing node after ASKING (the whole transaction when one is
// open), a TRYAGAIN or CLUSTERDOWN outside a transaction after a pause. It
// reports whether the command is to be sent again; if not, reply is the
// client's.
func (s *Server) followPinned(p *pinnedCmd, reply []byte, try int) bool {
	st, tx := p.st, p.tx
	if kind, sl, to, ok := backend.Redirect(reply); ok && try < backend.MaxRedirects {
		switch {
		case kind == "MOVED":
			s.cl.Moved(sl, to)
			p.target = to
		case !tx.watching:
			// The slot is being migrated and the key has moved: the
			// command, or the whole transaction, runs on the
			// importing node after ASKING, as a cluster client sends
			// it.
			p.target, p.asking = to, true
			if tx.multi {
				tx.asked = to
			}
			st.pinned.Close()
			st.pinned = nil
			return true
		default:
			// A WATCH binds the connection to the migrating node:
			// wait for the migration to end.
			time.Sleep(time.Duration(try+1) * 5 * time.Millisecond)
			p.target = ""
		}
		if tx.multi {
			// The node flagged or discarded the transaction: start
			// it again.
			st.pinned.Close()
			st.pinned = nil
		}
		return true
	}
	if backend.Retryable(reply) && try < backend.MaxRedirects && !tx.multi {
		time.Sleep(time.Duration(try+1) * 5 * time.Millisecond)
		p.target = ""
		return true
	}
	return false
}

// noteReply keeps the connection's state as the reply written to the
// client leaves it: a transaction opened, queued to, ended; a WATCH begun
// or ended.
func (p *pinnedCmd) noteReply(reply []byte) {
	st, tx, name := p.st, p.tx, p.name
	ok := len(reply) > 0 && reply[0] == '+'
	switch {
	case name == "multi" && ok:
		tx.multi, tx.queued, tx.asked = true, nil, ""
	case name == "exec" || name == "discard":
		tx.multi, tx.watching, tx.slot, tx.queued, tx.asked = false, false, -1, nil, ""
	case name == "unwatch" && !tx.multi: // in MULTI it is queued
		tx.watching, tx.slot = false, -1
	case name == "watch" && ok:
		tx.watching, tx.slot = true, p.slot
	case tx.multi && name != "watch" && len(reply) > 0 && reply[0] == '-':
		// The node refused to queue it and will abort the
		// transaction at EXEC; a transaction sent again to another
		// primary (replayTx) would not know: the proxy aborts it.
		st.dirty = true
	case tx.multi && bytes.HasPrefix(reply, []byte("+QUEUED")):
		q := make([][]byte, len(p.args))
		for i, a := range p.args {
			q[i] = slices.Clone(a)
		}
		tx.queued = append(tx.queued, q)
		if p.slot >= 0 {
			tx.slot = p.slot
		}
	}
}

// replayTx opens the transaction tx on a new connection: MULTI and the
// commands queued so far.
func (s *Server) replayTx(bc *backend.Conn, tx *clusterTx) bool {
	for _, cmd := range append([][][]byte{{[]byte("MULTI")}}, tx.queued...) {
		r, err := bc.Do(cmd, s.passthroughTimeout())
		if err != nil || len(r) == 0 || r[0] != '+' {
			return false
		}
	}
	return true
}

// clusterRefusal refuses what a cluster backend does not serve through the
// proxy ("" for the rest): sharded subscriptions (SSUBSCRIBE), whose
// channels live on their slot's primary; commands with keys on a
// subscribed RESP3 connection, which would run on the subscription's node
// (the first seed) whatever their slot; and CLIENT TRACKING, whose
// invalidations would come from one node only. Subscriptions themselves
// (SUBSCRIBE, PSUBSCRIBE) work: a cluster passes every message to every
// node.
func (s *Server) clusterRefusal(st *client, args [][]byte) string {
	name := strings.ToLower(string(args[0]))
	switch {
	case name == "ssubscribe":
		return "ERR redlock-proxy: SSUBSCRIBE is not supported with a Redis Cluster backend; use SUBSCRIBE"
	case name == "client" && len(args) > 2 && strings.EqualFold(string(args[1]), "tracking") && strings.EqualFold(string(args[2]), "on"):
		return "ERR redlock-proxy: CLIENT TRACKING is not supported with a Redis Cluster backend"
	case st.sub != nil && st.sub.resp3 && lookup(args[0]) == nil || st.sub != nil && st.sub.resp3 && !isPubSub(name):
		if keys, err := s.clusterKeys(name, args); err == nil && len(keys) > 0 {
			return "ERR redlock-proxy: commands with keys on a subscribed connection are not supported with a Redis Cluster backend; send them on another connection"
		}
	}
	return ""
}

// isPubSub reports whether a command is one of the subscription commands.
func isPubSub(name string) bool {
	switch name {
	case "subscribe", "psubscribe", "unsubscribe", "punsubscribe", "sunsubscribe", "ping", "reset", "quit":
		return true
	}
	return false
}
