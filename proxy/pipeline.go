package proxy

import (
	"net"
	"runtime"
	"runtime/debug"
	"strings"
	"time"

	"github.com/tidwall/redcon"
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
		if _, msg := parseSet(args); msg != "" {
			return nil, false
		}
	case "setnx", "get", "pttl", "ttl", "getdel", "getex", "pexpire", "expire", "pexpireat", "expireat",
		"persist", "setex", "psetex", "lock.release", "lock.extend", "lock.info":
	case "exists", "del", "unlink":
		keys = args[1:]
	case "eval", "evalsha":
		var ok bool
		if keys, ok = s.lockScriptKeys(e.name, args); !ok {
			return nil, false
		}
	case "lock.acquire":
		if o, msg := parseAcquire(args); msg != "" || o.lease || o.wait > 0 {
			return nil, false
		}
	default:
		return nil, false
	}
	for _, k := range keys {
		if !s.isLockKey(k) || strings.HasPrefix(string(k), "redlock-proxy:") {
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
	var spec *scriptSpec
	if name == "evalsha" {
		if e, ok := s.scripts.get(string(args[1])); ok {
			spec = e.spec
		} else {
			spec = specBySHA(string(args[1]))
		}
	} else {
		_, spec = s.scripts.add(string(args[1]))
	}
	if spec == nil || spec.kind == opNotALock || nk > 1 && !spec.multi {
		return nil, false
	}
	return args[3 : 3+nk], true
}

// pending is one reply of a connection queued behind lock operations in
// flight: an operation's, or, done from the start, the replies of other
// commands written meanwhile.
type pending struct {
	args  [][]byte
	keys  [][]byte // the keys it acts on (of args)
	h     handler
	reply redcon.Writer // buffers the reply; never flushed
	after []*pending    // earlier operations of the connection it waits for
	done  chan struct{} // closed when its reply is ready
	ready bool          // under session.outMu
	panic any
}

// inflight is what a session keeps of its lock operations in flight.
type inflight struct {
	queue []*pending          // replies not yet written, in request order
	last  map[string]*pending // by key, the last operation in flight on it; under session.outMu
	slots chan struct{}       // one per operation running: at most max_inflight
	idle  chan struct{}       // closed when the queue empties
	// flushing: an operation that finished is about to write out what is
	// ready; others that finish meanwhile leave it to that one.
	flushing bool
}

// startOp starts a groupable lock operation of the session (keys are the
// keys it acts on): it waits for a slot (the session stops reading while
// max_inflight run), queues its reply, and hands it to a runner.
func (s *Server) startOp(ss *session, st *client, args, keys [][]byte) {
	f := &ss.fly
	if f.slots == nil {
		f.slots = make(chan struct{}, max(s.cfg.Proxy.MaxInflight, 1))
		f.last = map[string]*pending{}
	}
	f.slots <- struct{}{} // blocks while max_inflight run
	op := &pending{args: args, keys: keys, h: lookup(args[0]).h, done: make(chan struct{})}
	ss.queueReply(op)
	keepInput(ss) // the operation reads its arguments after this batch
	s.m.pipelinedOps.Inc()
	s.ops.run(func() { s.runOp(ss, st, op) })
}

// runOp runs one operation once those it waits for are done, writing its
// reply into its buffer, then writes out what is ready at the head of the
// queue.
func (s *Server) runOp(ss *session, st *client, op *pending) {
	defer func() { <-ss.fly.slots }()
	defer ss.opDone(op)
	defer func() {
		if r := recover(); r != nil {
			op.panic = r
			s.log.Error().Str("client", ss.addr).Interface("panic", r).Str("stack", string(debug.Stack())).
				Msg("command handler panicked; closing the client")
		}
	}()
	for _, prev := range op.after {
		<-prev.done
	}
	op.h(s, replyConn{&op.reply}, st, op.args)
}

// queueReply queues op behind the replies not yet written, after the
// operations in flight that share a key with it; the first one makes the
// queue, and its idle signal.
func (ss *session) queueReply(op *pending) {
	f := &ss.fly
	ss.outMu.Lock()
	defer ss.outMu.Unlock()
	if len(f.queue) == 0 {
		f.idle = make(chan struct{})
		// What the session wrote before goes first.
		ss.sendLocked(ss.wr.Buffer())
		ss.wr.SetBuffer(ss.wr.Buffer()[:0])
	}
	for _, k := range op.keys {
		if prev := f.last[string(k)]; prev != nil && prev != op {
			op.after = append(op.after, prev)
		}
		f.last[string(k)] = op
	}
	f.queue = append(f.queue, op)
}

// opDone marks op's reply ready and writes out the replies ready at the
// head of the queue, in one write. The operations of one batch of a
// master's replies finish one after another: the first to finish yields
// once before it writes, so that the others mark theirs ready too and one
// write carries them all.
func (ss *session) opDone(op *pending) {
	f := &ss.fly
	ss.outMu.Lock()
	op.ready = true
	close(op.done)
	for _, k := range op.keys {
		if f.last[string(k)] == op { // none started on the key since
			delete(f.last, string(k))
		}
	}
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
	var out []byte
	for len(f.queue) > 0 && f.queue[0].ready {
		p := f.queue[0]
		f.queue[0] = nil
		f.queue = f.queue[1:]
		out = append(out, p.reply.Buffer()...)
		if p.panic != nil {
			out = redcon.AppendError(out, "ERR redlock-proxy: internal error; closing the connection")
			ss.sendLocked(out)
			_ = ss.cc.Close()
			out = nil
		}
	}
	ss.sendLocked(out)
	if len(f.queue) == 0 && f.idle != nil {
		f.queue = nil
		close(f.idle)
		f.idle = nil
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
	ss.outMu.Lock()
	idle := ss.fly.idle
	busy := len(ss.fly.queue) > 0
	ss.outMu.Unlock()
	if busy {
		<-idle
	}
}

// busy reports whether replies are queued behind operations in flight.
func (ss *session) busy() bool {
	if ss.fly.slots == nil { // never had one in flight
		return false
	}
	ss.outMu.Lock()
	defer ss.outMu.Unlock()
	return len(ss.fly.queue) > 0
}

// opRunners run lock operations on goroutines that stay for the next: a
// goroutine started per operation grew its stack to the depth of a quorum
// operation every time (a twentieth of the proxy's time under a
// multiplexing client). An operation is handed to an idle runner, or, when
// none is idle, to a new one, so that an operation waiting for an earlier
// one never waits for a runner. A runner idle for
// runnerIdle ends.
type opRunners struct {
	work chan func() // unbuffered: a send succeeds when a runner is idle
}

// runnerIdle is how long a runner waits for work before it ends.
const runnerIdle = 10 * time.Second

func newOpRunners() *opRunners { return &opRunners{work: make(chan func())} }

// run runs f on an idle runner, or on a new one.
func (p *opRunners) run(f func()) {
	select {
	case p.work <- f:
	default:
		go p.runner(f)
	}
}

func (p *opRunners) runner(f func()) {
	t := time.NewTimer(runnerIdle)
	defer t.Stop()
	for {
		f()
		if !t.Stop() {
			<-t.C
		}
		t.Reset(runnerIdle)
		select {
		case f = <-p.work:
		case <-t.C:
			return
		}
	}
}

// replyConn is what a lock operation in flight writes its reply to: a
// buffer, which is written out in request order.
type replyConn struct{ w *redcon.Writer }

var _ redcon.Conn = replyConn{}

func (r replyConn) WriteError(msg string)        { r.w.WriteError(msg) }
func (r replyConn) WriteString(str string)       { r.w.WriteString(str) }
func (r replyConn) WriteBulk(bulk []byte)        { r.w.WriteBulk(bulk) }
func (r replyConn) WriteBulkString(bulk string)  { r.w.WriteBulkString(bulk) }
func (r replyConn) WriteInt(num int)             { r.w.WriteInt(num) }
func (r replyConn) WriteInt64(num int64)         { r.w.WriteInt64(num) }
func (r replyConn) WriteUint64(num uint64)       { r.w.WriteUint64(num) }
func (r replyConn) WriteArray(count int)         { r.w.WriteArray(count) }
func (r replyConn) WriteNull()                   { r.w.WriteNull() }
func (r replyConn) WriteRaw(data []byte)         { r.w.WriteRaw(data) }
func (r replyConn) WriteAny(v any)               { r.w.WriteAny(v) }
func (replyConn) RemoteAddr() string             { return "" }
func (replyConn) Close() error                   { return nil }
func (replyConn) Context() any                   { return nil }
func (replyConn) SetContext(any)                 {}
func (replyConn) SetReadBuffer(int)              {}
func (replyConn) Detach() redcon.DetachedConn    { return nil }
func (replyConn) ReadPipeline() []redcon.Command { return nil }
func (replyConn) PeekPipeline() []redcon.Command { return nil }
func (replyConn) NetConn() net.Conn              { return nil }
