package proxy

import (
	"bytes"
	"hash/maphash"
	"runtime"
	"runtime/debug"
	"time"

	"github.com/redlock-proxy/redlock-proxy/proxy/quorum"
	"github.com/redlock-proxy/redlock-proxy/proxy/wire"
	"github.com/tidwall/redcon"

	"github.com/redlock-proxy/redlock-proxy/proxy/lockscripts"
)

// Lock operations pipelined on one connection run concurrently. The
// clients most used from Node, Java and .NET put a process's requests on
// one connection and pipeline them; run one after another, each waiting
// for its quorum, they would get one lock operation per round trip to the
// masters.
//
// A lock operation on lock keys (groupable) starts as soon as it is read,
// on a runner goroutine, its commands joining the masters' batches with
// everyone else's, and the session reads on. Its reply goes into a buffer
// of its own, queued in the order of the requests (session.out); whoever
// completes the operation at the head of the queue writes out every reply
// that is ready behind it. An operation waits for the earlier operations
// of the connection that share a key with it, so that its effects come
// after theirs, as on one Redis (SET NX then the unlock script of the key
// releases it; two SET NX of a key grant at most one). At most
// proxy.max_inflight operations of a connection run at once; the session
// stops reading while that many do, and TCP holds the client back.
//
// Other commands keep their order: a plain passthrough command runs at
// once and its reply queues behind those in flight; any other command
// (MULTI, WAIT, leases, AUTH, connection state) waits until every operation
// in flight is done, then runs as it always did.

// groupable reports whether a command may run concurrently with the
// connection's others: a quorum operation on lock keys only, with no
// connection state (no MULTI, no waiting, no lease, no backend
// connection), once the client may run commands at all. It returns the
// keys the operation acts on.
func (s *Server) groupable(st *client, args [][]byte) ([][]byte, bool) {
	if len(args) < 2 || st.multi || (!st.authed && s.authRequired()) {
		return nil, false
	}
	e := lookup(args[0])
	if e == nil {
		return nil, false
	}
	keys := args[1:2]
	switch e.name {
	case "set":
		if _, msg := quorum.ParseSet(args); msg != "" {
			return nil, false
		}
	case "setnx", "get", "pttl", "ttl", "getdel", "getex", "pexpire", "expire", "pexpireat", "expireat",
		"persist", "setex", "psetex", "lock.release", "lock.extend", "lock.info":
	case "exists", "del", "unlink":
		keys = args[1:]
	case "zrem":
		if len(args) < 3 || !s.isPermitKey(args[1]) {
			return nil, false
		}
	case "eval", "evalsha":
		var ok bool
		if keys, ok = s.lockScriptKeys(e.name, args); !ok {
			return nil, false
		}
	case "lock.acquire":
		if o, msg := quorum.ParseLockAcquire(args); msg != "" || o.Lease || o.Wait > 0 {
			return nil, false
		}
	default:
		return nil, false
	}
	for _, k := range keys {
		if !s.isLockKey(k) || bytes.HasPrefix(k, internalPrefix) {
			return nil, false
		}
	}
	return keys, true
}

// lockScriptKeys returns the keys of an EVAL or EVALSHA of a recognised
// lock script whose keys are all lock keys (and one, unless the script
// takes several): a quorum operation.
func (s *Server) lockScriptKeys(name string, args [][]byte) ([][]byte, bool) {
	if len(args) < 3 {
		return nil, false
	}
	nk, err := parseInt(args[2])
	if err != nil || nk < 1 || nk > int64(len(args)-3) {
		return nil, false
	}
	var spec *lockscripts.Spec
	if name == "evalsha" {
		if e, ok := s.scripts.Get(string(args[1])); ok {
			spec = e.Spec
		} else {
			spec = lockscripts.BySHA(string(args[1]))
		}
	} else {
		_, e := s.scripts.Add(args[1])
		spec = e.Spec
	}
	if spec == nil || spec.Op == lockscripts.OpNotALock || nk > 1 && !spec.Multi {
		return nil, false
	}
	return args[3 : 3+nk], true
}

