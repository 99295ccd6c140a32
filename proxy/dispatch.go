package proxy

import (
	"bytes"
	"strings"

	"github.com/redlock-proxy/redlock-proxy/proxy/backend"
	"github.com/redlock-proxy/redlock-proxy/proxy/quorum"
	"github.com/redlock-proxy/redlock-proxy/proxy/wire"
	"github.com/tidwall/redcon"
)

func (s *Server) handle(c redcon.Conn, cmd redcon.Command) {
	st, _ := c.Context().(*client)
	if st == nil || len(cmd.Args) == 0 {
		return
	}
	e := lookup(cmd.Args[0])
	if !st.authed && s.authRequired() && refusedBeforeAuth(c, e, cmd.Args) {
		return
	}
	if st.user != "" && s.userGone(st) {
		// A reload removed its user: closed, as Redis closes the
		// connections of a user it deletes.
		s.log.Info().Str("client", c.RemoteAddr()).Str("user", st.user).Msg("closing a client whose user the reload removed")
		c.Close()
		return
	}
	if s.cl != nil {
		if msg := s.clusterRefusal(st, cmd.Args); msg != "" { // clustertx.go
			c.WriteError(msg)
			return
		}
	}
	if st.sub != nil {
		if ss, ok := c.(*session); ok && s.subscribed(ss, st, e, nameOf(e, cmd.Args[0]), cmd.Args) {
			return
		}
	}
	if st.multi {
		if name := nameOf(e, cmd.Args[0]); !queueable(name) {
			s.queueInMulti(c, st, e, name, cmd.Args)
			return
		}
	} else if s.plainPassthrough(st, e, cmd.Args) || s.batchedRead(c, st, e, cmd.Args) {
		// Its reply queues behind any lock operations in flight.
		// Done with the arguments when it returns: the shared and the
		// pinned backend connections copy them into their write before
		// the replies come.
		if ss, ok := c.(*session); ok && s.mixed() && ss.busy() {
			// Lock operations in flight write the backend too (a lock's
			// mirror, mixed.go): this command runs after them.
			ss.waitIdle()
		}
		s.forwardPipeline(c, st, cmd)
		return
	}
	ss, _ := c.(*session)
	tracking := st.sub != nil && st.sub.tracking
	if keys, ok := s.groupable(st, cmd.Args); ok && ss != nil && !tracking && (len(c.PeekPipeline()) > 0 || ss.busy()) &&
		s.refusal(st, e, cmd.Args) == "" {
		// More follows, or is in flight: run it concurrently. (Alone,
		// it runs here, at less cost; refused, it is answered below, in
		// its turn.)
		s.startOp(ss, st, cmd.Args, keys)
		return
	}
	if ss != nil && ss.busy() {
		ss.waitIdle() // anything else runs once the operations in flight are done
	}
	if msg := s.refusal(st, e, cmd.Args); msg != "" {
		c.WriteError(msg)
		return
	}
	if e == nil || !e.has(fReleases) {
		keepInput(c)
	}
	if e == nil {
		s.forward(c, st, cmd.Args, false)
		return
	}
	s.serve(e, c, st, cmd.Args)
	if tracking && st.sub != nil && st.sub.tracking {
		s.invalidateLockKeys(c, e.name, cmd.Args)
	}
}

// refusedBeforeAuth answers, as Redis does, a command (e: its row, or nil)
// that a client must not send before it authenticates (preAuth), and
// reports whether it did.
func refusedBeforeAuth(c redcon.Conn, e *command, args [][]byte) bool {
	name := nameOf(e, args[0])
	if preAuth(name, args) {
		return false
	}
	if name == "hello" {
		c.WriteError("NOAUTH HELLO must be called with the client already authenticated, otherwise the HELLO <proto> AUTH <user> <pass> option can be used to authenticate the client and select the RESP protocol version at the same time")
	} else {
		c.WriteError("NOAUTH Authentication required.")
	}
	return true
}

