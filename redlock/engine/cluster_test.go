package engine

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redlock-proxy/redlock-proxy/internal/redistest"
)

func TestParseClusterAddr(t *testing.T) {
	for _, tc := range []struct {
		in    string
		seeds []string
		bad   string
	}{
		{in: "cluster://h1:7000,h2:7001/", seeds: []string{"h1:7000", "h2:7001"}},
		{in: "cluster://127.0.0.1:7000", seeds: []string{"127.0.0.1:7000"}},
		{in: "cluster://[::1]:7000/", seeds: []string{"[::1]:7000"}},
		{in: "cluster:///", bad: "no seed node"},
		{in: "cluster://h1/", bad: "not host:port"},
		{in: "cluster://h1:0/", bad: "no valid port"},
		{in: "cluster://h1:1,h1:1/", bad: "listed twice"},
		{in: "cluster://h1:1/name", bad: "nothing may follow"},
		{in: "cluster://u:p@h1:1/", bad: "credentials"},
	} {
		a, err := ParseClusterAddr(tc.in)
		switch {
		case tc.bad != "" && (err == nil || !strings.Contains(err.Error(), tc.bad)):
			t.Errorf("%s: %v, want an error about %q", tc.in, err, tc.bad)
		case tc.bad == "" && (err != nil || fmt.Sprint(a.Seeds) != fmt.Sprint(tc.seeds)):
			t.Errorf("%s: %v %v, want %v", tc.in, a.Seeds, err, tc.seeds)
		}
	}
	if _, err := New([]string{"cluster://h1/", "a:1", "b:1"}); err == nil {
		t.Fatal("New took a malformed cluster address")
	}
}

func TestKeySlot(t *testing.T) {
	// Values from Redis's CLUSTER KEYSLOT.
	for k, want := range map[string]int{"foo": 12182, "{user1000}.following": 3443, "user1000": 3443, "a{}b": 13694, "{}": 15257, "x{y}z{w}": KeySlot("y")} {
		if got := KeySlot(k); got != want {
			t.Errorf("KeySlot(%q) = %d, want %d", k, got, want)
		}
	}
	for s := 0; s < numSlots; s++ {
		if got := KeySlot("{" + tagOf(s) + "}"); got != s {
			t.Fatalf("tag %q of slot %d hashes to %d", tagOf(s), s, got)
		}
	}
	if KeySlot(FenceKeys("{t}lock")[1]) != KeySlot("{t}lock") || KeySlot(FenceKeys("{t}lock")[2]) != KeySlot("{t}lock") {
		t.Fatal("a fenced lock's counter and state are not in its slot")
	}
}

// clusterAddr is a cluster voter's address for cl, two of its nodes as seeds.
func clusterAddr(cl *redistest.Cluster) string {
	return "cluster://" + cl.Nodes[0].Addr + "," + cl.Nodes[1].Addr + "/"
}

