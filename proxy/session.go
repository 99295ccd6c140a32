package proxy

import (
	"errors"
	"io"
	"net"
	"sync"
	"syscall"
	"time"

	"github.com/redlock-proxy/redlock-proxy/proxy/backend"
	"github.com/redlock-proxy/redlock-proxy/proxy/wire"
	"github.com/tidwall/redcon"
)

// The client connection loop. redcon's server gives every connection two
// 4 KB input buffers for its whole life, which is most of an idle client's
// memory; the proxy runs its own loop instead, with redcon's Conn, Command
// and Writer, so that an idle client holds one small buffer:
//
//   - input is read straight into the session's buffer (no second copy),
//     which starts at readBufMin and doubles for a bigger command, up to the
//     limits the wire.Conn enforces;
//   - the commands of one read are run in order, as one batch: their
//     arguments point into that read's buffer. If a command of the batch
//     may keep its arguments (keepInput), the buffer is handed over to them
//     and a fresh small one takes its place (up to readBufBatch for a
//     client that pipelines), so a command that keeps an argument keeps
//     valid bytes, and a big buffer is dropped after use; otherwise the
//     buffer, and the storage of the batch's commands, serve the next read;
//   - replies are flushed once per batch (dispatch hands them to the
//     wire.Conn after every command, which holds small ones back).

// readBufMin is the input buffer of a client between commands, and
// readBufBatch how far it grows for a client that pipelines (bufSizer).
const (
	readBufMin   = 512
	readBufBatch = 4 << 10
	// shrinkAfter is how many small reads in a row halve the buffer.
	shrinkAfter = 8
)

// bufSizer sizes a client's next input buffer from its reads: one that
// fills the buffer doubles it, up to readBufBatch, so that a pipeline of
// small commands (redis-benchmark -P 16 sends about 1 KB at once) is read,
// forwarded and answered as one batch rather than in 512-byte pieces, each
// with a write to the backend and one to the client. shrinkAfter reads in a
// row that fill less than a quarter of it halve it again: not one, as the
// tail of a pipeline that did not fit is such a read.
type bufSizer struct {
	n     int // the size of the next fresh buffer; 0: readBufMin
	small int // small reads in a row
}

func (b *bufSizer) next(read int, filled bool) int {
	n := max(b.n, readBufMin)
	switch {
	case filled:
		n, b.small = min(2*n, readBufBatch), 0
	case read < n/4:
		if b.small++; b.small >= shrinkAfter {
			n, b.small = max(n/2, readBufMin), 0
		}
	default:
		b.small = 0
	}
	b.n = n
	return n
}

// session is one client connection and the goroutine that serves it.
type session struct {
	s      *Server
	cc     *wire.Conn
	addr   string
	wr     wire.Buf // replies not yet handed to cc
	werr   error    // the write to cc that failed: no more are tried
	ctx    any
	in     []byte           // input; in[:n] is read and not yet run
	n      int              //
	cmds   []redcon.Command // the rest of the batch being run
	closed bool             // Close was called: run nothing more
	quit   bool             // … by QUIT: the client ended the connection
	keep   bool             // a command of the batch may keep its arguments
	sizer  bufSizer         // the size of the next fresh input buffer
	// The storage of the last batch's commands and arguments, when nothing
	// holds it any more: the next batch's go there (wire.Parse).
	spareCmds []redcon.Command
	spareArgs [][]byte
	// Reused by every plain passthrough batch (forwardPipeline): the list
	// of its commands, and its request on a shared backend connection.
	batch []redcon.Command
	req   *backend.MuxReq
	// Lock operations in flight (pipeline.go): outMu guards fly and every
	// write to cc once the session has had one.
	outMu sync.Mutex
	fly   inflight
	// subbed: the client is subscribed, and its subscription's relay
	// writes to cc too (pubsub.go). Set by the session's goroutine only.
	subbed bool
	info   sessionInfo // what CLIENT LIST shows of it (clients.go)
}

var _ redcon.Conn = (*session)(nil)

// subscribed reports whether the client has subscriptions (a tracking
// client's own connection is not one: Redis times it out when idle).
func (ss *session) subscribed() bool {
	st, _ := ss.ctx.(*client)
	return st != nil && st.sub != nil && st.sub.count() > 0
}

// keepInput marks the batch c is running as holding on to its commands'
// arguments, which point into the session's input buffer: the buffer is not
// reused for the next read. Every command but a plain passthrough one does
// (Server.handle), as only that path is known to be done with them when it
// returns.
func keepInput(c redcon.Conn) {
	if ss, ok := c.(*session); ok {
		ss.keep = true
	}
}