// pending is one reply of a connection queued behind lock operations in
// flight: an operation's, or, done from the start, the replies of other
// commands written meanwhile.
type pending struct {
	ss    *session
	st    *client
	args  [][]byte
	keys  [][]byte // the keys it acts on (of args)
	e     *command // its row
	reply wire.Buf // its reply, written out in request order
	small [32]byte // reply's first storage: most replies fit
	// Under session.outMu: how many earlier operations of the connection
	// it waits for (it starts when none is left), and the later ones that
	// wait for it.
	waits   int
	next    []*pending
	nextBuf [1]*pending // next's first storage
	ready   bool        // its reply is written
	panic   any
}

// inflight is what a session keeps of its lock operations in flight.
// Its fields but slots are under session.outMu.
type inflight struct {
	queue []*pending          // replies not yet written, in request order, from head on
	head  int                 //
	last  map[uint64]*pending // by key's hash, the last operation in flight on it
	slots chan struct{}       // one per operation running: at most max_inflight
	// idle receives when the queue empties while the session waits for
	// that (waiting); only the session's goroutine waits.
	idle    chan struct{}
	waiting bool
	// flushing: an operation that finished is about to write out what is
	// ready; others that finish meanwhile leave it to that one.
	flushing bool
	out      []byte // what the one flushing writes; kept for the next
}

// queued reports whether replies wait to be written.
func (f *inflight) queued() bool { return f.head < len(f.queue) }

// startOp starts a groupable lock operation of the session (keys are the
// keys it acts on): it waits for a slot (the session stops reading while
// max_inflight run), queues its reply, and hands it to a runner.
func (s *Server) startOp(ss *session, st *client, args, keys [][]byte) {
	f := &ss.fly
	if f.slots == nil {
		f.slots = make(chan struct{}, max(s.cfg.Proxy.MaxInflight, 1))
		f.last = map[uint64]*pending{}
		f.idle = make(chan struct{}, 1)
	}
	f.slots <- struct{}{} // blocks while max_inflight run
	op := &pending{ss: ss, st: st, args: args, keys: keys, e: lookup(args[0])}
	op.reply.B, op.reply.RESP3 = op.small[:0], ss.wr.RESP3
	keepInput(ss) // the operation reads its arguments after this batch
	s.m.PipelinedOps.Inc()
	if ss.queueReply(op) {
		s.ops.run(op)
	}
}

// runOp runs one operation, writing its reply into its buffer, then writes
// out what is ready at the head of the queue.
func (s *Server) runOp(op *pending) {
	ss := op.ss
	defer func() { <-ss.fly.slots }()
	defer ss.opDone(op)
	defer func() {
		if r := recover(); r != nil {
			op.panic = r
			s.log.Error().Str("client", ss.addr).Interface("panic", r).Str("stack", string(debug.Stack())).
				Msg("command handler panicked; closing the client")
		}
	}()
	s.serve(op.e, wire.BufConn{W: &op.reply}, op.st, op.args)
}

// queueReply queues op behind the replies not yet written, and after the
// operations in flight that share a key with it; it reports whether op can
// start now (otherwise the last of those starts it, in opDone).
//
// Keys are told apart by a hash: two keys with the same make an operation
// wait for one it did not need to, never run before one it must follow.
func (ss *session) queueReply(op *pending) bool {
	f := &ss.fly
	ss.outMu.Lock()
	defer ss.outMu.Unlock()
	if !f.queued() && len(ss.wr.B) > 0 {
		// What the session wrote before goes first.
		_ = ss.flush()
	}
	for _, k := range op.keys {
		h := maphash.Bytes(keySeed, k)
		if prev := f.last[h]; prev != nil && prev != op {
			if prev.next == nil {
				prev.next = prev.nextBuf[:0]
			}
			prev.next = append(prev.next, op)
			op.waits++
		}
		f.last[h] = op
	}
	f.queue = append(f.queue, op)
	return op.waits == 0
}

// internalPrefix begins the proxy's own keys on the masters.
var internalPrefix = []byte("redlock-proxy:")