// onlyOwnerHolds fails unless key holds value on the shard of cl that owns
// it and on no other shard, within 5 s: an operation answers once a quorum
// has, and the last voter's write may land just after.
func onlyOwnerHolds(t *testing.T, cl *redistest.Cluster, key, value string) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for {
		wrong := ownerHolds(cl, key, value)
		if wrong == "" {
			return
		}
		if time.Now().After(deadline) {
			t.Fatal(wrong)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// ownerHolds is onlyOwnerHolds once: what is wrong, or "".
func ownerHolds(cl *redistest.Cluster, key, value string) string {
	owner := cl.Owner(key)
	for _, s := range cl.Nodes {
		rc := s.Client()
		v, _ := rc.Do(context.Background(), "get", key).Text() // MOVED elsewhere
		rc.Close()
		switch {
		case s == owner && v != value:
			return fmt.Sprintf("the owner %s of %q holds %q, want %q", s.Addr, key, v, value)
		case s != owner && v != "":
			return fmt.Sprintf("%s, not the owner of %q, holds %q", s.Addr, key, v)
		}
	}
	return ""
}

// Three voters, each a three-shard cluster: locks taken, extended and
// released on many keys land on the shard that owns each key in every
// voter; multi-key and fenced operations work on keys of one slot and are
// refused, before anything is sent, across slots.
func TestClusterVoterRoutes(t *testing.T) {
	var cls []*redistest.Cluster
	var addrs []string
	for i := 0; i < 3; i++ {
		cl := redistest.StartCluster(t, 3, 0)
		cls = append(cls, cl)
		addrs = append(addrs, clusterAddr(cl))
	}
	c, err := New(addrs, WithRestartGuard(0), WithNodeTimeout(time.Second), WithRetry(0, 0))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ctx := context.Background()
	const n = 60
	keys := make([]string, n)
	for i := range keys {
		keys[i] = fmt.Sprintf("lock:%d", i)
		if l, err := c.Acquire(ctx, keys[i], "v", 10*time.Second); err != nil || l == nil {
			t.Fatalf("acquire %s: %v", keys[i], err)
		}
	}
	for _, k := range keys {
		for _, cl := range cls {
			onlyOwnerHolds(t, cl, k, "v")
		}
		if _, ok, err := c.Extend(ctx, k, "v", 30*time.Second, ExtendSet); !ok || err != nil {
			t.Fatalf("extend %s: %v", k, err)
		}
		for _, cl := range cls {
			rc := cl.Owner(k).Client()
			// The extend answers once a quorum has: the last voter's
			// may land just after.
			waitFor(t, 5*time.Second, "the extend of "+k+" on every voter", func() bool {
				pttl, _ := rc.PTTL(ctx, k).Result()
				return pttl >= 20*time.Second
			})
			rc.Close()
		}
	}
	for _, k := range keys {
		if r, err := c.Release(ctx, k, "v"); err != nil || !r.Released(c.Quorum()) {
			t.Fatalf("release %s: %+v %v", k, r, err)
		}
		for _, cl := range cls {
			onlyOwnerHolds(t, cl, k, "")
		}
	}
	for i, st := range c.Status() {
		if st.Cluster == nil || len(st.Cluster.Shards) != 3 || !st.Up {
			t.Fatalf("voter %d: %+v, want a cluster of 3 shards, up", i, st)
		}
		slots := 0
		for _, s := range st.Cluster.Shards {
			slots += s.Slots
			if s.Commands == 0 {
				t.Fatalf("voter %d: shard %s carried no command", i, s.Addr)
			}
		}
		if slots != numSlots {
			t.Fatalf("voter %d: the shards own %d slots", i, slots)
		}
	}

	// One slot: multi-key and fenced locks work.
	tagged := []string{"{order:7}a", "{order:7}b", "{order:7}c"}
	if r, err := c.AcquireAll(ctx, tagged, "m", 10*time.Second); err != nil || r.Lock == nil {
		t.Fatalf("AcquireAll of one slot: %+v %v", r, err)
	}
	if _, ok, err := c.ExtendAll(ctx, tagged, "m", 20*time.Second); !ok || err != nil {
		t.Fatalf("ExtendAll of one slot: %v", err)
	}
	if k, err := c.ReleaseAll(ctx, tagged, "m"); k != 3 || err != nil {
		t.Fatalf("ReleaseAll of one slot: %d %v", k, err)
	}
	fr, err := c.AcquireFenced(ctx, "{acct}lock", "f", 10*time.Second, false)
	if err != nil || fr.Grant == nil {
		t.Fatalf("a fenced lock on a hash-tagged key: %+v %v", fr, err)
	}
	for _, cl := range cls {
		rc := cl.Owner("{acct}lock").Client()
		v, _ := rc.Get(ctx, FenceKeys("{acct}lock")[1]).Int64()
		rc.Close()
		if v < fr.Grant.Fence {
			t.Fatalf("the fence counter beside the lock on its owner is %d, want %d", v, fr.Grant.Fence)
		}
	}
	if _, err := c.ReleaseFenced(ctx, "{acct}lock", "f"); err != nil {
		t.Fatal(err)
	}

	// Across slots: refused before anything is sent.
	cross := []string{"lock:a", "lock:b"}
	if KeySlot(cross[0]) == KeySlot(cross[1]) {
		t.Fatal("the keys share a slot")
	}
	sent := c.Status()[0].Commands
	if _, err := c.AcquireAll(ctx, cross, "x", time.Second); !errors.Is(err, ErrCrossSlot) {
		t.Fatalf("AcquireAll across slots: %v, want ErrCrossSlot", err)
	}
	if _, _, err := c.ExtendAll(ctx, cross, "x", time.Second); !errors.Is(err, ErrCrossSlot) {
		t.Fatalf("ExtendAll across slots: %v", err)
	}
	if _, err := c.ReleaseAll(ctx, cross, "x"); !errors.Is(err, ErrCrossSlot) {
		t.Fatalf("ReleaseAll across slots: %v", err)
	}
	if _, err := c.AcquireFenced(ctx, "plain", "x", time.Second, false); !errors.Is(err, ErrCrossSlot) {
		t.Fatalf("a fenced lock on a key without a hash tag: %v, want ErrCrossSlot", err)
	}
	if got := c.Status()[0].Commands; got != sent {
		t.Fatalf("refused operations sent %d commands", got-sent)
	}
}

// A reshard of a cluster voter while locks are held and taken: every
// held lock stays held (extends and a final check on the new owner), no
// MOVED or ASK surfaces as an error (the quorum is all three voters, so a
// redirect answered as an error would fail the operation), and no key is
// granted to a second client.
func TestClusterVoterReshard(t *testing.T) {
	cl := redistest.StartCluster(t, 3, 0)
	ms := redistest.StartN(t, 2)
	addrs := []string{clusterAddr(cl), ms[0].Addr, ms[1].Addr}
	mk := func() *Client {
		c, err := New(addrs, WithQuorum(3), WithRestartGuard(0), WithNodeTimeout(2*time.Second), WithRetry(0, 0))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		return c
	}
	x, y := mk(), mk()
	ctx := context.Background()
	from, to := cl.Nodes[0], cl.Nodes[1] // the first shard's slots: 0…5460
	var held []string
	for i := 0; len(held) < 40; i++ {
		k := fmt.Sprintf("held:%d", i)
		if cl.Owner(k) != from {
			continue
		}
		if l, err := x.Acquire(ctx, k, "x", time.Minute); err != nil || l == nil {
			t.Fatalf("acquire %s: %v", k, err)
		}
		held = append(held, k)
	}
	var stop atomic.Bool
	var wg sync.WaitGroup
	var errs sync.Map
	var ops, refused atomic.Int64
	fail := func(what string, err error) { errs.LoadOrStore(what, err) }
	wg.Add(3)
	go func() { // X renews what it holds
		defer wg.Done()
		for !stop.Load() {
			for _, k := range held {
				if _, ok, err := x.Extend(ctx, k, "x", time.Minute, ExtendSet); !ok || err != nil {
					fail("extend "+k, fmt.Errorf("ok=%v: %v", ok, err))
				}
				ops.Add(1)
			}
		}
	}()
	go func() { // Y tries to take what X holds
		defer wg.Done()
		for !stop.Load() {
			for _, k := range held {
				l, err := y.Acquire(ctx, k, "y", time.Minute)
				switch {
				case l != nil:
					fail("double grant "+k, errors.New("Y was granted a lock X holds"))
				case !errors.Is(err, ErrNotAcquired):
					fail("Y acquire "+k, err)
				}
				refused.Add(1)
			}
		}
	}()
	go func() { // Y takes, renews and gives back keys of its own
		defer wg.Done()
		for i := 0; !stop.Load(); i++ {
			k := fmt.Sprintf("churn:%d", i)
			if l, err := y.Acquire(ctx, k, "y", time.Minute); err != nil || l == nil {
				fail("acquire "+k, err)
				continue
			}
			if _, ok, err := y.Extend(ctx, k, "y", time.Minute, ExtendSet); !ok || err != nil {
				fail("extend "+k, fmt.Errorf("ok=%v: %v", ok, err))
			}
			if r, err := y.Release(ctx, k, "y"); err != nil || !r.Released(y.Quorum()) {
				fail("release "+k, fmt.Errorf("%+v: %v", r, err))
			}
			ops.Add(3)
		}
	}()
	time.Sleep(200 * time.Millisecond)
	cl.Reshard(from, to, 2000)
	time.Sleep(300 * time.Millisecond)
	stop.Store(true)
	wg.Wait()
	errs.Range(func(k, v any) bool {
		t.Errorf("%s: %v", k, v)
		return true
	})
	moved := 0
	for _, k := range held {
		if cl.Owner(k) == to {
			moved++
		}
		onlyOwnerHolds(t, cl, k, "x")
	}
	var redirects int64
	for _, c := range []*Client{x, y} {
		cs := c.Status()[0].Cluster
		redirects += cs.Moved + cs.Asked
	}
	t.Logf("%d operations, %d refusals of held keys; %d of %d held keys moved shard; %d redirects followed", ops.Load(), refused.Load(), moved, len(held), redirects)
	if moved == 0 || redirects == 0 {
		t.Fatalf("the reshard moved %d held keys and caused %d redirects: the test shows nothing", moved, redirects)
	}
}

// A shard that restarts with its data lost is guarded on its own slots
// only: the cluster voter still votes on keys of its other shards. With
// the restart guard off, the lock the lost shard held is granted again: two
// holders.
func TestClusterShardRestartGuard(t *testing.T) {
	// w is the guard's window and X's lock's TTL: long enough that the
	// restart and the waits for it end while X still holds the lock, on a
	// loaded machine too (3 s was not: Y's grant then came after X's
	// lock had ended, rightly).
	const w = 8 * time.Second
	cl := redistest.StartCluster(t, 3, 0)
	ms := redistest.StartN(t, 2)
	olderThan(t, w, append(ms, cl.Nodes...)...)
	addrs := []string{clusterAddr(cl), ms[0].Addr, ms[1].Addr}
	ctx := context.Background()
	lost := cl.Nodes[0]
	keyOn := func(s *redistest.Server, prefix string) string {
		for i := 0; ; i++ {
			if k := fmt.Sprintf("%s:%d", prefix, i); cl.Owner(k) == s {
				return k
			}
		}
	}
	// seen waits until c's connection to the lost shard found its new
	// process.
	seen := func(c *Client, key, run string) {
		waitFor(t, 5*time.Second, "the restart seen", func() bool {
			c.Broadcast(ctx, key, nil, "exists", key)
			for _, s := range c.Status()[0].Cluster.Shards {
				if s.Addr == lost.Addr {
					return s.RunID == run
				}
			}
			return false
		})
	}
	// scene: X takes key on the cluster and the first plain master only
	// (the second one's copy is deleted, as a write that never landed
	// there), then the shard that owns it restarts empty.
	scene := func(x *Client, key string) string {
		if l, err := x.Acquire(ctx, key, "x", w); err != nil || l == nil {
			t.Fatalf("X's acquire of %s: %v", key, err)
		}
		x.WaitWrites(ctx, key) // the acquire's last write landed: the delete comes after it
		rc := ms[1].Client()
		rc.Del(ctx, key)
		rc.Close()
		lost.Restart()
		waitFor(t, 10*time.Second, "the restarted shard back in the cluster", func() bool {
			rc := lost.Client()
			defer rc.Close()
			info, _ := rc.ClusterInfo(ctx).Result()
			return strings.Contains(info, "cluster_state:ok")
		})
		return lost.InfoField("server", "run_id")
	}

	t.Run("guard=on", func(t *testing.T) {
		x, y := newFailoverClient(t, addrs, w), newFailoverClient(t, addrs, w)
		other := keyOn(cl.Nodes[1], "other")
		for _, c := range []*Client{x, y} {
			c.Broadcast(ctx, other, nil, "exists", other)
		}
		key := keyOn(lost, "lock")
		start := time.Now()
		run := scene(x, key)
		seen(y, key, run)
		if l, err := y.Acquire(ctx, key, "y", w); l != nil {
			if took := time.Since(start); took >= w {
				t.Fatalf("inconclusive: the restart and the waits took %v, past X's lock of %v", took, w)
			}
			t.Fatalf("Y was granted the lock X holds, on the restarted shard's slot")
		} else {
			t.Logf("Y's acquire of the key X holds: %v", err)
		}
		for _, s := range y.Status()[0].Cluster.Shards {
			if (s.Addr == lost.Addr) != s.Guarded {
				t.Fatalf("shard %s guarded=%v: only the restarted shard %s should be", s.Addr, s.Guarded, lost.Addr)
			}
		}
		// The cluster's vote counts on a key of another shard, not on the
		// restarted shard's key.
		for k, want := range map[string]bool{other: true, key: false} {
			rs := y.Broadcast(ctx, k, nil, "exists", k)
			for _, r := range rs {
				if r.Addr == addrs[0] && r.Counts != want {
					t.Fatalf("the cluster's vote on %s counts=%v, want %v", k, r.Counts, want)
				}
			}
		}
		if n := y.votersAvailable([]string{other}); n != 3 {
			t.Fatalf("%d voters on a key of a shard that did not restart, want 3", n)
		}
		if n := y.votersAvailable([]string{key}); n != 2 {
			t.Fatalf("%d voters on the restarted shard's key, want 2", n)
		}
		if l, err := y.Acquire(ctx, keyOn(cl.Nodes[2], "fresh"), "y", w); err != nil || l == nil {
			t.Fatalf("a key of a shard that did not restart: %v", err)
		}
	})

	t.Run("guard=off", func(t *testing.T) {
		mk := func() *Client {
			c, err := New(addrs, WithRestartGuard(0), WithNodeTimeout(300*time.Millisecond), WithRetry(0, 0))
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { c.Close() })
			return c
		}
		x, y := mk(), mk()
		key := keyOn(lost, "lock2")
		y.Broadcast(ctx, key, nil, "exists", key)
		run := scene(x, key)
		seen(y, key, run)
		l, err := y.Acquire(ctx, key, "y", w)
		if l == nil {
			for _, r := range y.Broadcast(ctx, key, nil, "get", key) {
				t.Logf("%s: %v %v", r.Addr, r.Val, r.Err)
			}
			rc := lost.Client()
			v, gerr := rc.Get(ctx, key).Result()
			rc.Close()
			t.Logf("on the lost shard directly: %q %v; owner %s, lost %s", v, gerr, cl.Owner(key).Addr, lost.Addr)
			t.Fatalf("guard off: Y was not granted the lock (%v); the control shows nothing", err)
		}
		if _, ok, err := x.Extend(ctx, key, "x", w, ExtendSet); err != nil {
			t.Fatal(err)
		} else {
			t.Logf("guard off: X and Y both were granted %s (X's extend now: ok=%v), as the guard prevents", key, ok)
		}
	})
}

// keyIn returns a key of slot s.
func keyIn(s int, prefix string) string {
	for i := 0; ; i++ {
		if k := fmt.Sprintf("%s:%d", prefix, i); KeySlot(k) == s {
			return k
		}
	}
}

// When a slot leaves a guarded shard, the guard follows it to its new
// owner, on that slot only: the window, and the keys of that slot the old
// owner did not vote on.
func TestClusterGuardFollowsSlot(t *testing.T) {
	c, err := New([]string{"cluster://127.0.0.1:1/", "127.0.0.1:2", "127.0.0.1:3"}, WithRestartGuard(time.Minute))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	v := c.nodes[0]
	cv := v.cluster
	a, b := cv.shardAt("127.0.0.1:10", 0), cv.shardAt("127.0.0.1:11", 100)
	const moved, kept, other = 5, 7, 100
	for s, n := range map[int]*node{moved: a, kept: a, other: b} {
		cv.setOwner(s, n)
	}
	cv.readyMu.Do(func() { close(cv.ready) })
	now := time.Now()
	long := keyIn(moved, "long")
	a.mu.Lock()
	a.guardUntil = now.Add(10 * time.Second)
	a.keyGuard = map[string]time.Time{long: now.Add(time.Hour), keyIn(kept, "long"): now.Add(time.Hour)}
	a.mu.Unlock()

	cv.setOwner(moved, b) // as a MOVED or a map read finds it
	at := now.Add(time.Second)
	for key, want := range map[string]bool{keyIn(moved, "k"): true, keyIn(other, "k"): false} {
		if _, _, got := v.guardOn(at, []string{key}); got != want {
			t.Errorf("the new owner's vote on %s (slot %d) guarded=%v, want %v", key, KeySlot(key), got, want)
		}
	}
	late := now.Add(20 * time.Second) // the old owner's window is over
	if _, g, ok := v.guardOn(late, []string{long}); !ok || g.key != long {
		t.Errorf("after the window, the moved slot's long-TTL key: guarded=%v %+v, want guarded on the key", ok, g)
	}
	if _, _, ok := v.guardOn(late, []string{keyIn(moved, "k")}); ok {
		t.Error("after the window, another key of the moved slot is still guarded")
	}
	b.mu.Lock()
	_, copied := b.keyGuard[keyIn(kept, "long")]
	b.mu.Unlock()
	if copied {
		t.Error("the key guard of a slot that did not move went to the new owner")
	}
}

// With the slot-follow guard off, the new owner of a slot that left a
// guarded shard votes on it at once.
func TestClusterGuardFollowsSlotOff(t *testing.T) {
	c, err := New([]string{"cluster://127.0.0.1:1/", "127.0.0.1:2", "127.0.0.1:3"}, WithRestartGuard(time.Minute), WithGuardsOff(GuardSlotFollow))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	v := c.nodes[0]
	cv := v.cluster
	a, b := cv.shardAt("127.0.0.1:10", 0), cv.shardAt("127.0.0.1:11", 100)
	const moved = 5
	cv.setOwner(moved, a)
	cv.readyMu.Do(func() { close(cv.ready) })
	now := time.Now()
	a.mu.Lock()
	a.guardUntil = now.Add(10 * time.Second)
	a.mu.Unlock()
	cv.setOwner(moved, b)
	if _, _, got := v.guardOn(now.Add(time.Second), []string{keyIn(moved, "k")}); got {
		t.Error("the new owner's vote is guarded with the slot-follow guard off")
	}
}
