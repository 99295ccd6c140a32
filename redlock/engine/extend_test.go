package engine

import (
	"context"
	"testing"
	"time"

	"github.com/redlock-proxy/redlock-proxy/internal/redistest"
)

// An extend that adds to what is left of a lock renews every master that
// holds it to the lock's remainder plus what is added, not to each
// master's own remainder plus it. Master 1 missed an earlier extend (its
// copy has 2 s left, the others 10 s: the lock lives 10 s more), and master
// 0 does not answer. Adding 5 s to each master's own remainder would leave
// master 1 with 7 s: with master 0's copy (10 s, never renewed), the lock
// would live 10 s, not the 15 s its holder reckons, and a second client
// would be granted it by masters 0 and 1 after 10 s.
func TestAdditiveExtendRenewsToTheLocksRemainder(t *testing.T) {
	ms := redistest.StartN(t, 3)
	relay := redistest.NewRelay(t, ms[0].Addr)
	c, err := New([]string{relay.Addr(), ms[1].Addr, ms[2].Addr}, WithRestartGuard(0), WithMarkDown(0, 0))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ctx := context.Background()
	pctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	c.Probe(pctx)
	for i, ttl := range []time.Duration{10 * time.Second, 2 * time.Second, 10 * time.Second} {
		mc := ms[i].Client()
		mc.Set(ctx, "k", "T", ttl)
		mc.Close()
	}
	relay.Delay.Store(int64(time.Second))
	_, ok, err := c.Extend(ctx, "k", "T", 5*time.Second, ExtendAdd)
	relay.Reset() // what master 0 was sent is lost
	relay.Delay.Store(0)
	if !ok || err != nil {
		t.Fatalf("extend: %v %v", ok, err)
	}
	for _, i := range []int{1, 2} {
		mc := ms[i].Client()
		p, _ := mc.PTTL(ctx, "k").Result()
		mc.Close()
		if p < 14*time.Second {
			t.Errorf("master %d's copy has %v left after adding 5 s to a lock with 10 s left", i, p)
		}
	}
}
