package engine

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/redlock-proxy/redlock-proxy/internal/redistest"
)

// durableClient starts three masters that persist every write, declares
// them a new deployment, and returns a client with the restart guard
// window w (checks every check interval; 0: the default second).
func durableClient(t *testing.T, w, check time.Duration, guardsOff ...Guard) ([]*redistest.Server, *Client) {
	t.Helper()
	ms := redistest.StartN(t, 3, redistest.Durable...)
	init, err := New(redistest.Addrs(ms), WithRestartGuard(w))
	if err != nil {
		t.Fatal(err)
	}
	if err := init.InitMasters(context.Background()); err != nil {
		t.Fatal(err)
	}
	init.Close()
	opts := []Option{WithRestartGuard(w), WithNodeTimeout(200 * time.Millisecond), WithRetry(0, 0), WithGuardsOff(guardsOff...)}
	if check > 0 {
		opts = append(opts, WithClockCheck(check, time.Second))
	}
	c, err := New(redistest.Addrs(ms), opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	if n := c.Probe(ctx); n != 3 { // connects: the client sees every master as it is now
		t.Fatalf("Probe reached %d masters", n)
	}
	if n := c.VotersAvailable(); n != 3 {
		t.Fatalf("%d of the new deployment's durable masters vote at once, want 3", n)
	}
	return ms, c
}

// lockOnTwo acquires key for A on every master, then deletes it from the
// third: A holds it on masters 0 and 1, a bare quorum.
func lockOnTwo(t *testing.T, ms []*redistest.Server, c *Client, key string) {
	t.Helper()
	ctx := context.Background()
	if _, err := c.Acquire(ctx, key, "A", time.Minute); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 2*time.Second, "A on every master", func() bool { return onMasters(ms, key, "A") == 3 })
	m2 := ms[2].Client()
	defer m2.Close()
	m2.Del(ctx, key)
}

// secondHolder asks for key for B until the client has seen master 1's new
// process, and reports whether B was granted it.
func secondHolder(t *testing.T, c *Client, key string) bool {
	t.Helper()
	ctx := context.Background()
	for deadline := time.Now().Add(3 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		l, err := c.Acquire(ctx, key, "B", time.Minute)
		if l != nil {
			return true
		}
		seen := c.Status()[1].Restarts > 0
		if seen && (errors.Is(err, ErrNotAcquired) || isQuorumError(err)) || time.Now().After(deadline) {
			return false
		}
	}
}

// A master that persists every write by its configuration comes back
// empty all the same when its data directory was an ephemeral volume. Its
// record is gone: it is guarded, and a second client is refused the lock
// held on it and one other master. Judged by its configuration (the
// evidence guard off), it votes at once and B is granted the lock.
func TestWipedDurableMasterIsGuarded(t *testing.T) {
	for _, guard := range []bool{true, false} {
		name := map[bool]string{true: "on", false: "off_grants_the_lock_twice"}[guard]
		t.Run(name, func(t *testing.T) {
			var off []Guard
			if !guard {
				off = []Guard{GuardDataEvidence}
			}
			ms, c := durableClient(t, time.Minute, 0, off...)
			lockOnTwo(t, ms, c, "k")
			ms[1].Wipe()
			granted := secondHolder(t, c, "k")
			st := c.Status()[1]
			t.Logf("B granted %v; master 1: restarts %d, guarded %v, durable %v", granted, st.Restarts, st.Guarded, st.Durable)
			if guard && (granted || !st.Guarded) {
				t.Fatal("a wiped master that persists every write voted at once")
			}
			if !guard && !granted {
				t.Fatal("with the guard off the wiped master should vote, and B be granted the lock")
			}
		})
	}
}

// AOF switched off at runtime (CONFIG SET appendonly no), a lock written,
// then the master crashes and comes back with the configuration file's
// "appendonly yes": it loads the AOF as it stood when AOF stopped, without
// the lock. The seq raised after the lock's write is behind what the
// client saw acknowledged: guarded. The periodic check is off here (a
// check interval of an hour), so that the seq after the batch is the only
// evidence; with it on, the check would also see AOF off.
func TestAOFOffAtRuntimeIsGuarded(t *testing.T) {
	for _, guard := range []bool{true, false} {
		name := map[bool]string{true: "on", false: "off_grants_the_lock_twice"}[guard]
		t.Run(name, func(t *testing.T) {
			var off []Guard
			if !guard {
				off = []Guard{GuardDataEvidence}
			}
			ms, c := durableClient(t, time.Minute, time.Hour, off...)
			ctx := context.Background()
			m1 := ms[1].Client()
			if err := m1.ConfigSet(ctx, "appendonly", "no").Err(); err != nil {
				t.Fatal(err)
			}
			m1.Close()
			lockOnTwo(t, ms, c, "k")
			ms[1].Restart()
			m1 = ms[1].Client()
			defer m1.Close()
			if v, _ := m1.Get(ctx, "k").Result(); v == "A" {
				t.Fatal("the lock survived the restart: the test shows nothing")
			}
			granted := secondHolder(t, c, "k")
			st := c.Status()[1]
			t.Logf("B granted %v; master 1: restarts %d, guarded %v, durable %v", granted, st.Restarts, st.Guarded, st.Durable)
			if guard && (granted || !st.Guarded) {
				t.Fatal("a master that lost writes after AOF was switched off voted at once")
			}
			if !guard && !granted {
				t.Fatal("with the guard off the master should vote, and B be granted the lock")
			}
			if guard {
				// A client that first sees it now has no seq of its own to
				// compare: the doubt marked in its record tells it.
				c2, err := New(redistest.Addrs(ms), WithRestartGuard(time.Minute))
				if err != nil {
					t.Fatal(err)
				}
				defer c2.Close()
				pctx, cancel := context.WithTimeout(ctx, 2*time.Second)
				defer cancel()
				c2.Probe(pctx)
				if !c2.Status()[1].Guarded {
					t.Fatal("a second client that first sees the master after its restart trusts it: the doubt did not reach it")
				}
			}
		})
	}
}

