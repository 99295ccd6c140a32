package redlock

import (
	"context"
	"errors"
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

	res  redis.Cmd // the reply
	sent bool      // written, reply not yet read
}

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

// queueLen is how many commands may wait for one master. The proxy has at
// most one lock operation in flight per client, so with proxy.max_clients
// below it the queue of even a stalled master does not fill.
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
	b    *batcher
	conn *mconn // nil until the first batch, and after an I/O error
}

func (b *batcher) work() {
	w := &worker{b: b}
	defer func() {
		if w.conn != nil {
			w.conn.close()
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