// keySeed seeds the hashes of keys in flight (inflight.last).
var keySeed = maphash.MakeSeed()

// opDone marks op's reply ready and writes out the replies ready at the
// head of the queue, in one write. The operations of one batch of a
// master's replies finish one after another: the first to finish yields
// once before it writes, so that the others mark theirs ready too and one
// write carries them all.
func (ss *session) opDone(op *pending) {
	f := &ss.fly
	ss.outMu.Lock()
	op.ready = true
	for _, k := range op.keys {
		if h := maphash.Bytes(keySeed, k); f.last[h] == op { // none started on the key since
			delete(f.last, h)
		}
	}
	for _, n := range op.next {
		if n.waits--; n.waits == 0 {
			ss.s.ops.run(n)
		}
	}
	op.next = nil
	if f.flushing {
		ss.outMu.Unlock()
		return // the one flushing writes this one too
	}
	f.flushing = true
	ss.outMu.Unlock()
	runtime.Gosched()
	ss.outMu.Lock()
	defer ss.outMu.Unlock()
	f.flushing = false
	out := f.out[:0]
	for f.queued() && f.queue[f.head].ready {
		p := f.queue[f.head]
		f.queue[f.head] = nil
		f.head++
		out = append(out, p.reply.B...)
		if p.panic != nil {
			out = redcon.AppendError(out, "ERR redlock-proxy: internal error; closing the connection")
			ss.sendLocked(out)
			_ = ss.cc.Close()
			out = out[:0]
		}
	}
	ss.sendLocked(out)
	if f.out = out[:0]; cap(out) > maxReplyBuf {
		f.out = nil
	}
	if !f.queued() {
		// Empty: its storage serves the next, unless a long pipeline grew it.
		if f.queue, f.head = f.queue[:0], 0; cap(f.queue) > spareMax {
			f.queue = nil
		}
		if f.waiting {
			f.waiting = false
			f.idle <- struct{}{}
		}
	}
}

// sendLocked writes b to the client at once; ss.outMu held.
func (ss *session) sendLocked(b []byte) {
	if len(b) > 0 {
		_, _ = ss.cc.Write(b)
	}
}

// waitIdle waits until no lock operation of the session is in flight and
// every queued reply is written.
func (ss *session) waitIdle() {
	if ss.fly.slots == nil { // never had one in flight
		return
	}
	ss.outMu.Lock()
	busy := ss.fly.queued()
	ss.fly.waiting = busy
	ss.outMu.Unlock()
	if busy {
		<-ss.fly.idle
	}
}

// busy reports whether replies are queued behind operations in flight.
func (ss *session) busy() bool {
	if ss.fly.slots == nil { // never had one in flight
		return false
	}
	ss.outMu.Lock()
	defer ss.outMu.Unlock()
	return ss.fly.queued()
}

// opRunners run lock operations on goroutines that stay for the next: a
// goroutine started per operation grew its stack to the depth of a quorum
// operation every time (a twentieth of the proxy's time under a
// multiplexing client). An operation is handed to an idle runner, or, when
// none is idle, to a new one, so that an operation waiting for an earlier
// one never waits for a runner. A runner idle for
// runnerIdle ends.
type opRunners struct {
	s    *Server
	work chan *pending // unbuffered: a send succeeds when a runner is idle
}

// runnerIdle is how long a runner waits for work before it ends.
const runnerIdle = 10 * time.Second

func newOpRunners(s *Server) *opRunners { return &opRunners{s: s, work: make(chan *pending)} }

// run runs op on an idle runner, or on a new one.
func (p *opRunners) run(op *pending) {
	select {
	case p.work <- op:
	default:
		go p.runner(op)
	}
}

func (p *opRunners) runner(op *pending) {
	t := time.NewTimer(runnerIdle)
	defer t.Stop()
	for {
		p.s.runOp(op)
		op = nil // nothing of it kept while idle
		if !t.Stop() {
			<-t.C
		}
		t.Reset(runnerIdle)
		select {
		case op = <-p.work:
		case <-t.C:
			return
		}
	}
}
