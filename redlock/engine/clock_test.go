package engine

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/redlock-proxy/redlock-proxy/internal/redistest"
)

// A master whose clock jumps forward drops its locks early, like a master
// that restarted empty: A holds a lock on two of three masters, one of them
// expires it early, and B asks for it. With the clock check that master is
// guarded and B is refused; without it B is granted a lock A still holds.
//
// Debian's redis-server cannot be run under a faked clock here (libfaketime
// recurses in its allocator), so the jump is made on this side: the master's
// TIME replies are shifted as the jumped clock would shift them, and the key
// is deleted from it, which is what its expiry does at that moment.
func TestClockJumpForward(t *testing.T) {
	for _, check := range []bool{true, false} {
		t.Run(map[bool]string{true: "check", false: "no_check_shows_the_hazard"}[check], func(t *testing.T) {
			ms := redistest.StartN(t, 3)
			window := 2 * time.Second
			opts := []Option{WithRestartGuard(window), WithRetry(0, 0), WithClockCheck(50*time.Millisecond, 200*time.Millisecond)}
			if !check {
				opts[2] = WithClockCheck(0, 0)
			}
			c, err := New([]string{ms[0].Addr, ms[1].Addr, ms[2].Addr}, opts...)
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			ctx := context.Background()
			c.Probe(ctx)
			waitFor(t, 2*window, "the young masters' guard to pass", func() bool { return c.VotersAvailable() == 3 })

			if _, err := c.Acquire(ctx, "k", "A", 60*time.Second); err != nil {
				t.Fatal(err)
			}
			waitFor(t, time.Second, "A on every master", func() bool { return onMasters(ms, "k", "A") == 3 })
			m2 := ms[2].Client()
			m2.Del(ctx, "k") // A holds m0 and m1
			m2.Close()

			c.nodes[0].clockSkew.Store(int64(61 * time.Second)) // m0's clock jumps past A's expiry
			m0 := ms[0].Client()
			m0.Del(ctx, "k") // and m0 expires A's lock
			m0.Close()
			time.Sleep(300 * time.Millisecond) // a few clock checks

			_, err = c.Acquire(ctx, "k", "B", 60*time.Second)
			st := c.Status()[0]
			if check {
				if err == nil {
					t.Fatal("B was granted a lock that A still holds")
				}
				if !errors.Is(err, ErrNotAcquired) && !isQuorumError(err) {
					t.Fatalf("B: %v", err)
				}
				if !st.Guarded || st.ClockJumps != 1 {
					t.Fatalf("m0 after its clock jumped: %+v", st)
				}
			} else if err != nil {
				t.Fatalf("without the check B should (unsafely) win; got %v", err)
			}
		})
	}
}

// Clocks that only drift by less than the allowed jump are left alone.
func TestClockCheckQuiet(t *testing.T) {
	ms := redistest.StartN(t, 3)
	c, err := New([]string{ms[0].Addr, ms[1].Addr, ms[2].Addr}, WithRestartGuard(time.Millisecond), WithClockCheck(20*time.Millisecond, 200*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.nodes[1].clockSkew.Store(int64(50 * time.Millisecond))
	time.Sleep(300 * time.Millisecond)
	for _, st := range c.Status() {
		if st.ClockJumps != 0 {
			t.Fatalf("%s: %d clock jumps on an undisturbed clock", st.Addr, st.ClockJumps)
		}
	}
}

func isQuorumError(err error) bool {
	var qe *QuorumError
	return errors.As(err, &qe)
}

func onMasters(ms []*redistest.Server, key, val string) int {
	n := 0
	for _, m := range ms {
		c := m.Client()
		if v, _ := c.Get(context.Background(), key).Result(); v == val {
			n++
		}
		c.Close()
	}
	return n
}

func waitFor(t *testing.T, d time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("waited %s for %s", d, what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
