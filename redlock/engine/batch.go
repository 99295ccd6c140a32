package engine

import (
	"context"
	"errors"
	"fmt"
	"os"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"
)

// Commands bound for one master from many concurrent operations are written
// to it together: a master's worker (one by default, WithPipelines) takes
// whatever is queued (up to maxBatch commands) and sends it as one pipeline,
// so that under load a master sees one read and one write for many lock
// operations instead of one each. A command waits in the queue only while
// every worker of its master is busy with a round trip.

// maxBatch caps the commands sent in one pipeline.
const maxBatch = 256

// call is one command for one master.
type call struct {
	args     []any
	raw      []byte  // the command already encoded: sent as is, in place of args
	script   *script // run args as this script's ARGV, by EVALSHA
	keys     []string
	deadline time.Time
	done     func(*redis.Cmd) // called once, by the worker that ran it
	to       replier          // in place of done: to.reply(idx, …)
	idx      int

	res      redis.Cmd // the reply
	b        *batcher  // the master's queue it waits in, counted in its pending until answered
	sent     bool      // written, reply not yet read
	readOnly bool      // changes nothing on the master (a check)
	alone    bool      // sent on a connection of its own (runAlone), not the shared pipeline
	digest   bool      // keeps no long string of its reply: each comes back as a LargeValue

	// For a master given as a Redis Cluster (cluster.go): the cluster and
	// the shard the call was sent to, whose MOVED or ASK reply sends it
	// again (hops times so far), with ASKING before it after an ASK.
	cv     *clusterVoter
	shard  *node
	hops   int8
	asking bool
}

// size is about how many bytes c takes to send: its keys and string
// arguments (the command, if encoded already).
func (c *call) size() int {
	if c.raw != nil {
		return len(c.raw)
	}
	n := 0
	for _, k := range c.keys {
		n += len(k)
	}
	for _, a := range c.args {
		switch v := a.(type) {
		case string:
			n += len(v)
		case []byte:
			n += len(v)
		}
	}
	return n
}

// writes reports whether c may change what the master holds.
func (c *call) writes() bool { return !c.readOnly && (c.script == nil || !c.script.readOnly) }

// replier receives the replies of several calls, told apart by idx.
type replier interface {
	reply(idx int, cmd *redis.Cmd, now time.Time)
}

// finish hands c its reply (already in c.res), which came at now.
func (c *call) finish(now time.Time) {
	// Counted answered after the reply is handed over: a rollback the
	// reply sets off is queued (and counted) before.
	b := c.b
	c.b = nil
	defer b.answered()
	if c.cv != nil && c.cv.redirect(c) {
		return // queued anew, counted there
	}
	if c.to != nil {
		c.to.reply(c.idx, &c.res, now)
	} else {
		c.done(&c.res)
	}
}

// fail answers c with err.
func (c *call) fail(err error) {
	c.res.SetErr(err)
	c.finish(time.Now())
}

// errClosed answers commands queued after Close.
var errClosed = errors.New("redlock: client closed")

// batcher runs the workers of one master.
type batcher struct {
	n         *node
	reqs      chan *call
	stop      chan struct{}
	closeOnce sync.Once

	pending   atomic.Int64 // calls queued or in flight, not yet answered (Close waits for them)
	pipelines atomic.Int64 // pipelines sent
	commands  atomic.Int64 // commands sent in them
	handoffs  atomic.Int64 // pipelines handed to another worker for a long reply
	aloneRuns atomic.Int64 // calls sent on a connection of their own

	// Long commands run on connections of their own, at most aloneMax at
	// once per master; connections that served them, or that a worker
	// left with its pipeline, wait in spare for the next.
	alone   chan struct{}
	spareMu sync.Mutex
	spare   []*mconn
	closed  bool
}

// aloneMax bounds the long commands (and long reads) that run at once on
// connections of their own, per master; spareMax the connections kept
// for them.
const (
	aloneMax = 8
	spareMax = 2
)

// queueLen is how many commands may wait for one master. A stalled master's
// queue can fill (the proxy lets each client have proxy.max_inflight
// operations in flight); a lock operation's command beyond it is answered
// errQueueFull at once and that master does not vote (trySend), so the
// queue never grows without bound and no operation waits on it.
const queueLen = 16384

func newBatcher(n *node, workers, queue int) *batcher {
	b := &batcher{n: n, reqs: make(chan *call, queue), stop: make(chan struct{}), alone: make(chan struct{}, aloneMax)}
	for i := 0; i < workers; i++ {
		go b.work()
	}
	return b
}

// admit counts c pending on b until it is answered.
func (b *batcher) admit(c *call) {
	c.b = b
	b.pending.Add(1)
}

// answered counts one of b's calls answered (b nil: one never admitted).
func (b *batcher) answered() {
	if b != nil {
		b.pending.Add(-1)
	}
}