// queueInMulti queues a command of the client st, in MULTI, on its backend
// connection (name: the command's, which the proxy does not handle itself
// in MULTI: queueable). Refused (its backend connection was lost, or
// multiRefusal), it aborts the transaction instead: st.dirty, EXEC will
// answer EXECABORT.
func (s *Server) queueInMulti(c redcon.Conn, st *client, e *command, name string, args [][]byte) {
	if st.pinned == nil && (st.sub == nil || !st.sub.resp3) {
		// Its backend connection failed (cmdMulti, lostPinned):
		// the transaction is aborted, nothing runs.
		st.dirty = true
		c.WriteError(errPinnedLost)
		return
	}
	if msg := s.multiRefusal(st, name, args); msg != "" {
		st.dirty = true
		c.WriteError(msg)
		return
	}
	// Queued on the client's backend connection.
	if e == nil || !e.has(fReleases) {
		keepInput(c)
	}
	s.noteQueued(st, name, args)
	s.forward(c, st, args, false)
}

// plainPassthrough reports whether a command of the client st (e, its
// entry in the command table) goes to the backend as it is, with no state
// of the proxy's: a command the proxy does not handle, or GET and SET of a
// key that is not a lock key, which the boundary lets through
// (boundary.go).
func (s *Server) plainPassthrough(st *client, e *command, args [][]byte) bool {
	return (e == nil || e.has(fPassGetSet) && len(args) > 1 && !s.isLockKey(args[1]) || s.mixed() && mixedData(e, args) ||
		e.has(fSorted) && !blocking(e.name) && s.permitKeyOf(e.name, args) == nil) && s.refusal(st, e, args) == ""
}

// hasNX reports whether a SET has the NX option (a lock acquire).
func hasNX(args [][]byte) bool {
	for _, a := range args[min(3, len(args)):] {
		if len(a) == 2 && (a[0]|0x20) == 'n' && (a[1]|0x20) == 'x' {
			return true
		}
	}
	return false
}

// maxBatch bounds how many pipelined commands go to the backend in one write.
const maxBatch = 256

// forwardPipeline passes cmd through together with the plain passthrough
// commands the client pipelined right after it: one write to the backend,
// replies read back in order. The commands after the first that is not
// plain are then served one by one, as usual.
func (s *Server) forwardPipeline(c redcon.Conn, st *client, cmd redcon.Command) {
	next := c.PeekPipeline()
	n := 0
	// reads: GETs of lock keys joined (batchedRead), whose replies are
	// looked at: the batch goes on the shared connection.
	reads := s.mixed() && s.batchedRead(nil, st, lookup(cmd.Args[0]), cmd.Args)
	for n < len(next) && n+1 < maxBatch && len(next[n].Args) > 0 {
		e := lookup(next[n].Args[0])
		if !s.plainPassthrough(st, e, next[n].Args) {
			if !s.batchedRead(nil, st, e, next[n].Args) {
				break
			}
			reads = true
		}
		n++
	}
	ss, _ := c.(*session)
	var batch []redcon.Command
	if ss != nil {
		batch = ss.batch[:0]
	}
	batch = append(batch, cmd)
	var rest []redcon.Command
	if n > 0 {
		rest = c.ReadPipeline()
		batch = append(batch, rest[:n]...)
	}
	var r *backend.MuxReq // the session's own, reused
	if ss != nil {
		if ss.req == nil {
			ss.req = new(backend.MuxReq)
		}
		r = ss.req
	}
	switch {
	case s.cl != nil:
		s.clusterBatch(c, st, batch) // clusterroute.go
	case reads:
		// On the shared connection (no client with reads has one of its
		// own), in turns of at most backend.MuxMaxBatch, whose replies are held
		// at once.
		for b := batch; len(b) > 0; {
			k := min(len(b), backend.MuxMaxBatch)
			s.forwardShared(c, r, b[:k])
			b = b[k:]
		}
	case st.pinned != nil || len(batch) > backend.MuxMaxBatch:
		// After WATCH: stay on the client's connection. A long batch gets a
		// connection of its own, its replies passed on one by one, so that
		// they are not all held at once for a client that reads slowly.
		s.forwardMany(c, st, batch)
	default:
		s.forwardShared(c, r, batch)
	}
	if ss != nil {
		// Done with: it points into the input, which it must not keep.
		clear(batch)
		ss.batch = nil
		if cap(batch) <= spareMax {
			ss.batch = batch[:0]
		}
	}
	for _, x := range rest[n:] {
		s.dispatch(c, x)
	}
}

