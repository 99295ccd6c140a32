package proxy

import (
	"errors"
	"sync"
	"time"

	"github.com/redlock-proxy/redlock-proxy/redlock/engine"
)

// waitQueues orders the clients of this proxy that wait for a key
// (LOCK.ACQUIRE … WAIT ms): first come, first served. Only the head of a
// key's queue tries to acquire. It tries again when a release through this
// proxy frees the key, when the holder's copies would have expired (their
// shortest remaining TTL, reported by the refused acquire), and at the
// latest every proxy.lock_wait_poll, which covers releases through other
// proxies. Clients that acquire without WAIT do not queue.
type waitQueues struct {
	mu sync.Mutex
	q  map[string][]*waiter
}

type waiter struct{ wake chan struct{} } // buffered 1: a wake is never lost

func (w *waiter) signal() {
	select {
	case w.wake <- struct{}{}:
	default:
	}
}

// join queues a waiter for key; the head is signalled at once.
func (w *waitQueues) join(key string) *waiter {
	wt := &waiter{wake: make(chan struct{}, 1)}
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.q == nil {
		w.q = map[string][]*waiter{}
	}
	w.q[key] = append(w.q[key], wt)
	if len(w.q[key]) == 1 {
		wt.signal()
	}
	return wt
}

// leave removes a waiter; when it was the head, the next one is signalled.
func (w *waitQueues) leave(key string, wt *waiter) {
	w.mu.Lock()
	defer w.mu.Unlock()
	q := w.q[key]
	for i, x := range q {
		if x != wt {
			continue
		}
		q = append(q[:i:i], q[i+1:]...)
		if len(q) == 0 {
			delete(w.q, key)
			return
		}
		w.q[key] = q
		if i == 0 {
			q[0].signal()
		}
		return
	}
}

// wake signals the head of key's queue: the key was freed.
func (w *waitQueues) wake(key string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if q := w.q[key]; len(q) > 0 {
		q[0].signal()
	}
}

func (w *waitQueues) isHead(key string, wt *waiter) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	q := w.q[key]
	return len(q) > 0 && q[0] == wt
}

// waiting counts the clients waiting, over all keys.
func (w *waitQueues) waiting() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	n := 0
	for _, q := range w.q {
		n += len(q)
	}
	return n
}

// errWaiterGone ends the wait of a client that closed its connection.
var errWaiterGone = errors.New("proxy: the waiting client closed its connection")

// acquire waits its turn for key, then tries until try grants it, fails
// with an error other than "not acquired", or wait has passed (nil, nil).
// try reports, when refused, when the holder's copies would expire. gone
// is asked before every try: a client that left gives up its place (and
// takes no lock nobody would hear of) with errWaiterGone.
func (w *waitQueues) acquire(key string, wait, poll time.Duration, gone func() bool, try func() (*engine.FenceGrant, time.Duration, error)) (*engine.FenceGrant, error) {
	deadline := time.NewTimer(wait)
	defer deadline.Stop()
	retry := time.NewTimer(poll)
	defer retry.Stop()
	wt := w.join(key)
	defer w.leave(key, wt)
	for {
		select {
		case <-wt.wake:
		case <-retry.C:
		case <-deadline.C:
			return nil, nil
		}
		if gone() {
			return nil, errWaiterGone
		}
		if !w.isHead(key, wt) {
			continue
		}
		g, retryIn, err := try()
		if g != nil || (err != nil && !errors.Is(err, engine.ErrNotAcquired)) {
			return g, err
		}
		next := poll
		if retryIn > 0 && retryIn < poll {
			next = retryIn + time.Millisecond // Redis expires keys at the ms
		}
		if !retry.Stop() {
			select {
			case <-retry.C:
			default:
			}
		}
		retry.Reset(next)
	}
}
