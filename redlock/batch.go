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
// to it together: a few workers per master each take whatever is queued (up
// to maxBatch commands) and send it as one pipeline, so that under load a
// master sees one read and one write for many lock operations instead of one
// each. A command waits in the queue only while every worker of its master
// is busy with a round trip.

// maxBatch caps the commands sent in one pipeline.
const maxBatch = 256

// call is one command for one master.
type call struct {
	args     []any
	script   *script // run args as this script's ARGV, by EVALSHA
	keys     []string
	deadline time.Time
	done     func(*redis.Cmd) // called once, by the worker that ran it
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
		c.done(failed(c, errClosed))
	case <-ctx.Done():
		c.done(failed(c, ctx.Err()))
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
		c.done(failed(c, errQueueFull))
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
	live := batch[:0:0]
	var deadline time.Time
	for _, c := range batch {
		if !now.Before(c.deadline) {
			c.done(failed(c, context.DeadlineExceeded))
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
	cmds := w.roundTrip(live, false, deadline)
	// A master that has not seen a script yet (new, restarted or flushed)
	// answers NOSCRIPT: send those again with the script's text.
	var again []*call
	var at []int
	for i, c := range live {
		if c.script != nil && isNoScript(cmds[i].Err()) {
			again = append(again, c)
			at = append(at, i)
		}
	}
	if len(again) > 0 {
		for j, cmd := range w.roundTrip(again, true, deadline) {
			cmds[at[j]] = cmd
		}
	}
	for i, c := range live {
		c.done(cmds[i])
	}
}

func (b *batcher) close() {
	b.closeOnce.Do(func() { close(b.stop) })
}

func failed(c *call, err error) *redis.Cmd {
	cmd := redis.NewCmd(context.Background(), c.args...)
	cmd.SetErr(err)
	return cmd
}

func isNoScript(err error) bool {
	return err != nil && strings.HasPrefix(err.Error(), "NOSCRIPT")
}