// forwardShared passes a batch of plain commands through on a shared
// backend connection (backend.Mux), with r as its request (nil: a new one).
func (s *Server) forwardShared(c redcon.Conn, r *backend.MuxReq, batch []redcon.Command) {
	s.m.Passthrough.Add(float64(len(batch)))
	if r == nil && s.mixed() {
		r = new(backend.MuxReq) // its reply ends are read below
	}
	out, got, err := s.muxFor(c).Do(r, batch)
	if got > 0 {
		if s.mixed() {
			s.writeBatched(c, r, batch[:got], out)
		} else {
			c.WriteRaw(out)
		}
		handOver(c)
	}
	if err != nil {
		s.log.Warn().Err(err).Msg("passthrough command failed")
		for range batch[got:] {
			c.WriteError(errBackendFailed)
		}
	}
}

// forwardMany is forward for several commands sent in one write.
func (s *Server) forwardMany(c redcon.Conn, st *client, batch []redcon.Command) {
	s.m.Passthrough.Add(float64(len(batch)))
	bc, pooled, err := s.backendFor(st, false)
	if err != nil {
		s.log.Warn().Err(err).Msg("passthrough backend unreachable")
		for range batch {
			c.WriteError("ERR redlock-proxy: passthrough backend unreachable")
		}
		return
	}
	done, err := bc.DoMany(batch, s.passthroughTimeout(), func(reply []byte) {
		c.WriteRaw(reply)
		handOver(c) // a large reply leaves redcon's buffer before the next is read
	})
	if err != nil {
		bc.Close()
		s.log.Warn().Err(err).Msg("passthrough command failed")
		msg := st.lostBackend(pooled)
		for range batch[done:] {
			c.WriteError(msg)
		}
		return
	}
	if pooled {
		bc.Pool().Put(bc)
	}
}

// errPinnedLost answers the commands of a client whose own backend
// connection failed.
const errPinnedLost = "ERR redlock-proxy: passthrough backend failed; WATCH was reset, and an open MULTI is aborted at EXEC"

// errBackendFailed answers a command whose pooled or shared backend
// connection failed: the client had no WATCH or MULTI on it to lose.
const errBackendFailed = "ERR redlock-proxy: passthrough backend failed"

// lostBackend is the error for a command whose backend connection failed
// (pooled: one of the pool's; else the client's own, which is dropped).
func (st *client) lostBackend(pooled bool) string {
	if pooled {
		return errBackendFailed
	}
	st.lostPinned()
	return errPinnedLost
}

// lostPinned drops the client's own backend connection, which failed: its
// WATCH is gone, and a transaction open on it is aborted (the commands the
// client queues meanwhile are refused, never run one by one; EXEC answers
// EXECABORT), as the backend's transaction was lost with the connection.
func (st *client) lostPinned() {
	st.pinned = nil
	st.dirty = st.dirty || st.multi
}