// send queues c. It blocks only while the queue is full.
func (b *batcher) send(ctx context.Context, c *call) {
	b.admit(c)
	b.queue(ctx, c)
}

func (b *batcher) queue(ctx context.Context, c *call) {
	if b.long(c) {
		go b.runAlone(c)
		return
	}
	select {
	case b.reqs <- c:
	case <-b.stop:
		c.fail(errClosed)
	case <-ctx.Done():
		c.fail(ctx.Err())
	}
}

// errQueueFull answers a command for a master whose queue is full: it is
// behind by more than its workers can send, as a stalled master makes it.
var errQueueFull = errors.New("redlock: too many commands queued for this master")

// trySend queues c, or answers it with errQueueFull at once: a lock
// operation must not wait on one slow master's queue.
func (b *batcher) trySend(c *call) {
	b.admit(c)
	if b.long(c) {
		go b.runAlone(c)
		return
	}
	select {
	case b.reqs <- c:
	default:
		c.fail(errQueueFull)
	}
}

// sendAsync queues c without blocking: from a worker's own callback, a
// blocking send into a full queue would wait on itself.
func (b *batcher) sendAsync(c *call) {
	b.admit(c)
	if b.long(c) {
		go b.runAlone(c)
		return
	}
	select {
	case b.reqs <- c:
	default:
		go b.queue(context.Background(), c)
	}
}

// long reports whether c goes on a connection of its own: asked so, or
// longer than the shared pipeline carries.
func (b *batcher) long(c *call) bool {
	return c.alone || c.size() > b.n.opts.bigAt()
}

// errAloneBusy answers a long command that found every connection for long
// commands of its master busy until its deadline: the proxy's own limit,
// which says nothing of the master.
var errAloneBusy = errors.New("redlock: too many long commands for this master at once")

// runAlone sends calls (one long command, or the commands of a long read)
// on a connection of their own, off the shared pipeline: they take as long
// as their bytes take to travel, and nobody else's command waits behind
// them. It waits for one of the master's aloneMax slots until the first
// call's deadline.
func (b *batcher) runAlone(calls ...*call) {
	fail := func(err error) {
		for _, c := range calls {
			c.fail(err)
		}
	}
	t := time.NewTimer(time.Until(calls[0].deadline))
	defer t.Stop()
	select {
	case b.alone <- struct{}{}:
	case <-t.C:
		fail(errAloneBusy)
		return
	case <-b.stop:
		fail(errClosed)
		return
	}
	defer func() { <-b.alone }()
	b.aloneRuns.Add(int64(len(calls)))
	w := &worker{b: b, alone: true, conn: b.takeSpare()}
	w.exec(calls)
	w.release()
}

// takeSpare returns a spare connection, or nil.
func (b *batcher) takeSpare() *mconn {
	b.spareMu.Lock()
	defer b.spareMu.Unlock()
	if len(b.spare) == 0 {
		return nil
	}
	m := b.spare[len(b.spare)-1]
	b.spare = b.spare[:len(b.spare)-1]
	return m
}

// putSpare keeps m for the next that needs a connection, or closes it.
func (b *batcher) putSpare(m *mconn) {
	m.w, m.digest = nil, false
	b.spareMu.Lock()
	if !b.closed && len(b.spare) < spareMax {
		b.spare = append(b.spare, m)
		m = nil
	}
	b.spareMu.Unlock()
	if m != nil {
		m.close()
	}
}

// worker is one of a master's pipelines: it owns its connection.
type worker struct {
	written []*call // the write calls of the batch in flight (roundTrip), kept for its storage

	b       *batcher
	conn    *mconn          // nil until the first batch, and after an I/O error
	dialing chan dialResult // a new connection being opened, or nil
	// dialUntil: when the dial of dialing gives up.
	dialUntil time.Time
	// alone: the worker runs one long command (runAlone), or has handed
	// the shared pipeline to another worker and finishes its last batch.
	alone bool
}

// handOff gives the shared pipeline to a new worker: the connection's next
// reply is long (a string beyond bigAt), and the commands queued meanwhile
// would wait for all of it. This worker reads on, answers its batch, and
// ends, leaving its connection spare.
func (w *worker) handOff() {
	if w.alone {
		return
	}
	w.alone = true
	w.b.handoffs.Add(1)
	go w.b.work()
}

// release leaves the worker's connections: spare, or closed once the
// batcher is.
func (w *worker) release() {
	if w.conn != nil {
		w.b.putSpare(w.conn)
		w.conn = nil
	}
	if w.dialing != nil {
		go func(ch chan dialResult) {
			if r := <-ch; r.m != nil {
				w.b.putSpare(r.m)
			}
		}(w.dialing)
		w.dialing = nil
	}
}

type dialResult struct {
	m   *mconn
	err error
}