// spare keeps the storage of a batch that nothing holds any more for the
// next: its commands, and the slab of their arguments (or the first one's
// own). Emptied, so that it keeps no input buffer alive.
// Storage grown past spareMax entries by a long pipeline is let go.
func (ss *session) spare(cmds []redcon.Command, slab [][]byte) {
	if slab == nil && len(cmds) > 0 {
		slab = cmds[0].Args
	}
	ss.spareCmds, ss.spareArgs = nil, nil
	if cap(cmds) <= spareMax {
		clear(cmds)
		ss.spareCmds = cmds[:0]
	}
	if cap(slab) <= spareMax {
		clear(slab[:cap(slab)])
		ss.spareArgs = slab[:0]
	}
}

// spareMax is the most entries of a batch's storage a session keeps for
// the next (spare, forwardPipeline).
const spareMax = 64

// serveClients accepts clients until the listener is closed.
func (s *Server) serveClients(ln net.Listener) error {
	for {
		nc, err := ln.Accept()
		if err != nil {
			if s.closing.Load() || errors.Is(err, net.ErrClosed) {
				return nil
			}
			// Out of file descriptors, for example: the clients already
			// connected go on; try again shortly.
			s.log.Warn().Err(err).Msg("accepting a client failed")
			time.Sleep(20 * time.Millisecond)
			continue
		}
		cc, ok := nc.(*wire.Conn)
		if !ok {
			cc = wire.NewConn(nc, limitsOf(&s.cfg.Proxy), &s.writeTimeout)
		}
		ss := &session{s: s, cc: cc, addr: nc.RemoteAddr().String()}
		ss.initInfo(nc)
		if !s.track(ss) {
			cc.Close()
			return nil
		}
		if !s.accept(ss) {
			_ = ss.Close()
			s.untrack(ss)
			continue
		}
		go ss.serve()
	}
}

// track registers a session, unless the server is closing.
func (s *Server) track(ss *session) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closing.Load() {
		return false
	}
	if s.sessions == nil {
		s.sessions = map[*session]struct{}{}
	}
	s.sessions[ss] = struct{}{}
	return true
}

func (s *Server) untrack(ss *session) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.sessions, ss)
	if len(s.sessions) == 0 && s.drained != nil {
		close(s.drained)
		s.drained = nil
	}
}

func (ss *session) serve() {
	err := ss.loop()
	ss.waitIdle() // its lock operations in flight complete, or are taken back
	_ = ss.cc.Close()
	byClient := ss.quit || errors.Is(err, io.EOF) || errors.Is(err, syscall.ECONNRESET)
	if err == io.EOF || ss.s.closing.Load() {
		err = nil
	}
	ss.s.closed(ss, err, byClient) // before untrack: Close waits for what closed starts
	ss.s.untrack(ss)
}

// loop reads and runs batches of commands until the client leaves, fails,
// or the server closes (after the batch in hand).
func (ss *session) loop() error {
	for {
		if idle := time.Duration(ss.s.idleTimeout.Load()); idle > 0 {
			deadline := time.Now().Add(idle)
			if ss.subscribed() {
				deadline = time.Time{} // as Redis: no idle timeout while subscribed
			}
			_ = ss.cc.SetReadDeadline(deadline)
		}
		if ss.s.closing.Load() {
			return nil // after the deadline is set: Close's wake-up is not undone
		}
		if ss.in == nil {
			ss.in = make([]byte, readBufMin)
		} else if len(ss.in)-ss.n < 2 { // wire.Conn.Read needs room for 2 bytes
			in := make([]byte, 2*len(ss.in))
			copy(in, ss.in[:ss.n])
			ss.in = in
		}
		if ss.cc.Failed() {
			// Read answers the input's error: after the replies of the
			// commands before it, those in flight and those a subscription
			// owes included.
			ss.waitIdle()
			ss.endSubscription()
		}
		k, err := ss.cc.Read(ss.in[ss.n:])
		ss.n += k
		if k > 0 {
			next := ss.sizer.next(k, ss.n == len(ss.in))
			cmds, slab, used, perr := wire.Parse(ss.in[:ss.n], ss.spareCmds, ss.spareArgs)
			ss.spareCmds, ss.spareArgs = nil, nil
			if perr != nil {
				ss.waitIdle()
				ss.endSubscription()
				ss.wr.WriteError("ERR " + perr.Error())
				_ = ss.flushOut()
				return perr
			}
			if used > 0 {
				ss.cmds, ss.keep = cmds, false
				for len(ss.cmds) > 0 && !ss.closed {
					cmd := ss.cmds[0]
					ss.cmds = ss.cmds[1:]
					ss.s.dispatch(ss, cmd)
				}
				ss.cmds = nil
				// What follows the batch moves to the start of a buffer
				// for the next read: this one if no command of the batch
				// may hold on to its arguments (keepInput) and it has the
				// size wanted, else a new one, and the batch keeps this.
				rest := ss.n - used
				in := ss.in
				if ss.keep || len(in) != max(next, rest) {
					in = make([]byte, max(next, rest))
				}
				if !ss.keep {
					ss.spare(cmds, slab)
				}
				copy(in, ss.in[used:ss.n])
				ss.in, ss.n = in, rest
				if ss.closed {
					return nil
				}
				if err := ss.flushOut(); err != nil {
					return err
				}
			}
		}
		if err != nil {
			return err
		}
	}
}

