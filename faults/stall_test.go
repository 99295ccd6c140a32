package faults

import (
	"context"
	"testing"
	"time"
)

// Every master stalls past the node timeout (as masters that fsync every
// write do after a burst of disk activity): a SET NX through the proxy
// fails, its votes land late on the masters, and its rollbacks cannot be
// sent (their connections cannot be opened in time). Once the masters
// answer again, the rollbacks are sent again and the key is free well
// before its TTL; without them it would stay locked for the whole TTL by
// a client that was told it does not hold it.
func TestStalledMastersLeaveNoLockBehind(t *testing.T) {
	ms, relays, addrs := mastersBehindRelays(t, 3)
	p := startProxy(t, addrs, false)
	c := p.Client()
	defer c.Close()
	ctx := context.Background()
	// The masters know the unlock script and every connection is open.
	if err := c.Set(ctx, "warm", "w", time.Second).Err(); err != nil {
		t.Fatal(err)
	}
	c.Eval(ctx, `if redis.call("get",KEYS[1]) == ARGV[1] then return redis.call("del",KEYS[1]) else return 0 end`, []string{"warm"}, "w")

	for _, r := range relays {
		r.Delay.Store(int64(300 * time.Millisecond))
	}
	ok, err := c.SetNX(ctx, "k", "t1", 10*time.Second).Result()
	if ok {
		t.Fatal("SET NX granted with every master stalled past the node timeout")
	}
	t.Logf("SET NX with the masters stalled: %v", err)
	time.Sleep(500 * time.Millisecond)
	held := 0
	for _, m := range ms {
		mc := m.Client()
		if v, _ := mc.Get(ctx, "k").Result(); v == "t1" {
			held++
		}
		mc.Close()
	}
	if held < 2 {
		t.Fatalf("the late votes landed on %d masters, not a quorum: the test shows nothing", held)
	}
	for _, r := range relays {
		r.Delay.Store(0)
	}
	start := time.Now()
	for {
		ok, err := c.SetNX(ctx, "k", "t2", 10*time.Second).Result()
		if ok {
			t.Logf("key free %v after the masters answered again (its TTL is 10 s; held by t1 on %d masters before)", time.Since(start).Round(time.Millisecond), held)
			return
		}
		if time.Since(start) > 4*time.Second {
			t.Fatalf("key still locked 4 s after the masters answered again (last SET NX: %v, %v): the refused SET NX's votes were not rolled back", ok, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}
