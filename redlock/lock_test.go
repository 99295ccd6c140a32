package redlock

import (
	"context"
	"errors"
	"math"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/redlock-proxy/redlock-proxy/internal/redistest"
	"github.com/redlock-proxy/redlock-proxy/redlock/engine"
)

// lockClient is a client of addrs with the restart guard off (the masters
// are fresh) and its pipelines dialled.
func lockClient(t *testing.T, addrs []string) *Client {
	t.Helper()
	e, err := engine.New(addrs, engine.WithRestartGuard(0), engine.WithNodeTimeout(200*time.Millisecond), engine.WithMarkDown(0, 0))
	if err != nil {
		t.Fatal(err)
	}
	c := &Client{e: e}
	t.Cleanup(func() { c.Close() })
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	e.Probe(ctx)
	return c
}

// pttls reads key's PTTL on each running master of ms (-2: absent).
func pttls(t *testing.T, ms []*redistest.Server, key string) []time.Duration {
	t.Helper()
	var out []time.Duration
	for _, s := range ms {
		mc := s.Client()
		p, err := mc.PTTL(context.Background(), key).Result()
		mc.Close()
		if err != nil {
			t.Fatalf("%v: %v", s, err)
		}
		out = append(out, p)
	}
	return out
}

// settledPTTLs is pttls once every master's PTTL satisfies ok, or after
// 2 s: an operation answers at the quorum's decision, and the last master's
// command may still be on its way then.
func settledPTTLs(t *testing.T, ms []*redistest.Server, key string, ok func(time.Duration) bool) []time.Duration {
	t.Helper()
	deadline := time.Now().Add(2 * time.Second)
	for {
		ps := pttls(t, ms, key)
		if !slices.ContainsFunc(ps, func(p time.Duration) bool { return !ok(p) }) || time.Now().After(deadline) {
			return ps
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// The life of a lock: obtained on a quorum, refused to a second holder,
// refreshed on every master, released, and then neither refreshed nor
// released again.
func TestObtainRefreshRelease(t *testing.T) {
	t.Parallel()
	ms := redistest.StartN(t, 3)
	c := lockClient(t, redistest.Addrs(ms))
	ctx := context.Background()
	const key = "obtain:life"

	m, err := c.Obtain(ctx, key, 2*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if m.Key() != key || len(m.Token()) != 22 || m.Metadata() != "" || m.Fence() != 0 {
		t.Fatalf("key %q token %q metadata %q fence %d", m.Key(), m.Token(), m.Metadata(), m.Fence())
	}
	if v := m.Validity(); v <= time.Second || v > 2*time.Second {
		t.Fatalf("validity %v of a 2 s lock just obtained", v)
	}
	if _, err := c.Obtain(ctx, key, time.Second); !errors.Is(err, ErrNotAcquired) || !errors.Is(err, engine.ErrHeld) {
		t.Fatalf("second obtain: %v, want ErrNotAcquired (held)", err)
	}

	if err := m.Refresh(ctx, 10*time.Second); err != nil {
		t.Fatal(err)
	}
	for i, p := range settledPTTLs(t, ms, key, func(p time.Duration) bool { return p >= 9*time.Second }) {
		if p < 9*time.Second {
			t.Errorf("master %d: PTTL %v after a refresh to 10 s", i, p)
		}
	}
	if v := m.Validity(); v < 9*time.Second {
		t.Errorf("validity %v after a refresh to 10 s", v)
	}
	if ttl, err := m.TTL(ctx); err != nil || ttl < 9*time.Second {
		t.Errorf("TTL: %v %v after a refresh to 10 s", ttl, err)
	}

	if err := m.Release(ctx); err != nil {
		t.Fatal(err)
	}
	if v := m.Validity(); v != 0 {
		t.Errorf("validity %v after release", v)
	}
	for i, p := range settledPTTLs(t, ms, key, func(p time.Duration) bool { return p == -2 }) {
		if p != -2 {
			t.Errorf("master %d still holds the key after release (PTTL %v)", i, p)
		}
	}
	if err := m.Refresh(ctx, time.Second); !errors.Is(err, ErrNotHeld) {
		t.Errorf("refresh after release: %v, want ErrNotHeld", err)
	}
	if err := m.Release(ctx); !errors.Is(err, ErrNotHeld) {
		t.Errorf("second release: %v, want ErrNotHeld", err)
	}
	if ttl, err := m.TTL(ctx); ttl != 0 || err != nil {
		t.Errorf("TTL after release: %v %v, want 0", ttl, err)
	}
}

// A lock that expired is not held: its refresh and release say so, and
// leave alone the holder that took the key since.
func TestExpiredLockIsNotHeld(t *testing.T) {
	t.Parallel()
	ms := redistest.StartN(t, 3)
	c := lockClient(t, redistest.Addrs(ms))
	ctx := context.Background()
	const key = "obtain:expired"

	old, err := c.Obtain(ctx, key, 150*time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	time.Sleep(300 * time.Millisecond)
	if v := old.Validity(); v != 0 {
		t.Errorf("validity %v of an expired lock", v)
	}
	cur, err := c.Obtain(ctx, key, 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if err := old.Refresh(ctx, 10*time.Second); !errors.Is(err, ErrNotHeld) {
		t.Errorf("refresh of an expired lock: %v, want ErrNotHeld", err)
	}
	if err := old.Release(ctx); !errors.Is(err, ErrNotHeld) {
		t.Errorf("release of an expired lock: %v, want ErrNotHeld", err)
	}
	if ttl, err := cur.TTL(ctx); err != nil || ttl < 9*time.Second {
		t.Errorf("the current holder's lock: TTL %v %v", ttl, err)
	}
}

// countingRetry records the attempts it is asked about.
type countingRetry struct {
	mu sync.Mutex
	ns []int
	d  time.Duration
}

func (r *countingRetry) NextBackoff(n int) time.Duration {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.ns = append(r.ns, n)
	return r.d
}

// With a retry strategy, Obtain waits for a held key to be free.
func TestObtainRetryStrategy(t *testing.T) {
	t.Parallel()
	ms := redistest.StartN(t, 3)
	c := lockClient(t, redistest.Addrs(ms))
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()

	t.Run("linear_until_expiry", func(t *testing.T) {
		a, err := c.Obtain(ctx, "retry:linear", 300*time.Millisecond)
		if err != nil {
			t.Fatal(err)
		}
		b, err := c.Obtain(ctx, "retry:linear", time.Second, WithRetryStrategy(LinearBackoff(20*time.Millisecond)))
		if err != nil {
			t.Fatal(err)
		}
		if a.Validity() != 0 {
			t.Errorf("obtained while the first holder still had %v of validity", a.Validity())
		}
		if b.Token() == a.Token() {
			t.Error("two obtains drew the same token")
		}
	})

	t.Run("exponential_until_release", func(t *testing.T) {
		a, err := c.Obtain(ctx, "retry:exp", 10*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		released := make(chan error, 1)
		time.AfterFunc(200*time.Millisecond, func() { released <- a.Release(ctx) })
		start := time.Now()
		if _, err := c.Obtain(ctx, "retry:exp", time.Second, WithRetryStrategy(ExponentialBackoff(10*time.Millisecond, 80*time.Millisecond))); err != nil {
			t.Fatal(err)
		}
		if err := <-released; err != nil {
			t.Fatal(err)
		}
		if d := time.Since(start); d < 200*time.Millisecond || d > 2*time.Second {
			t.Errorf("obtained %v after asking; the key was released after 200 ms", d)
		}
	})

	t.Run("limited", func(t *testing.T) {
		if _, err := c.Obtain(ctx, "retry:limit", 10*time.Second); err != nil {
			t.Fatal(err)
		}
		r := &countingRetry{d: 10 * time.Millisecond}
		_, err := c.Obtain(ctx, "retry:limit", time.Second, WithRetryStrategy(LimitRetry(r, 2)))
		if !errors.Is(err, ErrNotAcquired) || errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("obtain of a held key with 2 retries: %v", err)
		}
		if len(r.ns) != 2 || r.ns[0] != 1 || r.ns[1] != 2 {
			t.Errorf("strategy asked after attempts %v, want [1 2]", r.ns)
		}
	})
}

// Cancelling the context ends the retries at once; the error is both a
// refusal and the context's.
func TestObtainCancelledDuringRetry(t *testing.T) {
	t.Parallel()
	ms := redistest.StartN(t, 3)
	c := lockClient(t, redistest.Addrs(ms))
	bg := context.Background()
	if _, err := c.Obtain(bg, "cancel:held", 10*time.Second); err != nil {
		t.Fatal(err)
	}

	ctx, cancel := context.WithCancel(bg)
	time.AfterFunc(100*time.Millisecond, cancel)
	start := time.Now()
	_, err := c.Obtain(ctx, "cancel:held", time.Second, WithRetryStrategy(LinearBackoff(time.Hour)))
	if d := time.Since(start); d > time.Second {
		t.Errorf("returned %v after the start, cancelled after 100 ms", d)
	}
	if !errors.Is(err, context.Canceled) || !errors.Is(err, ErrNotAcquired) {
		t.Errorf("cancelled obtain: %v, want context.Canceled and ErrNotAcquired", err)
	}

	dctx, dcancel := context.WithTimeout(bg, 100*time.Millisecond)
	defer dcancel()
	_, err = c.Obtain(dctx, "cancel:held", time.Second, WithRetryStrategy(LinearBackoff(10*time.Millisecond)))
	if !errors.Is(err, context.DeadlineExceeded) || !errors.Is(err, ErrNotAcquired) {
		t.Errorf("obtain past its deadline: %v, want context.DeadlineExceeded and ErrNotAcquired", err)
	}

	// A context already done makes no attempt: the free key stays free.
	_, err = c.Obtain(ctx, "cancel:free", time.Second)
	if !errors.Is(err, context.Canceled) || !errors.Is(err, ErrNotAcquired) {
		t.Errorf("obtain with a cancelled context: %v", err)
	}
	for i, p := range pttls(t, ms, "cancel:free") {
		if p != -2 {
			t.Errorf("master %d holds a key obtained with a cancelled context", i)
		}
	}
}

// Two of three masters are a quorum: the lock is obtained, refreshed and
// released with one of them down. With two down, every step answers
// ErrNoQuorum, never "not held", and Obtain does not retry it.
func TestObtainWithMastersDown(t *testing.T) {
	t.Parallel()
	ms := redistest.StartN(t, 3)
	c := lockClient(t, redistest.Addrs(ms))
	ctx := context.Background()
	const key = "down:k"

	ms[0].Kill()
	m, err := c.Obtain(ctx, key, 5*time.Second)
	if err != nil {
		t.Fatalf("obtain with 2 of 3 masters: %v", err)
	}
	if err := m.Refresh(ctx, 10*time.Second); err != nil {
		t.Fatalf("refresh with 2 of 3 masters: %v", err)
	}
	for i, p := range pttls(t, ms[1:], key) {
		if p < 9*time.Second {
			t.Errorf("master %d: PTTL %v after a refresh to 10 s", i+1, p)
		}
	}
	if err := m.Release(ctx); err != nil {
		t.Fatalf("release with 2 of 3 masters: %v", err)
	}

	held, err := c.Obtain(ctx, key, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	ms[1].Kill()
	start := time.Now()
	_, err = c.Obtain(ctx, "down:other", 5*time.Second, WithRetryStrategy(LinearBackoff(time.Hour)))
	if !errors.Is(err, ErrNoQuorum) || errors.Is(err, ErrNotAcquired) {
		t.Errorf("obtain with 1 of 3 masters: %v, want ErrNoQuorum", err)
	}
	if d := time.Since(start); d > 2*time.Second {
		t.Errorf("obtain without a quorum took %v: it should not retry", d)
	}
	if err := held.Refresh(ctx, 5*time.Second); !errors.Is(err, ErrNoQuorum) {
		t.Errorf("refresh with 1 of 3 masters: %v, want ErrNoQuorum", err)
	}
	if err := held.Release(ctx); !errors.Is(err, ErrNoQuorum) {
		t.Errorf("release with 1 of 3 masters: %v, want ErrNoQuorum", err)
	}
}

// WithFence obtains a fenced lock, whose number grows from grant to grant.
func TestObtainFenced(t *testing.T) {
	t.Parallel()
	ms := redistest.StartN(t, 3)
	c := lockClient(t, redistest.Addrs(ms))
	ctx := context.Background()
	const key = "fenced:k"

	a, err := c.Obtain(ctx, key, 5*time.Second, WithFence())
	if err != nil {
		t.Fatal(err)
	}
	if a.Fence() <= 0 || a.Validity() <= 0 {
		t.Fatalf("fence %d, validity %v", a.Fence(), a.Validity())
	}
	if _, err := c.Obtain(ctx, key, 5*time.Second, WithFence()); !errors.Is(err, ErrNotAcquired) {
		t.Fatalf("second fenced obtain: %v, want ErrNotAcquired", err)
	}
	if err := a.Refresh(ctx, 10*time.Second); err != nil {
		t.Fatal(err)
	}
	for i, p := range settledPTTLs(t, ms, key, func(p time.Duration) bool { return p >= 9*time.Second }) {
		if p < 9*time.Second {
			t.Errorf("master %d: PTTL %v after a refresh to 10 s", i, p)
		}
	}
	if err := a.Release(ctx); err != nil {
		t.Fatal(err)
	}
	if err := a.Release(ctx); !errors.Is(err, ErrNotHeld) {
		t.Errorf("second release: %v, want ErrNotHeld", err)
	}
	if err := a.Refresh(ctx, time.Second); !errors.Is(err, ErrNotHeld) {
		t.Errorf("refresh after release: %v, want ErrNotHeld", err)
	}
	b, err := c.Obtain(ctx, key, 5*time.Second, WithFence())
	if err != nil {
		t.Fatal(err)
	}
	if b.Fence() <= a.Fence() {
		t.Errorf("fence %d after %d: it must grow", b.Fence(), a.Fence())
	}
}

// The key holds the token followed by the metadata.
func TestObtainTokenAndMetadata(t *testing.T) {
	t.Parallel()
	ms := redistest.StartN(t, 3)
	c := lockClient(t, redistest.Addrs(ms))
	ctx := context.Background()
	const key = "meta:k"

	m, err := c.Obtain(ctx, key, 5*time.Second, WithToken("tok-1"), WithMetadata(`{"host":"a"}`))
	if err != nil {
		t.Fatal(err)
	}
	if m.Token() != "tok-1" || m.Metadata() != `{"host":"a"}` {
		t.Errorf("token %q metadata %q", m.Token(), m.Metadata())
	}
	// Every master, once the last one's SET (sent with the others, not
	// waited for) has landed.
	settledPTTLs(t, ms, key, func(p time.Duration) bool { return p > 0 })
	for i, s := range ms {
		mc := s.Client()
		v, err := mc.Get(ctx, key).Result()
		mc.Close()
		if v != `tok-1{"host":"a"}` || err != nil {
			t.Errorf("master %d holds %q (%v)", i, v, err)
		}
	}
	if ttl, err := m.TTL(ctx); err != nil || ttl <= 4*time.Second || ttl > 5*time.Second {
		t.Errorf("TTL %v %v of a 5 s lock", ttl, err)
	}
	if _, err := c.Obtain(ctx, key, 5*time.Second, WithToken("tok-1"), WithMetadata(`{"host":"a"}`)); !errors.Is(err, ErrNotAcquired) {
		t.Errorf("obtain of a key held for the same token: %v, want ErrNotAcquired", err)
	}
	for _, bad := range []struct {
		ttl  time.Duration
		opts []ObtainOption
	}{{0, nil}, {-time.Second, nil}, {time.Second, []ObtainOption{WithToken("")}}} {
		if _, err := c.Obtain(ctx, "meta:bad", bad.ttl, bad.opts...); err == nil || errors.Is(err, ErrNotAcquired) {
			t.Errorf("obtain with ttl %v and %d options: %v, want an argument error", bad.ttl, len(bad.opts), err)
		}
	}
	if err := m.Refresh(ctx, 0); err == nil || errors.Is(err, ErrNotHeld) {
		t.Errorf("refresh to 0: %v, want an argument error", err)
	}
}

func TestRetryStrategies(t *testing.T) {
	ms := time.Millisecond
	for _, c := range []struct {
		name string
		s    RetryStrategy
		want []time.Duration // after attempts 1, 2, …
	}{
		{"none", NoRetry(), []time.Duration{0}},
		{"linear", LinearBackoff(5 * ms), []time.Duration{5 * ms, 5 * ms, 5 * ms}},
		{"linear_zero", LinearBackoff(0), []time.Duration{0}},
		{"exponential", ExponentialBackoff(10*ms, 100*ms), []time.Duration{10 * ms, 20 * ms, 40 * ms, 80 * ms, 100 * ms, 100 * ms}},
		{"exponential_max_below_min", ExponentialBackoff(10*ms, 5*ms), []time.Duration{10 * ms, 10 * ms}},
		{"exponential_zero", ExponentialBackoff(0, time.Second), []time.Duration{0}},
		{"limited", LimitRetry(LinearBackoff(5*ms), 2), []time.Duration{5 * ms, 5 * ms, 0, 0}},
		{"limited_exponential", LimitRetry(ExponentialBackoff(ms, time.Second), 3), []time.Duration{ms, 2 * ms, 4 * ms, 0}},
	} {
		for i, w := range c.want {
			if got := c.s.NextBackoff(i + 1); got != w {
				t.Errorf("%s: after attempt %d: %v, want %v", c.name, i+1, got, w)
			}
		}
	}
	huge := ExponentialBackoff(time.Nanosecond, math.MaxInt64)
	for _, n := range []int{62, 63, 64, 1000} {
		if d := huge.NextBackoff(n); d <= 0 {
			t.Errorf("exponential backoff after attempt %d overflowed: %v", n, d)
		}
	}
}

// Obtain and Refresh ask for no TTL above WithMaxLockTTL: refused with
// ErrTTLTooLong, nothing sent, and a lock held keeps its TTL and validity.
func TestMaxLockTTL(t *testing.T) {
	ms := redistest.StartN(t, 3)
	c, err := New(redistest.Addrs(ms), WithRestartGuard(0), WithMaxLockTTL(time.Minute))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ctx := context.Background()
	if _, err := c.Obtain(ctx, "k", time.Minute+time.Millisecond); !errors.Is(err, ErrTTLTooLong) {
		t.Fatalf("Obtain above the bound: %v", err)
	}
	if ps := pttls(t, ms, "k"); slices.ContainsFunc(ps, func(p time.Duration) bool { return p != -2 }) {
		t.Fatalf("PTTLs after a refused Obtain: %v", ps)
	}
	l, err := c.Obtain(ctx, "k", 30*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	before := l.Validity()
	if err := l.Refresh(ctx, math.MaxInt64); !errors.Is(err, ErrTTLTooLong) {
		t.Fatalf("Refresh above the bound: %v", err)
	}
	if ps := pttls(t, ms, "k"); slices.ContainsFunc(ps, func(p time.Duration) bool { return p > 30*time.Second }) {
		t.Fatalf("PTTLs after a refused Refresh: %v", ps)
	}
	if l.Validity() <= 0 || l.Validity() > before {
		t.Fatalf("validity after a refused Refresh: %s (before %s)", l.Validity(), before)
	}
	if _, err := New(redistest.Addrs(ms), WithMaxLockTTL(0)); err == nil {
		t.Fatal("a bound of 0 accepted")
	}
}
