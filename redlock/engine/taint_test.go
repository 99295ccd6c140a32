package engine

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/redlock-proxy/redlock-proxy/internal/redistest"
)

// The same token tried twice: the first attempt's rollback reaches one
// master late, after the second attempt's SET, and deletes it there. Without
// the guard the second attempt is granted by a quorum that no longer holds
// the lock a moment later; with it, that master's vote does not count.
func TestSameTokenRetryAfterDelayedRollback(t *testing.T) {
	delayedRollbackCases(t, "guard", "no_guard_shows_the_hazard", sameTokenRetryAfterDelayedRollback)
}

// delayedRollbackCases runs f for each case of a delayed-rollback hazard
// test: one and two pipelines per master, with the guard on (the subtest
// named on) and off (named off), each on three new masters, the third
// behind delayedRollbackClient's relay.
func delayedRollbackCases(t *testing.T, on, off string, f func(t *testing.T, ms []*redistest.Server, c *Client, relay *redistest.Relay, guard bool)) {
	for _, pipelines := range []int{1, 2} {
		for _, guard := range []bool{true, false} {
			name := off
			if guard {
				name = on
			}
			t.Run(fmt.Sprintf("%s/%d_pipelines", name, pipelines), func(t *testing.T) {
				ms := redistest.StartN(t, 3)
				c, relay := delayedRollbackClient(t, ms, pipelines)
				f(t, ms, c, relay, guard)
			})
		}
	}
}

func sameTokenRetryAfterDelayedRollback(t *testing.T, ms []*redistest.Server, c *Client, relay *redistest.Relay, guard bool) {
	if !guard {
		WithGuardsOff(GuardTaint)(&c.opts)
	}
	ctx := context.Background()
	// Connections to every master, opened before the relay holds
	// anything (with two pipelines, one for the rollback and one for the
	// second attempt).
	for i := 0; i < 4; i++ {
		go c.Read(ctx, "warm")
	}
	time.Sleep(100 * time.Millisecond)
	c.Release(ctx, "warm", "x") // the masters know the release script
	time.Sleep(100 * time.Millisecond)
	m1 := ms[1].Client()
	defer m1.Close()
	m1.Set(ctx, "k", "other", 10*time.Second) // another holder on one master

	relay.Delay.Store(int64(400 * time.Millisecond))
	_, err := c.Acquire(ctx, "k", "tok", 5*time.Second)
	if !errors.Is(err, ErrNotAcquired) {
		t.Fatalf("first attempt: %v, want not acquired", err)
	}
	time.Sleep(50 * time.Millisecond) // its rollback is now held in the relay
	relay.Delay.Store(0)
	lock, err := c.Acquire(ctx, "k", "tok", 5*time.Second)
	time.Sleep(600 * time.Millisecond) // the delayed SET and DEL land
	held := holding(ctx, []*redistest.Server{ms[0], ms[2]}, "k", "tok")
	checkRetryAfterDelayedRollback(t, guard, lock != nil, err, held, c.Quorum())
}

// holding counts the servers where key holds value.
func holding(ctx context.Context, ms []*redistest.Server, key, value string) int {
	held := 0
	for _, m := range ms {
		mc := m.Client()
		if v, _ := mc.Get(ctx, key).Result(); v == value {
			held++
		}
		mc.Close()
	}
	return held
}

// checkRetryAfterDelayedRollback judges a second attempt made while the
// first one's rollback was held back, which then landed: with the guard it
// must not be granted; without, it is granted and then held on fewer than
// a quorum of masters (else the test staged nothing).
func checkRetryAfterDelayedRollback(t *testing.T, guard, granted bool, err error, held, quorum int) {
	t.Helper()
	if guard {
		if granted {
			t.Fatalf("granted with a vote whose rollback was in doubt; now held on %d masters", held)
		}
		return
	}
	if !granted {
		t.Fatalf("without the guard the second attempt should be granted: %v", err)
	}
	if held >= quorum {
		t.Fatal("the delayed rollback did not land: the test shows nothing")
	}
	t.Logf("granted, then held on %d master(s) while the client holds the lock: unsafe", held)
}

// delayedRollbackClient returns a client of ms[0], ms[1] and a relay in
// front of ms[2], with the given pipelines per master, for the tests in
// which the rollback of a first attempt with the token "tok", held in the
// relay, lands after a second attempt with the same token. With one
// pipeline (the default), the connection that timed out on the first
// attempt is replaced for the rollback, and again for the second attempt:
// only the commands that carry the token are held, so that the new
// connections' handshakes go through. With two, the rollback is held on one
// connection while the second attempt takes the other.
func delayedRollbackClient(t *testing.T, ms []*redistest.Server, pipelines int) (*Client, *redistest.Relay) {
	t.Helper()
	relay := redistest.NewRelay(t, ms[2].Addr)
	if pipelines == 1 {
		only := []byte("tok")
		relay.DelayOnly.Store(&only)
	}
	c, err := New([]string{ms[0].Addr, ms[1].Addr, relay.Addr()}, WithPipelines(pipelines),
		WithNodeTimeout(100*time.Millisecond), WithRetry(0, 0), WithRestartGuard(0), WithMarkDown(0, 0))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c, relay
}

// A master whose rollback of a token may still land (tainted for the key
// and token) does not count for the token's extend or release either: the
// rollback may delete its copy right after it answered. T holds k on
// masters 1 and 2; master 2 is tainted for T; master 0 says absent. The
// extend and the release cannot be decided (a QuorumError); with the taint
// not applied (the guard off) master 2's answer counts, and each reports
// done on a copy that may vanish.
func TestTaintWithholdsExtendAndRelease(t *testing.T) {
	for _, guard := range []bool{true, false} {
		name := map[bool]string{true: "on", false: "off_counts_the_tainted_master"}[guard]
		t.Run(name, func(t *testing.T) {
			ms := redistest.StartN(t, 3)
			opts := []Option{WithRestartGuard(0), WithRetry(0, 0)}
			if !guard {
				opts = append(opts, WithGuardsOff(GuardTaint))
			}
			c, err := New(redistest.Addrs(ms), opts...)
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			ctx := context.Background()
			for _, m := range ms[1:] {
				mc := m.Client()
				mc.Set(ctx, "k", "T", 10*time.Second)
				mc.Close()
			}
			c.nodes[2].taint(taintKey([]string{"k"}, "T"), 10*time.Second)
			_, extended, err := c.Extend(ctx, "k", "T", 10*time.Second, ExtendSet)
			r, rerr := c.Release(ctx, "k", "T")
			t.Logf("extend: %v %v; release: %+v %v", extended, err, r, rerr)
			if guard {
				if !isQuorumError(err) || !isQuorumError(rerr) {
					t.Fatalf("extend %v %v, release %v: want both undecided", extended, err, rerr)
				}
				return
			}
			if !extended || !r.Released(c.Quorum()) {
				t.Fatal("with the taint not applied, the extend and the release should count the tainted master")
			}
		})
	}
}
