package proxy

import (
	"net"
	"runtime/debug"
	"strings"
	"sync"
	"time"

	"github.com/tidwall/redcon"
)

// Lock operations pipelined on one connection run together. The clients
// most used from Node, Java and .NET put a process's requests on one
// connection and pipeline them; run one after another, each waiting for its
// quorum, they would get one lock operation per round trip to the masters.
//
// When a lock operation is followed, in what the client sent, by more, up
// to proxy.max_inflight of them run at once as a group: each on a goroutine
// of its own, its commands joining the masters' batches with everyone
// else's. Its reply goes into a buffer of its own, and once the whole group
// is done the replies are written in the order of the requests. An
// operation waits for the earlier ones of the group that share a key with
// it, so that its effects come after theirs, as on one Redis (SET NX then
// the unlock script of the key releases it; two SET NX of a key grant at
// most one). The next input is read only when the group is done: a client
// has at most max_inflight operations in flight, and one that sends more
// is held back by TCP. A command that is not a lock operation ends the
// group and runs after it, as it does today.

// groupable reports whether a command may run in a group: a quorum
// operation on lock keys only, with no connection state (no MULTI, no
// waiting, no lease, no backend connection), once the client may run
// commands at all. It returns the keys the operation acts on.
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

// maxGroup is proxy.max_inflight, at least 1.
func (s *Server) maxGroup() int { return max(s.cfg.Proxy.MaxInflight, 1) }

// groupOp is one operation of a group: its command, its reply, and when it
// is done.
type groupOp struct {
	args  [][]byte
	h     handler
	reply redcon.Writer // buffers the reply; never flushed
	after []int         // earlier operations of the group it waits for
	done  chan struct{}
	panic any
}

// lockPipeline runs cmd, a groupable lock operation, together with the
// groupable commands the client pipelined right after it (see above), and
// reports false when there are none: cmd then runs alone, as usual. The
// commands after the group are served one by one, as usual.
func (s *Server) lockPipeline(c redcon.Conn, st *client, cmd redcon.Command, keys [][]byte) bool {
	next := c.PeekPipeline()
	var nextKeys [][][]byte
	for len(nextKeys) < len(next) && len(nextKeys)+1 < s.maxGroup() {
		k, ok := s.groupable(st, next[len(nextKeys)].Args)
		if !ok {
			break
		}
		nextKeys = append(nextKeys, k)
	}
	if len(nextKeys) == 0 {
		return false
	}
	rest := c.ReadPipeline()
	ops := make([]*groupOp, 0, len(nextKeys)+1)
	last := map[string]int{} // key → the last operation of the group on it
	add := func(args, keys [][]byte) {
		op := &groupOp{args: args, h: lookup(args[0]).h, done: make(chan struct{})}
		for _, k := range keys {
			if j, ok := last[string(k)]; ok {
				op.after = append(op.after, j)
			}
			last[string(k)] = len(ops)
		}
		ops = append(ops, op)
	}
	add(cmd.Args, keys)
	for i, k := range nextKeys {
		add(rest[i].Args, k)
	}
	s.m.pipelinedOps.Add(float64(len(ops)))
	var wg sync.WaitGroup
	wg.Add(len(ops))
	for _, op := range ops {
		s.ops.run(func() { s.runGroupOp(op, ops, st, &wg) })
	}
	wg.Wait()
	for _, op := range ops {
		c.WriteRaw(op.reply.Buffer())
		handOver(c)
	}
	for _, op := range ops {
		if op.panic != nil {
			s.log.Error().Str("client", c.RemoteAddr()).Interface("panic", op.panic).Msg("command handler panicked; closing the client")
			c.WriteError("ERR redlock-proxy: internal error; closing the connection")
			_ = c.Close()
			return true
		}
	}
	for _, x := range rest[len(nextKeys):] {
		s.dispatch(c, x)
	}
	return true
}

// runGroupOp runs one operation of a group once those it waits for are
// done, writing its reply into its buffer.
func (s *Server) runGroupOp(op *groupOp, ops []*groupOp, st *client, wg *sync.WaitGroup) {
	defer wg.Done()
	defer close(op.done)
	defer func() {
		if r := recover(); r != nil {
			op.panic = r
			s.log.Error().Str("stack", string(debug.Stack())).Msg("pipelined lock operation panicked")
		}
	}()
	for _, j := range op.after {
		<-ops[j].done
	}
	op.h(s, replyConn{&op.reply}, st, op.args)
}

// opRunners run the operations of groups on goroutines that stay for the
// next: a goroutine started per operation grew its stack to the depth of
// a quorum operation every time (a twentieth of the proxy's time under a
// multiplexing client). An operation is handed to an idle runner, or, when
// none is idle, to a new one, so that an operation waiting for an earlier
// one of its group never waits for a runner. A runner idle for
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

// replyConn is what a grouped operation writes its reply to: a buffer,
// which the client's session writes out in order.
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
