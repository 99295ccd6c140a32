package backend

import (
	"bufio"
	"errors"
	"net"
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	"github.com/tidwall/redcon"

	"github.com/redlock-proxy/redlock-proxy/internal/peek"
	"github.com/redlock-proxy/redlock-proxy/proxy/wire"
)

// Plain passthrough commands (no connection state: package proxy's plainPassthrough) of
// all clients share one backend connection, as twemproxy does: its writer
// sends whatever clients have queued in one write, and its reader reads the
// replies in order and hands each client its own. Under load the backend
// then sees one read and one write for many clients' commands.
//
// A client's batch is answered once all its replies are in, so the replies
// of one batch are held in memory together: only batches of at most
// MuxMaxBatch commands go this way; longer ones get a pooled connection of
// their own and pass their replies on one by one. A batch whose replies
// take longer than proxy.passthrough_timeout, or any error on the
// connection, fails every command queued on it; the next command dials a
// new one.

// MuxMaxBatch is the longest batch of one client sent on a shared connection.
const MuxMaxBatch = 32

// MuxReq is one client's batch of commands on a shared connection. A
// client's session keeps one for all its batches (Mux.do): once
// finished, nothing else holds it.
type MuxReq struct {
	cmds []redcon.Command
	out  []byte // the raw replies, one after the other
	got  int    // replies read
	end  int    // len(out) after the last whole reply
	Ends []int  // len(out) after each whole reply
	err  error
	done chan struct{} // receives once, when finished
	conn *muxConn      // the connection it was submitted to
}

// muxKeepOut is the most reply buffer a MuxReq keeps between batches.
const muxKeepOut = 4 << 10

// reset readies r for a batch of cmds.
func (r *MuxReq) reset(cmds []redcon.Command) {
	if r.done == nil {
		r.done = make(chan struct{}, 1)
	}
	if cap(r.out) > muxKeepOut {
		r.out = nil
	}
	if r.out == nil {
		// Room for short replies (+OK, small values): most batches then
		// read theirs without growing the buffer.
		r.out = make([]byte, 0, 32*len(cmds))
	}
	r.cmds, r.out, r.got, r.end, r.err, r.conn, r.Ends = cmds, r.out[:0], 0, 0, nil, nil, r.Ends[:0]
}

// finish ends r; it is called once per batch.
func (r *MuxReq) finish(err error) {
	r.err = err
	if r.conn != nil {
		r.conn.inflight.Add(-1)
	}
	r.done <- struct{}{}
}

// muxConn is one shared backend connection.
type muxConn struct {
	nc      net.Conn
	r       *bufio.Reader
	timeout func() time.Duration

	mu    sync.Mutex
	dead  bool
	queue []*MuxReq // sent by the writer, in order
	wake  chan struct{}

	pending chan *MuxReq  // written, waiting for replies: the reader's
	stop    chan struct{} // closed when the connection fails

	follow   *Sentinel    // a Sentinel group's backend: READONLY has it ask (sentinel.go)
	inflight atomic.Int64 // requests submitted and not yet finished
	lastUse  atomic.Int64 // unix ns of the last submit
}

func newMuxConn(b *Conn, timeout func() time.Duration) *muxConn {
	m := &muxConn{
		nc: b.NC, r: b.R, timeout: timeout,
		wake: make(chan struct{}, 1), pending: make(chan *MuxReq, 4096), stop: make(chan struct{}),
	}
	m.lastUse.Store(time.Now().UnixNano())
	go m.writer()
	go m.reader()
	return m
}

// submit queues r; false when the connection has failed.
func (m *muxConn) submit(r *MuxReq) bool {
	m.mu.Lock()
	if m.dead {
		m.mu.Unlock()
		return false
	}
	r.conn = m
	m.queue = append(m.queue, r)
	m.inflight.Add(1)
	m.lastUse.Store(time.Now().UnixNano())
	m.mu.Unlock()
	select {
	case m.wake <- struct{}{}:
	default:
	}
	return true
}

func (m *muxConn) isDead() bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.dead
}

// kill closes the connection and fails what is queued; the reader fails
// what was written.
func (m *muxConn) kill(err error) {
	m.mu.Lock()
	if m.dead {
		m.mu.Unlock()
		return
	}
	m.dead = true
	queued := m.queue
	m.queue = nil
	m.mu.Unlock()
	_ = m.nc.Close()
	close(m.stop)
	for _, r := range queued {
		r.finish(err)
	}
}

