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
	sent     bool      // written, reply not yet read
	readOnly bool      // changes nothing on the master (a check)
}

// writes reports whether c may change what the master holds.
func (c *call) writes() bool { return !c.readOnly && (c.script == nil || !c.script.readOnly) }

// replier receives the replies of several calls, told apart by idx.
type replier interface {
	reply(idx int, cmd *redis.Cmd, now time.Time)
}

// finish hands c its reply (already in c.res), which came at now.
func (c *call) finish(now time.Time) {
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

	pipelines atomic.Int64 // pipelines sent
	commands  atomic.Int64 // commands sent in them
}

// queueLen is how many commands may wait for one master. A stalled master's
// queue can fill (the proxy lets each client have proxy.max_inflight
// operations in flight); a lock operation's command beyond it is answered
// errQueueFull at once and that master does not vote (trySend), so the
// queue never grows without bound and no operation waits on it.
const queueLen = 16384

func newBatcher(n *node, workers, queue int) *batcher {
	b := &batcher{n: n, reqs: make(chan *call, queue), stop: make(chan struct{})}
	for i := 0; i < workers; i++ {
		go b.work()
	}
	return b
}

// send queues c. It blocks only while the queue is full.
func (b *batcher) send(ctx context.Context, c *call) {
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
	select {
	case b.reqs <- c:
	default:
		c.fail(errQueueFull)
	}
}

// sendAsync queues c without blocking: from a worker's own callback, a
// blocking send into a full queue would wait on itself.
func (b *batcher) sendAsync(c *call) {
	select {
	case b.reqs <- c:
	default:
		go b.send(context.Background(), c)
	}
}

// worker is one of a master's pipelines: it owns its connection.
type worker struct {
	b       *batcher
	conn    *mconn          // nil until the first batch, and after an I/O error
	dialing chan dialResult // a new connection being opened, or nil
}

type dialResult struct {
	m   *mconn
	err error
}

func (b *batcher) work() {
	w := &worker{b: b}
	defer func() {
		if w.conn != nil {
			w.conn.close()
		}
		if w.dialing != nil {
			go func(ch chan dialResult) {
				if r := <-ch; r.m != nil {
					r.m.close()
				}
			}(w.dialing)
		}
	}()
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
	b.closeOnce.Do(func() { close(b.stop) })
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

// connect returns a new connection to the worker's master, or an error
// when none is open by deadline. The dial and handshake run on by their own
// timeout past that deadline, and the next batch takes the connection.
func (w *worker) connect(deadline time.Time) (*mconn, error) {
	n := w.b.n
	if n.opts.dialInline {
		return n.dial(deadline)
	}
	if w.dialing == nil {
		ch := make(chan dialResult, 1)
		until := time.Now().Add(n.opts.connectTimeout())
		go func() {
			m, err := n.dial(until)
			ch <- dialResult{m, err}
		}()
		w.dialing = ch
	}
	t := time.NewTimer(time.Until(deadline))
	defer t.Stop()
	select {
	case r := <-w.dialing:
		w.dialing = nil
		return r.m, r.err
	case <-t.C:
		return nil, errConnecting
	case <-w.b.stop:
		return nil, errClosed
	}
}

// errConnecting answers the calls of a batch whose deadline passed while
// the worker's connection was still being opened.
var errConnecting = fmt.Errorf("redlock: connection still being opened: %w", os.ErrDeadlineExceeded)