// closeSessions stops accepting and lets every session finish the batch it
// is running; sessions waiting for input are woken and end at once. After
// wait, the connections still open are closed.
func (s *Server) closeSessions(wait time.Duration) {
	s.mu.Lock()
	s.closing.Store(true)
	if s.ln != nil {
		_ = s.ln.Close()
	}
	drained := make(chan struct{})
	if len(s.sessions) == 0 {
		close(drained)
	} else {
		s.drained = drained
	}
	for ss := range s.sessions {
		_ = ss.cc.SetReadDeadline(time.Now())
	}
	s.mu.Unlock()
	select {
	case <-drained:
		return
	case <-time.After(wait):
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	for ss := range s.sessions {
		_ = ss.cc.Close()
	}
}

// redcon.Conn.

func (ss *session) RemoteAddr() string { return ss.addr }

// Close sends what was written and closes the connection; the rest of the
// batch is not run.
func (ss *session) Close() error {
	_ = ss.flushOut()
	ss.closed = true
	return ss.cc.Close()
}

// flushOut sends the replies written so far, or, while lock operations
// are in flight, queues them behind those.
func (ss *session) flushOut() error {
	if ss.fly.slots == nil && !ss.subbed { // the session's alone to write
		return ss.flush()
	}
	ss.outMu.Lock()
	defer ss.outMu.Unlock()
	if ss.fly.queued() {
		ss.queueWrittenLocked()
		return nil
	}
	return ss.flush()
}

// flush hands the replies written to cc (which sends what it held back
// too); once a write failed, it tries no more.
func (ss *session) flush() error {
	if ss.werr != nil {
		return ss.werr
	}
	_, ss.werr = ss.cc.Write(ss.wr.B)
	if ss.wr.B = ss.wr.B[:0]; cap(ss.wr.B) > maxReplyBuf || ss.werr != nil {
		ss.wr.B = nil
	}
	return ss.werr
}

// maxReplyBuf is the largest reply buffer a session keeps for the next.
const maxReplyBuf = 64 << 10

// queueWrittenLocked moves what the session wrote into a reply queued
// behind those in flight; ss.outMu held.
func (ss *session) queueWrittenLocked() {
	if len(ss.wr.B) == 0 {
		return
	}
	p := &pending{ready: true}
	p.reply.B = append(p.small[:0], ss.wr.B...)
	ss.wr.B = ss.wr.B[:0]
	ss.fly.queue = append(ss.fly.queue, p)
}

func (ss *session) Context() any                { return ss.ctx }
func (ss *session) SetContext(v any)            { ss.ctx = v }
func (ss *session) SetReadBuffer(int)           {}
func (ss *session) WriteString(str string)      { ss.wr.WriteString(str) }
func (ss *session) WriteBulk(bulk []byte)       { ss.wr.WriteBulk(bulk) }
func (ss *session) WriteBulkString(bulk string) { ss.wr.WriteBulkString(bulk) }
func (ss *session) WriteInt(num int)            { ss.wr.WriteInt(num) }
func (ss *session) WriteInt64(num int64)        { ss.wr.WriteInt64(num) }
func (ss *session) WriteUint64(num uint64)      { ss.wr.WriteUint64(num) }
func (ss *session) WriteError(msg string)       { ss.wr.WriteError(msg) }
func (ss *session) WriteArray(count int)        { ss.wr.WriteArray(count) }
func (ss *session) WriteNull()                  { ss.wr.WriteNull() }
func (ss *session) WriteMap(pairs int)          { ss.wr.WriteMap(pairs) }
func (ss *session) WriteVerbatim(s string)      { ss.wr.WriteVerbatim(s) }
func (ss *session) WriteRaw(data []byte)        { ss.wr.WriteRaw(data) }
func (ss *session) WriteAny(v any)              { ss.wr.WriteAny(v) }
func (ss *session) NetConn() net.Conn           { return ss.cc }

// Detach is not offered: no command hands its connection over.
func (ss *session) Detach() redcon.DetachedConn { return nil }

// ReadPipeline takes the rest of the batch: the caller runs it.
func (ss *session) ReadPipeline() []redcon.Command {
	cmds := ss.cmds
	ss.cmds = nil
	return cmds
}

// PeekPipeline shows the rest of the batch.
func (ss *session) PeekPipeline() []redcon.Command { return ss.cmds }
