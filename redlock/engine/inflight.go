package engine

import (
	"context"
	"sync"
	"time"
)

// inflight tracks, per key, acquire writes still on their way to masters
// after the outcome was answered. A later release, extend or write of the
// same key through this client waits for them (at most twice the node
// timeout), so that it cannot overtake them: a late SET NX landing after a
// DEL would leave a copy behind.
type inflight struct {
	mu sync.Mutex
	m  map[string]*flight
}

type flight struct {
	n    int
	done chan struct{} // made by the first waiter
}

// begin registers n pending writes on each key.
func (f *inflight) begin(keys []string, n int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.m == nil {
		f.m = map[string]*flight{}
	}
	for _, k := range keys {
		fl := f.m[k]
		if fl == nil {
			fl = &flight{}
			f.m[k] = fl
		}
		fl.n += n
	}
}

// end marks one pending write on each key as finished.
func (f *inflight) end(keys []string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, k := range keys {
		if fl := f.m[k]; fl != nil {
			if fl.n--; fl.n <= 0 {
				if fl.done != nil {
					close(fl.done)
				}
				delete(f.m, k)
			}
		}
	}
}

// wait blocks until key has no pending writes, or d has passed.
func (f *inflight) wait(ctx context.Context, key string, d time.Duration) {
	f.mu.Lock()
	fl := f.m[key]
	if fl == nil {
		f.mu.Unlock()
		return
	}
	if fl.done == nil {
		fl.done = make(chan struct{})
	}
	done := fl.done
	f.mu.Unlock()
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-done:
	case <-t.C:
	case <-ctx.Done():
	}
}

// WaitWrites waits until acquires of key answered earlier through this
// client have reached every master (or timed out). Call it before writing
// a lock key by other means, so the write lands after them.
func (c *Client) WaitWrites(ctx context.Context, key string) {
	c.flights.wait(ctx, key, 2*c.opts.nodeTimeout)
}