func (m *muxConn) writer() {
	defer close(m.pending)
	var buf []*MuxReq
	var out []byte
	var wdl wire.LazyDeadline
	for {
		select {
		case <-m.wake:
		case <-m.stop:
			return
		}
		// Let the clients that are running queue their commands too: one
		// write then carries them all.
		runtime.Gosched()
		m.mu.Lock()
		// The last batch's list, emptied, takes the next submits.
		clear(buf)
		buf, m.queue = m.queue, buf[:0]
		m.mu.Unlock()
		if len(buf) == 0 {
			continue
		}
		out = out[:0]
		for _, r := range buf {
			for _, cmd := range r.cmds {
				out = wire.AppendRequest(out, cmd)
			}
		}
		// The reader may start on the replies as soon as they come.
		for _, r := range buf {
			select {
			case m.pending <- r:
			case <-m.stop:
				r.finish(ErrMuxClosed)
			}
		}
		wdl.Arm(m.nc.SetWriteDeadline, m.timeout())
		if _, err := m.nc.Write(out); err != nil {
			m.kill(err)
			return
		}
		if cap(out) > 64<<10 {
			out = nil
		}
	}
}

// ErrMuxClosed fails the commands on a shared connection that was closed.
var ErrMuxClosed = errors.New("proxy: backend connection closed")

func (m *muxConn) reader() {
	var err error
	var rdl wire.LazyDeadline
	for r := range m.pending {
		if err == nil {
			// One deadline for the batch: its replies come together.
			rdl.Arm(m.nc.SetReadDeadline, m.timeout())
			for r.got < len(r.cmds) {
				start := len(r.out)
				if r.out, err = wire.ReadReply(m.r, r.out); err != nil {
					m.kill(err)
					break
				}
				if m.follow != nil && isReadonly(r.out[start:]) {
					m.follow.askSoon()
				}
				r.got++
				r.end = len(r.out)
				r.Ends = append(r.Ends, r.end)
			}
		}
		r.finish(err)
	}
}

// Mux holds the shared connection of a backend. One: with two, taken
// in turn, the proxy and the backend each made more reads and writes per
// command, and 3 of 4 alternating runs served fewer commands a second, with
// and without pipelining; four and eight made no difference outside the
// noise.
type Mux struct {
	pool    *Pool
	timeout func() time.Duration
	mu      sync.Mutex
	conn    *muxConn
}

// NewMux is the shared connection of pool's backend; timeout is read at
// every batch (a reload may change it).
func NewMux(pool *Pool, timeout func() time.Duration) *Mux {
	return &Mux{pool: pool, timeout: timeout}
}

// get returns the live shared connection, dialling one in place of a
// failed one.
func (p *Mux) get() (*muxConn, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if m := p.conn; m != nil && !m.isDead() {
		// One the server closed while idle (its timeout setting) would
		// fail the next batch: replace it. With nothing in flight there
		// is nothing to read on it. One to a Sentinel group's former
		// primary is being closed: replace it too.
		idle := time.Since(time.Unix(0, m.lastUse.Load())) > idleCheck
		if !p.pool.Stale(m.nc) && !(idle && m.inflight.Load() == 0 && peek.Of(m.nc).Broken()) {
			return m, nil
		}
		m.kill(ErrMuxClosed)
	}
	b, err := p.pool.Dial()
	if err != nil {
		return nil, err
	}
	m := newMuxConn(b, p.timeout)
	m.follow = p.pool.follow
	p.conn = m
	return m, nil
}

// Close closes the shared connection.
func (p *Mux) Close() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.conn != nil {
		p.conn.kill(ErrMuxClosed)
	}
}

// Do runs a batch of commands on a shared connection and returns their raw
// replies; got says how many arrived whole before an error. r, if not nil,
// is the caller's own MuxReq, reused: the replies returned live in it until
// its next batch.
func (p *Mux) Do(r *MuxReq, cmds []redcon.Command) (out []byte, got int, err error) {
	if r == nil {
		r = new(MuxReq)
	}
	if err := p.Start(r, cmds); err != nil {
		return nil, 0, err
	}
	return r.Wait()
}

// Start submits a batch of commands on a shared connection, r its request,
// without waiting for the replies: r.Wait does. Batches started on several
// pools (the nodes of a cluster backend) are then in flight at once.
func (p *Mux) Start(r *MuxReq, cmds []redcon.Command) error {
	r.reset(cmds)
	for try := 0; ; try++ {
		m, err := p.get()
		if err != nil {
			return err
		}
		if m.submit(r) {
			return nil
		}
		if try > 0 {
			return ErrMuxClosed
		}
	}
}

// Wait waits for the replies of the batch started with r: as Do returns
// them.
func (r *MuxReq) Wait() (out []byte, got int, err error) {
	<-r.done
	r.cmds = nil // they point into the client's input
	return r.out[:r.end], r.got, r.err
}
