package quorum

import (
	"context"
	"sync"
	"time"
)

// deadlineCtx is a context that ends at a deadline, or when cancelled, and
// starts its timer only when something asks for Done. Most lock operations
// never wait on their context (it bounds retries and waits for earlier
// writes), and a timer per operation was a few percent of the proxy's time.
type deadlineCtx struct {
	deadline time.Time

	mu    sync.Mutex
	done  chan struct{} // made by the first Done
	timer *time.Timer
	err   error // set when it ended
}

// Context is a context for one quorum operation, ending d from now: a
// deadlineCtx.
func Context(d time.Duration) (context.Context, context.CancelFunc) { return newDeadlineCtx(d) }

func newDeadlineCtx(d time.Duration) (*deadlineCtx, context.CancelFunc) {
	c := &deadlineCtx{deadline: time.Now().Add(d)}
	return c, func() { c.end(context.Canceled) }
}

func (c *deadlineCtx) Deadline() (time.Time, bool) { return c.deadline, true }

func (c *deadlineCtx) Done() <-chan struct{} {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.done == nil {
		c.done = make(chan struct{})
		switch {
		case c.err != nil:
			close(c.done)
		case !time.Now().Before(c.deadline):
			c.err = context.DeadlineExceeded
			close(c.done)
		default:
			c.timer = time.AfterFunc(time.Until(c.deadline), func() { c.end(context.DeadlineExceeded) })
		}
	}
	return c.done
}

// end ends the context with err, unless it has ended already.
func (c *deadlineCtx) end(err error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.err != nil {
		return
	}
	c.err = err
	if c.timer != nil {
		c.timer.Stop()
	}
	if c.done != nil {
		close(c.done)
	}
}

// Err says why the context ended: DeadlineExceeded once the deadline has
// passed (whether or not a timer was started), Canceled after cancel.
func (c *deadlineCtx) Err() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.err == nil && c.done == nil && !time.Now().Before(c.deadline) {
		c.err = context.DeadlineExceeded
	}
	return c.err
}

func (c *deadlineCtx) Value(any) any { return nil }