// multiRefusal is the error for a command of the client st that cannot
// be queued in MULTI ("" for one that can): what the boundary refuses
// anywhere (boundary.go), first, as Redis checks a user's permissions
// before it queues a command; then lock commands, those that would change
// what the client's backend connection is for, ACL's subcommands that the
// proxy answers, and scripts on a voting backend.
func (s *Server) multiRefusal(st *client, name string, args [][]byte) string {
	if msg := s.refusal(st, lookup(args[0]), args); msg != "" {
		return msg
	}
	switch {
	case s.bnd.voting && s.bnd.backendScripts && isScriptCommand(lookup(args[0])):
		return "ERR redlock-proxy: scripts cannot be queued in MULTI while the backend is a voting master; the transaction will be aborted"
	case s.bnd.voting && s.bnd.reserved && (name == "scan" || name == "keys" || name == "randomkey" || name == "dbsize"):
		return "ERR redlock-proxy: " + strings.ToUpper(name) + " cannot be queued in MULTI while the backend is a voting master (its reply would name the proxy's records); the transaction will be aborted"
	case name == "select":
		return "ERR redlock-proxy: SELECT cannot be queued in MULTI through the proxy (SELECT before MULTI); the transaction will be aborted"
	case name == "subscribe" || name == "psubscribe" || name == "ssubscribe":
		return "ERR redlock-proxy: " + strings.ToUpper(name) + " cannot be queued in MULTI through the proxy; the transaction will be aborted"
	case name == "client" && len(args) > 1 && strings.EqualFold(string(args[1]), "tracking"):
		return "ERR redlock-proxy: CLIENT TRACKING cannot be queued in MULTI through the proxy; the transaction will be aborted"
	case s.touchesLockKey(name, args):
		return errLockInMulti
	case name == "acl" && len(args) > 1 && aclAnswered(args[1]):
		return "ERR redlock-proxy: ACL " + strings.ToUpper(quorum.Echo(args[1])) + " cannot be queued in MULTI through the proxy (the proxy answers it, for its own users); the transaction will be aborted"
	}
	return ""
}

// errLockInMulti refuses a lock command in MULTI.
const errLockInMulti = "ERR redlock-proxy: lock commands cannot be queued in MULTI; the transaction will be aborted"

// isScriptCommand reports whether a command (e: its row, or nil) runs a
// script or a function.
func isScriptCommand(e *command) bool { return e != nil && e.has(fScript) }

// touchesLockKey reports whether a command would run on the quorum (or is
// refused there: a sorted-set command on a semaphore's permits).
func (s *Server) touchesLockKey(name string, args [][]byte) bool {
	if e := commands[name]; e != nil && e.has(fSorted) && s.permitKeyOf(name, args) != nil {
		return true
	}
	if s.mixed() && !s.mixedLockOp(name, args) {
		return false // data, on the backend (mixed.go)
	}
	for _, k := range lockKeysOf(name, args) {
		if s.isLockKey(k) {
			return true
		}
	}
	return false
}

// lockKeysOf is the keys of a command that may touch a lock key (nil for
// other commands), lock keys or not: where its row puts them.
func lockKeysOf(name string, args [][]byte) [][]byte {
	if e := commands[name]; e != nil && e.served() {
		return e.keysOf(args)
	}
	return nil
}

// queueable lists what the proxy itself handles while a client is in MULTI;
// everything else is queued on the client's backend connection.
func queueable(name string) bool {
	switch name {
	case "exec", "discard", "multi", "quit", "reset", "watch":
		return true
	}
	return false
}

// lookup finds a command name, in any case, in the command table: nil when
// the proxy does not handle it. One map lookup, and no allocation.
func lookup(b []byte) *command {
	var buf [24]byte
	if len(b) > len(buf) {
		return commands[lowerSlow(b)]
	}
	l := buf[:len(b)]
	for i, c := range b {
		switch {
		case c >= 0x80:
			return commands[lowerSlow(b)]
		case c >= 'A' && c <= 'Z':
			c += 'a' - 'A'
		}
		l[i] = c
	}
	return commands[string(l)]
}

// nameOf is the lower-case name of a command whose name is b and whose
// entry in the command table is e (nil if none).
func nameOf(e *command, b []byte) string {
	if e != nil {
		return e.name
	}
	return lowerSlow(b)
}

func lowerSlow(b []byte) string {
	for _, c := range b {
		if c >= 'A' && c <= 'Z' {
			return string(bytes.ToLower(b))
		}
	}
	return string(b)
}

func wrongArgs(c redcon.Conn, name string) {
	c.WriteError("ERR wrong number of arguments for '" + strings.ToLower(quorum.Echo([]byte(name))) + "' command")
}