// A master that kept its data (AOF on, appendfsync always, nothing lost)
// votes at once after a restart, and still holds the lock.
func TestDurableRestartKeepsVoting(t *testing.T) {
	ms, c := durableClient(t, time.Minute, 0)
	lockOnTwo(t, ms, c, "k")
	ms[1].Restart()
	if secondHolder(t, c, "k") {
		t.Fatal("B was granted a lock A holds")
	}
	st := c.Status()[1]
	if st.Guarded || st.Restarts != 1 {
		t.Fatalf("master 1 after a restart that kept its data: guarded %v, restarts %d", st.Guarded, st.Restarts)
	}
	if onMasters(ms, "k", "A") != 2 {
		t.Fatal("the lock did not survive on the durable master")
	}
}

// FLUSHALL run on a master directly (not through the proxy) erases its
// locks while it keeps running: the periodic check sees its record change
// and guards it.
func TestFlushedInPlaceIsGuarded(t *testing.T) {
	ms, c := durableClient(t, time.Minute, 100*time.Millisecond)
	lockOnTwo(t, ms, c, "k")
	m1 := ms[1].Client()
	defer m1.Close()
	m1.FlushAll(context.Background())
	waitFor(t, 3*time.Second, "master 1 guarded", func() bool { return c.Status()[1].Guarded })
	if l, _ := c.Acquire(context.Background(), "k", "B", time.Minute); l != nil {
		t.Fatal("B was granted a lock A holds")
	}
}

// InitMasters refuses masters that hold keys.
func TestInitMastersRefusesUsedMasters(t *testing.T) {
	ms := redistest.StartN(t, 3)
	m := ms[2].Client()
	m.Set(context.Background(), "x", "1", 0)
	m.Close()
	c, err := New(redistest.Addrs(ms))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if err := c.InitMasters(context.Background()); err == nil {
		t.Fatal("a master with keys was declared a new deployment")
	}
	m = ms[0].Client()
	defer m.Close()
	if born, _ := m.HGet(context.Background(), DatasetKey, "born").Result(); born == NewDeployment {
		t.Fatal("a master was marked although another refused")
	}
}

// InitMasters declares a master given as a Redis Cluster shard by shard:
// before it, fresh durable shards are guarded for the window and no lock
// is granted; after it, a new client's first acquire on a key of each
// shard is.
func TestInitMastersClusterVoter(t *testing.T) {
	cl := redistest.StartCluster(t, 3, 0, redistest.Durable...)
	ms := redistest.StartN(t, 2, redistest.Durable...)
	addrs := []string{clusterAddr(cl), ms[0].Addr, ms[1].Addr}
	ctx := context.Background()
	keys := make([]string, len(cl.Nodes))
	for i, n := range cl.Nodes {
		for j := 0; keys[i] == ""; j++ {
			if k := "init:" + string(rune('a'+i)) + ":" + time.Duration(j).String(); cl.Owner(k) == n {
				keys[i] = k
			}
		}
	}
	opts := []Option{WithRestartGuard(time.Minute), WithNodeTimeout(time.Second), WithRetry(0, 0)}

	before, err := New(addrs, opts...)
	if err != nil {
		t.Fatal(err)
	}
	l, err := before.Acquire(ctx, keys[0], "A", 10*time.Second)
	before.Close()
	var qe *QuorumError
	if l != nil || !errors.As(err, &qe) {
		t.Fatalf("fresh masters, not declared: acquire gave %v, %v; want a QuorumError (guarded)", l, err)
	}

	init, err := New(addrs, opts...)
	if err != nil {
		t.Fatal(err)
	}
	if err := init.InitMasters(ctx); err != nil {
		t.Fatal(err)
	}
	init.Close()
	for _, n := range cl.Nodes {
		rc := n.Client()
		records, _ := rc.Keys(ctx, DatasetKey+"{*}").Result()
		found := false
		for _, r := range records {
			born, _ := rc.HGet(ctx, r, "born").Result()
			found = found || born == NewDeployment
		}
		rc.Close()
		if !found {
			t.Fatalf("shard %s: no record marked %s", n.Addr, NewDeployment)
		}
	}

	after, err := New(addrs, opts...)
	if err != nil {
		t.Fatal(err)
	}
	defer after.Close()
	for _, k := range keys {
		if l, err := after.Acquire(ctx, k, "B", 10*time.Second); err != nil || l == nil {
			t.Fatalf("declared masters: the first acquire of %s (shard %s): %v", k, cl.Owner(k).Addr, err)
		}
	}
}
