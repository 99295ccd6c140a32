package redlock

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/redlock-proxy/redlock-proxy/internal/redistest"
)

// The same token tried twice: the first attempt's rollback reaches one
// master late, after the second attempt's SET, and deletes it there. Without
// the guard the second attempt is granted by a quorum that no longer holds
// the lock a moment later; with it, that master's vote does not count.
func TestSameTokenRetryAfterDelayedRollback(t *testing.T) {
	for _, guard := range []bool{true, false} {
		t.Run(map[bool]string{true: "guard", false: "no_guard_shows_the_hazard"}[guard], func(t *testing.T) {
			ms := redistest.StartN(t, 3)
			relay := redistest.NewRelay(t, ms[2].Addr)
			// Two pipelines per master: the rollback is held in the relay on
			// one connection while the second attempt's command takes the
			// other, and overtakes it. With the default one, a rollback is
			// overtaken the same way once the connection that timed out is
			// replaced while the network still holds it; the relay cannot
			// stage that, as it would hold the new connection's handshake too.
			c, err := New([]string{ms[0].Addr, ms[1].Addr, relay.Addr()}, WithPipelines(2),
				WithNodeTimeout(100*time.Millisecond), WithRetry(0, 0), WithRestartGuard(0), WithMarkDown(0, 0))
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			c.opts.noTaint = !guard
			ctx := context.Background()
			// Idle pooled connections to every master, so that the rollback
			// and the second attempt each find one ready.
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
			_, err = c.Acquire(ctx, "k", "tok", 5*time.Second)
			if !errors.Is(err, ErrNotAcquired) {
				t.Fatalf("first attempt: %v, want not acquired", err)
			}
			time.Sleep(50 * time.Millisecond) // its rollback is now held in the relay
			relay.Delay.Store(0)
			lock, err := c.Acquire(ctx, "k", "tok", 5*time.Second)
			time.Sleep(600 * time.Millisecond) // the delayed SET and DEL land
			held := 0
			for _, m := range []*redistest.Server{ms[0], ms[2]} {
				mc := m.Client()
				if v, _ := mc.Get(ctx, "k").Result(); v == "tok" {
					held++
				}
				mc.Close()
			}
			if guard {
				if lock != nil {
					t.Fatalf("granted with a vote whose rollback was in doubt; now held on %d masters", held)
				}
				return
			}
			if lock == nil {
				t.Fatalf("without the guard the second attempt should be granted: %v", err)
			}
			if held >= c.Quorum() {
				t.Fatal("the delayed rollback did not land: the test shows nothing")
			}
			t.Logf("granted, then held on %d master(s) while the client holds the lock: unsafe", held)
		})
	}
}