func (b *batcher) work() {
	w := &worker{b: b, conn: b.takeSpare()}
	defer w.release()
	batch := make([]*call, 0, maxBatch)
	for {
		select {
		case <-b.stop:
			return
		case c := <-b.reqs:
			batch = append(batch[:0], c)
		}
		// Let the operations that are running queue their commands too:
		// one pipeline then carries them all.
		runtime.Gosched()
	more:
		for len(batch) < maxBatch {
			select {
			case c := <-b.reqs:
				batch = append(batch, c)
			default:
				break more
			}
		}
		w.exec(batch)
		clear(batch)
		if w.alone {
			return // handed over: another worker has the queue
		}
	}
}

// exec sends one batch as a pipeline and hands every command its reply. A
// command whose deadline passed while it waited is not sent.
func (w *worker) exec(batch []*call) {
	now := time.Now()
	live := batch[:0] // filtered in place
	var deadline time.Time
	for _, c := range batch {
		if !now.Before(c.deadline) {
			c.fail(context.DeadlineExceeded)
			continue
		}
		if deadline.IsZero() || c.deadline.Before(deadline) {
			deadline = c.deadline
		}
		live = append(live, c)
	}
	if len(live) == 0 {
		return
	}
	if w.conn != nil && w.b.n.staleConn(w.conn.nc) {
		// The Sentinel group's primary moved (sentinel.go): this
		// connection goes to the old one.
		w.conn.close()
		w.conn = nil
	}
	w.b.pipelines.Add(1)
	w.b.commands.Add(int64(len(live)))
	w.roundTrip(live, false, now, deadline)
	// A master that has not seen a script yet (new, restarted or flushed)
	// answers NOSCRIPT: send those again with the script's text.
	var again []*call
	for _, c := range live {
		if c.script != nil && isNoScript(c.res.Err()) {
			c.res = redis.Cmd{}
			again = append(again, c)
		}
	}
	if len(again) > 0 {
		w.roundTrip(again, true, now, deadline)
	}
	// One reading of the clock for the batch: its replies came together.
	now = time.Now()
	for _, c := range live {
		c.finish(now)
	}
}

func (b *batcher) close() {
	b.closeOnce.Do(func() {
		close(b.stop)
		b.spareMu.Lock()
		spare := b.spare
		b.spare, b.closed = nil, true
		b.spareMu.Unlock()
		for _, m := range spare {
			m.close()
		}
	})
}

func isNoScript(err error) bool {
	return err != nil && strings.HasPrefix(err.Error(), "NOSCRIPT")
}

// connectTimeout bounds a new connection's dial and handshake. It is
// longer than the node timeout, which bounds each operation: a master slow
// to accept or to answer its first command (one that fsyncs every write,
// after a burst of disk activity) keeps the connection once it is open,
// though the operations that waited on it failed at their deadlines.
func (o *options) connectTimeout() time.Duration {
	return max(o.nodeTimeout, time.Second)
}

// firstConnectTimeout bounds the first connection the client opens to a
// master, and the wait of the commands queued for it: as a go-redis
// client's first command waits for its dial, a new client's first
// operations wait for their masters' connections, instead of failing at
// the node timeout on a machine slow to open them. A master that once
// answered and is reconnecting gets connectTimeout, and the operations
// their node timeout.
func (o *options) firstConnectTimeout() time.Duration {
	return max(o.nodeTimeout, 5*time.Second)
}

// connect returns a new connection to the worker's master, or an error
// when none is open by deadline. The dial and handshake run on by their own
// timeout past that deadline, and the next batch takes the connection.
// Before the first connection to the master is open, deadline moves to the
// end of the dial's own timeout: connect returns the deadline the batch
// then has.
func (w *worker) connect(deadline time.Time) (*mconn, time.Time, error) {
	n := w.b.n
	if n.opts.dialInline {
		m, err := n.dial(deadline)
		return m, deadline, err
	}
	if w.dialing == nil {
		ch := make(chan dialResult, 1)
		wait := n.opts.connectTimeout()
		if !n.opened.Load() {
			wait = n.opts.firstConnectTimeout()
		}
		until := time.Now().Add(wait)
		go func() {
			m, err := n.dial(until)
			ch <- dialResult{m, err}
		}()
		w.dialing, w.dialUntil = ch, until
	}
	if !n.opened.Load() && w.dialUntil.After(deadline) {
		deadline = w.dialUntil
	}
	t := time.NewTimer(time.Until(deadline))
	defer t.Stop()
	select {
	case r := <-w.dialing:
		w.dialing = nil
		return r.m, deadline, r.err
	case <-t.C:
		return nil, deadline, errConnecting
	case <-w.b.stop:
		return nil, deadline, errClosed
	}
}

// errConnecting answers the calls of a batch whose deadline passed while
// the worker's connection was still being opened.
var errConnecting = fmt.Errorf("redlock: connection still being opened: %w", os.ErrDeadlineExceeded)