// forward passes a command through to the backend: on the client's pinned
// connection if it has one, else on a pooled connection.
func (s *Server) forward(c redcon.Conn, st *client, args [][]byte, pin bool) {
	if sub := st.sub; sub != nil && sub.resp3 && !pin {
		// A RESP3 client with a connection of its own (pubsub.go,
		// tracking.go): the command runs there, its reply relayed.
		if ss, ok := c.(*session); ok {
			s.m.Passthrough.Inc()
			s.sendSub(ss, st, args)
			return
		}
	}
	if s.cl != nil {
		s.clusterRoute(c, st, args, pin) // clustertx.go
		return
	}
	s.m.Passthrough.Inc()
	bc, pooled, err := s.backendFor(st, pin)
	if err != nil {
		s.log.Warn().Err(err).Msg("passthrough backend unreachable")
		c.WriteError("ERR redlock-proxy: passthrough backend unreachable")
		return
	}
	timeout := s.passthroughTimeout()
	if pin && !st.multi {
		timeout = 0 // blocking commands wait as long as the client asked
	}
	reply, err := bc.Do(args, timeout)
	if err != nil {
		bc.Close()
		s.log.Warn().Err(err).Msg("passthrough command failed")
		c.WriteError(st.lostBackend(pooled))
		return
	}
	c.WriteRaw(reply)
	if pooled {
		bc.Pool().Put(bc)
	}
}

// beFor is the backend pool of a client's protocol.
func (s *Server) beFor(st *client) *backend.Pool {
	d := s.dbOf(st)
	if st.proto == 3 {
		return d.be3
	}
	return d.be
}

// muxFor is the shared passthrough connection of a client's protocol.
func (s *Server) muxFor(c redcon.Conn) *backend.Mux {
	st, _ := c.Context().(*client)
	d := s.dbOf(st)
	if st != nil && st.proto == 3 {
		return d.mux3
	}
	return d.mux
}

func (s *Server) backendFor(st *client, pin bool) (bc *backend.Conn, pooled bool, err error) {
	if st.pinned != nil {
		return st.pinned, false, nil
	}
	be := s.beFor(st)
	if !pin {
		bc, err = be.Get()
		return bc, true, err
	}
	bc, err = be.Dial()
	if err == nil {
		st.pinned = bc
	}
	return bc, false, err
}

func cmdMulti(s *Server, c redcon.Conn, st *client, args [][]byte) route {
	if st.multi {
		c.WriteError("ERR MULTI calls can not be nested")
		return replied
	}
	s.forward(c, st, args, true)
	// Without a backend connection (the backend failed: the error is
	// answered) the transaction is open all the same, and aborted: the
	// commands a client pipelines after MULTI are refused, never run one
	// by one, and EXEC answers EXECABORT.
	st.multi, st.dirty, st.multiEnds, st.multiN = true, st.pinned == nil, nil, 0
	return replied
}

func cmdExec(s *Server, c redcon.Conn, st *client, args [][]byte) route {
	if !st.multi {
		c.WriteError("ERR EXEC without MULTI")
		return replied
	}
	ends := st.multiEnds
	st.multiEnds, st.multiN = nil, 0
	if st.dirty {
		if st.pinned != nil {
			s.forward(wire.Discard{}, st, [][]byte{[]byte("DISCARD")}, true)
		}
		st.multi, st.dirty = false, false
		c.WriteError("EXECABORT Transaction discarded because of previous errors.")
		return replied
	}
	if len(ends) == 0 {
		s.forward(c, st, args, true)
		st.multi = false
		return replied
	}
	ec := &wire.Tee{Conn: c}
	s.forward(ec, st, args, true)
	st.multi = false
	s.endLocks(st, ends, ec.Last)
	return replied
}

func cmdDiscard(s *Server, c redcon.Conn, st *client, args [][]byte) route {
	if !st.multi {
		c.WriteError("ERR DISCARD without MULTI")
		return replied
	}
	if st.pinned == nil && (st.sub == nil || !st.sub.resp3) {
		c.WriteString("OK") // the backend's transaction was lost with its connection
	} else {
		s.forward(c, st, args, true)
	}
	st.multi, st.dirty, st.multiEnds, st.multiN = false, false, nil, 0
	return replied
}
