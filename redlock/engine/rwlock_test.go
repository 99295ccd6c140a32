package engine

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/redlock-proxy/redlock-proxy/internal/redistest"
)

func rwClient(t *testing.T, ms []*redistest.Server) *Client {
	t.Helper()
	c, err := New(redistest.Addrs(ms), WithNodeTimeout(200*time.Millisecond), WithRetry(0, 0), WithRestartGuard(0), WithMarkDown(0, 0))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// seedRW makes token hold key on master m as a writer or a reader, for 10 s.
func seedRW(t *testing.T, m *redistest.Server, key, token string, writer bool) {
	t.Helper()
	c := m.Client()
	defer c.Close()
	ctx := context.Background()
	exp := float64(time.Now().Add(10 * time.Second).UnixMilli())
	c.ZAdd(ctx, key, redis.Z{Score: exp, Member: token})
	if writer {
		c.ZAdd(ctx, key, redis.Z{Score: exp, Member: "__write__"})
	}
	c.PExpire(ctx, key, 10*time.Second)
}

// rwHolders counts the masters on which token is a member of key, waiting
// up to a second for late writes and rollbacks to bring it to want.
func rwHolders(ms []*redistest.Server, key, token string, want int) int {
	deadline := time.Now().Add(time.Second)
	for {
		n := 0
		for _, m := range ms {
			c := m.Client()
			if _, err := c.ZScore(context.Background(), key, token).Result(); err == nil {
				n++
			}
			c.Close()
		}
		if n == want || time.Now().After(deadline) {
			return n
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// Another holder on every subset of the masters: an exclusive acquire is
// granted exactly when the free masters reach a quorum, and a refused one
// leaves its token on no master. A shared acquire coexists with readers.
func TestAcquireRWOnEverySubset(t *testing.T) {
	ms := redistest.StartN(t, 3)
	c := rwClient(t, ms)
	ctx := context.Background()
	for _, holder := range []string{"writer", "reader"} {
		for _, shared := range []bool{false, true} {
			for mask := 0; mask < 8; mask++ {
				key := fmt.Sprintf("rw:%s:%v:%d", holder, shared, mask)
				taken := 0
				for i := range ms {
					if mask&(1<<i) != 0 {
						seedRW(t, ms[i], key, "other", holder == "writer")
						taken++
					}
				}
				free := 3 - taken
				if holder == "reader" && shared {
					free = 3 // readers share
				}
				l, err := c.AcquireRW(ctx, key, "tok", 5*time.Second, shared)
				want := free >= c.Quorum()
				switch {
				case want && err != nil:
					t.Fatalf("%s: %v, want granted", key, err)
				case !want && !errors.Is(err, ErrNotAcquired):
					t.Fatalf("%s: %v (lock %v), want not acquired", key, err, l)
				case want && l.Validity <= 0:
					t.Fatalf("%s: no validity: %+v", key, l)
				}
				on := 0 // masters that should hold the token
				if want {
					on = free
				}
				if h := rwHolders(ms, key, "tok", on); h != on {
					t.Fatalf("%s: granted %v, token on %d masters, want %d", key, want, h, on)
				}
				if got := rwHolders(ms, key, "other", taken); got != taken {
					t.Fatalf("%s: the other holder is on %d masters, want %d", key, got, taken)
				}
			}
		}
	}
}

// A token on a minority does not hold the lock: extend and held say no,
// and release removes the minority copy all the same.
func TestRWMinorityIsNotHeld(t *testing.T) {
	ms := redistest.StartN(t, 3)
	c := rwClient(t, ms)
	ctx := context.Background()
	seedRW(t, ms[0], "rw:min", "tok", true)
	if _, ok, err := c.ExtendRW(ctx, "rw:min", "tok", 30*time.Second); ok || err != nil {
		t.Fatalf("extend on a minority: %v %v, want false", ok, err)
	}
	if held, err := c.HeldRW(ctx, "rw:min", "tok"); held || err != nil {
		t.Fatalf("held on a minority: %v %v, want false", held, err)
	}
	r, err := c.ReleaseRW(ctx, "rw:min", "tok")
	if err != nil || r.Released(c.Quorum()) {
		t.Fatalf("release on a minority: %+v %v, want not released", r, err)
	}
	if h := rwHolders(ms, "rw:min", "tok", 0); h != 0 {
		t.Fatalf("minority copy left on %d masters", h)
	}
}

// The full cycle on the quorum: acquire, held, extend, release.
func TestRWCycle(t *testing.T) {
	ms := redistest.StartN(t, 3)
	c := rwClient(t, ms)
	ctx := context.Background()
	if _, err := c.AcquireRW(ctx, "rw:c", "tok", 2*time.Second, false); err != nil {
		t.Fatal(err)
	}
	if held, err := c.HeldRW(ctx, "rw:c", "tok"); !held || err != nil {
		t.Fatalf("held: %v %v", held, err)
	}
	if _, ok, err := c.ExtendRW(ctx, "rw:c", "tok", 30*time.Second); !ok || err != nil {
		t.Fatalf("extend: %v %v", ok, err)
	}
	// The answer comes once a quorum renewed it; the last master follows.
	deadline := time.Now().Add(time.Second)
	for renewed := 0; renewed < len(ms); {
		renewed = 0
		for _, m := range ms {
			mc := m.Client()
			if p, _ := mc.PTTL(ctx, "rw:c").Result(); p > 25*time.Second {
				renewed++
			}
			mc.Close()
		}
		if renewed < c.Quorum() || renewed < len(ms) && time.Now().After(deadline) {
			t.Fatalf("extend to 30 s: renewed on %d masters", renewed)
		}
		time.Sleep(20 * time.Millisecond)
	}
	if _, ok, _ := c.ExtendRW(ctx, "rw:c", "other", 30*time.Second); ok {
		t.Fatal("extend by another token succeeded")
	}
	r, err := c.ReleaseRW(ctx, "rw:c", "tok")
	if err != nil || !r.Released(c.Quorum()) {
		t.Fatalf("release: %+v %v", r, err)
	}
	if h := rwHolders(ms, "rw:c", "tok", 0); h != 0 {
		t.Fatalf("token left on %d masters after release", h)
	}
}

// With fewer than a quorum of masters reachable an acquire is an error, not
// a refusal, and it leaves nothing behind.
func TestAcquireRWNoQuorum(t *testing.T) {
	ms := redistest.StartN(t, 3)
	c := rwClient(t, ms)
	ctx := context.Background()
	ms[1].Kill()
	ms[2].Kill()
	_, err := c.AcquireRW(ctx, "rw:nq", "tok", 5*time.Second, false)
	var qe *QuorumError
	if !errors.As(err, &qe) || !errors.Is(err, ErrNoQuorum) {
		t.Fatalf("got %v, want a QuorumError", err)
	}
	// The refusal may come before the reachable master has run the
	// acquire: its vote lands within the node timeout, or never, and is
	// then taken back. Look once that has passed.
	time.Sleep(250 * time.Millisecond)
	if h := rwHolders(ms[:1], "rw:nq", "tok", 0); h != 0 {
		t.Fatalf("token left on the reachable master after a refused acquire")
	}
	if _, err := c.HeldRW(ctx, "rw:nq", "tok"); !errors.Is(err, ErrNoQuorum) {
		t.Fatalf("held: %v, want no quorum", err)
	}
}

// A plain string lock on the key refuses the read/write lock, as the
// library's own script does; another type fails, as the script does.
func TestAcquireRWOnStringKey(t *testing.T) {
	ms := redistest.StartN(t, 3)
	c := rwClient(t, ms)
	ctx := context.Background()
	if _, err := c.Acquire(ctx, "rw:s", "v", 5*time.Second); err != nil {
		t.Fatal(err)
	}
	if _, err := c.AcquireRW(ctx, "rw:s", "tok", 5*time.Second, false); !errors.Is(err, ErrHeld) {
		t.Fatalf("got %v, want held elsewhere", err)
	}
	// Any other type fails with WRONGTYPE, as the library's scripts fail
	// on it, and nothing is taken.
	for _, m := range ms {
		mc := m.Client()
		mc.HSet(ctx, "rw:h", "f", "v")
		mc.Close()
	}
	if _, err := c.AcquireRW(ctx, "rw:h", "tok", 5*time.Second, true); !errors.Is(err, ErrWrongType) {
		t.Fatalf("hash: got %v, want WRONGTYPE", err)
	}
	if held, err := c.HeldRW(ctx, "rw:h", "tok"); held || !errors.Is(err, ErrWrongType) {
		t.Fatalf("hash: held %v %v", held, err)
	}
	for _, m := range ms {
		mc := m.Client()
		if f, _ := mc.HGetAll(ctx, "rw:h").Result(); len(f) != 1 || f["f"] != "v" {
			t.Errorf("%s: the hash became %v", m, f)
		}
		mc.Close()
	}
}

// As TestSameTokenRetryAfterDelayedRollback, for read/write locks: a master
// whose rollback of a refused acquire is still in flight does not vote for
// the same token's next attempt.
func TestAcquireRWRetryAfterDelayedRollback(t *testing.T) {
	delayedRollbackCases(t, "guard", "no_guard_shows_the_hazard", func(t *testing.T, ms []*redistest.Server, c *Client, relay *redistest.Relay, guard bool) {
		if !guard {
			WithGuardsOff(GuardTaint)(&c.opts)
		}
		ctx := context.Background()
		// Idle pooled connections to every master that know the scripts.
		for i := 0; i < 4; i++ {
			go c.HeldRW(ctx, "warm", "x")
		}
		time.Sleep(100 * time.Millisecond)
		c.AcquireRW(ctx, "warm", "x", time.Second, false)
		c.ReleaseRW(ctx, "warm", "x")
		time.Sleep(100 * time.Millisecond)
		seedRW(t, ms[1], "k", "other", true) // another writer on one master

		relay.Delay.Store(int64(400 * time.Millisecond))
		if _, err := c.AcquireRW(ctx, "k", "tok", 5*time.Second, false); !errors.Is(err, ErrNotAcquired) {
			t.Fatalf("first attempt: %v, want not acquired", err)
		}
		time.Sleep(50 * time.Millisecond) // its rollback is now held in the relay
		relay.Delay.Store(0)
		lock, err := c.AcquireRW(ctx, "k", "tok", 5*time.Second, false)
		time.Sleep(600 * time.Millisecond) // the delayed acquire and rollback land
		held := rwHolders([]*redistest.Server{ms[0], ms[2]}, "k", "tok", -1)
		checkRetryAfterDelayedRollback(t, guard, lock != nil, err, held, c.Quorum())
	})
}

// A reader whose promotion to writer is refused by the quorum stays a
// reader on every master, also where the promotion was taken.
func TestRefusedPromotionIsUndone(t *testing.T) {
	ms := redistest.StartN(t, 3)
	c := rwClient(t, ms)
	ctx := context.Background()
	if _, err := c.AcquireRW(ctx, "rw:p", "tok", 5*time.Second, true); err != nil {
		t.Fatal(err)
	}
	seedRW(t, ms[0], "rw:p", "other", false)
	seedRW(t, ms[1], "rw:p", "other", false)
	if _, err := c.AcquireRW(ctx, "rw:p", "tok", 5*time.Second, false); !errors.Is(err, ErrHeld) {
		t.Fatalf("promotion: %v, want held elsewhere", err)
	}
	if n := rwHolders(ms, "rw:p", "__write__", 0); n != 0 {
		t.Fatalf("write marker left on %d masters after a refused promotion", n)
	}
	if n := rwHolders(ms, "rw:p", "tok", 3); n != 3 {
		t.Fatalf("the reader is left on %d masters, want 3", n)
	}
}
