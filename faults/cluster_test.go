package faults

import (
	"context"
	"fmt"
	"maps"
	"math/rand"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redlock-proxy/redlock-proxy/internal/redistest"
	"github.com/redlock-proxy/redlock-proxy/redlock/engine"
)

// The randomized history with Redis Clusters as voters. Three voters, each
// a Redis Cluster of three shards (a primary each, and a replica each where
// the schedule fails shards over), every node persisting every write and
// behind a fault relay of its own whose address it announces
// (redistest.StartClusterBehindRelays): the proxies and the replicas reach
// a node through its relay, the cluster bus goes direct. Two proxies with
// a backend of their own (a voter given as a cluster cannot be the
// backend), lock keys lock:*, the same clients as the plain history
// (history_test.go), and a schedule drawn from the seed of faults per shard:
//
//   - shard-wipe: the writes to another voter k are held back for a short
//     random time (locks granted meanwhile are on voter i and the third
//     only), then a shard primary of voter i restarts with its data lost
//     (its RDB and AOF removed, its nodes.conf kept: the same node, the
//     same slots, empty), and k's held-back writes are dropped. The
//     shard's restart guard must keep it from voting on what it forgot;
//   - shard-restart: a shard primary restarts, keeping its data (AOF);
//   - shard-stall: a shard primary is frozen for up to 0.7 s;
//   - shard-failover: a shard's replication is held back (the relay
//     holds what the primary sends its replica, ReplDelay) and so are
//     the writes to another voter k; then the primary is killed, what the
//     replica had not received is dropped, and the replica takes the
//     shard over (CLUSTER FAILOVER TAKEOVER; no failover happens on its
//     own: cluster-replica-no-failover). It lacks the locks granted
//     meanwhile, which k lacks too: the promotion guard must keep it from
//     voting on them. The old primary then comes back with its data and
//     nodes.conf and becomes the new one's replica. The replica is older
//     than the guard window when it takes over;
//   - shard-failover-pause: the same with the old primary frozen, then
//     resumed (an old primary that comes back);
//   - reshard: the slots of one or two lock keys move to another shard of
//     their voter, step by step as redis-cli --cluster reshard moves
//     them (IMPORTING, MIGRATING, a pause in which clients meet ASK, the
//     keys MIGRATEd with their TTLs, SETSLOT NODE): the locks move with
//     their slot, and the restart guard follows a slot off a guarded shard;
//   - wipe-reshard: shard-wipe, and at once the slot of a lock key it
//     served moves to another shard (whose vote on it the guard must
//     withhold as the wiped shard's);
//   - proxy-restart.
//
// A restarted node keeps its nodes.conf: a node that loses it comes back
// a stranger to its cluster (a new node id, no slots), which is no fault
// of the voter but of its operator; what this tests is the data lost
// behind the same identity.
//
// The short form runs in CI (15 s of faults, after the clusters are made);
// the long one: bash scripts/faults.sh cluster 5m [seed] [weights].

// clusterSchedule is the cluster history's schedule.
var clusterSchedule = schedule{
	name: "cluster",
	faults: map[string]int{"shard-wipe": 3, "wipe-reshard": 1, "shard-restart": 1, "shard-stall": 2, "shard-failover": 2,
		"shard-failover-pause": 1, "reshard": 3, "proxy-restart": 1},
	ops:       map[string]int{"set-nx": 12, "native": 6, "lease": 4, "pipelined": 4, "redisson": 2},
	backend:   "own",
	lockKeys:  "lock:*",
	maxDenial: maxDenial,
}

// clusterWorld is a world whose voters are Redis Clusters.
type clusterWorld struct {
	*world
	clusters []*redistest.Cluster
}

func newClusterWorld(t *testing.T, sch schedule, seed int64) *clusterWorld {
	w := &world{t: t, sch: sch, seed: seed, h: newHistory(), backend: "own", lockKeys: "lock:*",
		// Hash tags: a fenced lock's counter (LOCK.ACQUIRE) and a hash lock's
		// attempt record (Redisson) share the lock's slot only so.
		keys: []string{"lock:{a}", "lock:{b}", "lock:{c}", "lock:{d}", "lock:{e}", "lock:{f}"}}
	cw := &clusterWorld{world: w}
	w.faulter = cw.fault
	replicas := 0
	if sch.faults["shard-failover"] > 0 || sch.faults["shard-failover-pause"] > 0 {
		replicas = 1
	}
	start := time.Now()
	args := append(slices.Clone(redistest.Durable), "--cluster-replica-no-failover", "yes")
	var seeds []string
	for range 3 {
		cl := redistest.StartClusterBehindRelays(t, 3, replicas, args...)
		cw.clusters = append(cw.clusters, cl)
		seeds = append(seeds, "cluster://"+strings.Join(cl.Addrs()[:2], ",")+"/")
	}
	w.own = redistest.Start(t)
	t.Logf("3 clusters of 3 shards, %d replica(s) per shard, made in %s; backend of its own, lock_keys [\"lock:*\"]", replicas, time.Since(start).Round(time.Millisecond))
	for _, k := range w.keys {
		t.Logf("key %s: slot %d", k, engine.KeySlot(k))
	}
	config := func(listen string) string {
		return fmt.Sprintf(`[proxy]
listen = %q
backend = %q
lock_keys = ["lock:*"]
lease_ttl = %q
lock_wait_poll = "100ms"
[redlock]
masters = [%s]
node_timeout = "100ms"
retry_count = 2
retry_delay = "30ms"
restart_guard = %v
restart_guard_window = %q
clock_check = "200ms"
[log]
level = %q
format = "json"
`, listen, w.own.Addr, leaseTTL, redistest.Quote(seeds), !sch.noRestartGuard, guardWindow, *historyLog)
	}
	var env []string
	bin := binary
	if off := knownGuards(t, sch.guardsOff); len(off) > 0 {
		bin = redistest.UnsafeProxy(t)
		env = append(env, "REDLOCK_PROXY_UNSAFE_GUARDS_OFF="+strings.Join(off, ","))
	}
	// The shards are not declared a new deployment (-init-masters): met for
	// the first time, they vote once they are older than the guard window.
	w.proxies = []*redistest.Proxy{
		redistest.StartProxy(t, bin, config, redistest.WithEnv(env...)),
		redistest.StartProxy(t, bin, config, redistest.WithEnv(env...)),
	}
	w.restarts = make([]atomic.Int64, len(w.proxies))
	for _, cl := range cw.clusters {
		for _, n := range cl.Nodes {
			olderThanWindow(n)
		}
	}
	return cw
}

// holdVoter holds back everything sent to voter k's nodes; the returned
// function drops it and lets the rest through.
func (cw *clusterWorld) holdVoter(k int) func() {
	for _, r := range cw.clusters[k].Relays {
		holdBack(r)
	}
	return func() {
		for _, r := range cw.clusters[k].Relays {
			letThrough(r)
		}
	}
}

// shards lists voter i's shards now (none, and an entry in the faults on an
// error).
func (cw *clusterWorld) shards(i int) []redistest.Shard {
	sh, err := cw.clusters[i].Shards()
	if err != nil || len(sh) == 0 {
		cw.h.fault("voter %d: its shards not known: %v", i, err)
		return nil
	}
	return sh
}

// fault plays one fault of the schedule.
func (cw *clusterWorld) fault(rng *rand.Rand, kind string) {
	w := cw.world
	i := rng.Intn(len(cw.clusters))
	k := (i + 1 + rng.Intn(len(cw.clusters)-1)) % len(cw.clusters)
	cl := cw.clusters[i]
	shards := cw.shards(i)
	if len(shards) == 0 {
		return
	}
	sh := shards[rng.Intn(len(shards))]
	s := slices.Index(cl.Nodes, sh.Primary)
	switch kind {
	case "shard-wipe":
		d := randDur(rng, 300*time.Millisecond, 900*time.Millisecond)
		w.h.fault("voter %d's writes held back for %s, then voter %d's shard primary %d (slots from %d) restarts with its data lost", k, d, i, s, sh.Lowest)
		release := cw.holdVoter(k)
		time.Sleep(d)
		sh.Primary.WipeData()
		release()
		w.h.fault("voter %d's shard primary %d is back, empty; voter %d's held-back writes dropped", i, s, k)
	case "wipe-reshard":
		// A lock key's shard loses its data, and at once the key's slot
		// moves to another shard: the restart guard must follow the slot.
		key := w.keys[rng.Intn(len(w.keys))]
		slot := engine.KeySlot(key)
		from := slices.IndexFunc(shards, func(s redistest.Shard) bool { return s.Serves(slot) })
		if from < 0 || len(shards) < 2 {
			w.h.fault("voter %d: no shard serves slot %d", i, slot)
			return
		}
		to := (from + 1 + rng.Intn(len(shards)-1)) % len(shards)
		fp, tp := shards[from].Primary, shards[to].Primary
		d := randDur(rng, 300*time.Millisecond, 900*time.Millisecond)
		w.h.fault("voter %d's writes held back for %s, then voter %d's shard primary %d (slot %d of %s) restarts with its data lost, and the slot moves to node %d",
			k, d, i, slices.Index(cl.Nodes, fp), slot, key, slices.Index(cl.Nodes, tp))
		release := cw.holdVoter(k)
		time.Sleep(d)
		fp.WipeData()
		release()
		moved, err := cl.MoveSlot(slot, fp, tp, randDur(rng, 0, 200*time.Millisecond))
		w.h.fault("voter %d: slot %d moved off the wiped shard primary: %d keys, %v", i, slot, moved, err)
	case "shard-restart":
		w.h.fault("voter %d's shard primary %d restarts, keeping its data", i, s)
		sh.Primary.Restart()
	case "shard-stall":
		d := randDur(rng, 150*time.Millisecond, 700*time.Millisecond)
		w.h.fault("voter %d's shard primary %d stalls for %s", i, s, d)
		sh.Primary.Stop()
		time.Sleep(d)
		sh.Primary.Cont()
	case "shard-failover", "shard-failover-pause":
		cw.failover(rng, i, k, sh, kind == "shard-failover-pause")
	case "reshard":
		cw.reshard(rng, i, shards)
	case "proxy-restart":
		p := rng.Intn(len(w.proxies))
		w.h.fault("proxy %d restarts", p)
		w.restartProxy(p)
	}
}

// failover hands voter i's shard sh over to its replica, which lacks the
// last locks its primary granted (pause: the old primary is frozen, not
// killed, and resumed after).
func (cw *clusterWorld) failover(rng *rand.Rand, i, k int, sh redistest.Shard, pause bool) {
	w, cl := cw.world, cw.clusters[i]
	if len(sh.Replicas) == 0 {
		w.h.fault("voter %d's shard (slots from %d) has no replica to fail over to", i, sh.Lowest)
		w.h.count("shard failover: no replica")
		return
	}
	old, replica := sh.Primary, sh.Replicas[0]
	p, r := slices.Index(cl.Nodes, old), slices.Index(cl.Nodes, replica)
	olderThanWindow(replica)
	d := randDur(rng, 300*time.Millisecond, 900*time.Millisecond)
	how := "killed"
	if pause {
		how = "frozen"
	}
	w.h.fault("voter %d's shard (slots from %d): node %d's replication and voter %d's writes held back for %s, then its primary (node %d) %s and its replica (node %d) takes over",
		i, sh.Lowest, p, k, d, p, how, r)
	link := cl.RelayOf(old)
	link.ReplDelay.Store(int64(30 * time.Second))
	release := cw.holdVoter(k)
	time.Sleep(d)
	if pause {
		old.Stop()
	} else {
		old.Kill()
	}
	link.ReplDelay.Store(0)
	link.Reset() // what the replica had not received is lost
	rc := replica.Client()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	err := rc.Do(ctx, "cluster", "failover", "takeover").Err()
	for err == nil && replica.InfoField("replication", "role") != "master" {
		if ctx.Err() != nil {
			err = fmt.Errorf("still a replica after 5s")
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	cancel()
	rc.Close()
	release()
	w.h.fault("voter %d's shard: node %d took over (%v); voter %d's held-back writes dropped", i, r, err, k)
	if pause {
		time.Sleep(randDur(rng, 300*time.Millisecond, 1500*time.Millisecond))
		old.Cont()
	} else {
		old.Restart() // its data and nodes.conf kept
	}
	// The old primary learns of the takeover and follows the new one.
	role := ""
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		if role = old.InfoField("replication", "role"); role == "slave" {
			break
		}
	}
	switch {
	case err != nil:
		w.h.count("shard failover: the takeover failed")
	case role != "slave":
		w.h.count("shard failover: the old primary not a replica within 10s")
	default:
		w.h.count("shard failover: the replica took over, the old primary follows it")
	}
	w.h.fault("voter %d's shard: the old primary (node %d) %s is back as %s", i, p, how, role)
}

// reshard moves the slots of one or two lock keys of voter i to another
// shard, while the clients lock.
func (cw *clusterWorld) reshard(rng *rand.Rand, i int, shards []redistest.Shard) {
	w, cl := cw.world, cw.clusters[i]
	if len(shards) < 2 {
		return
	}
	n := 1 + rng.Intn(2)
	for _, ki := range rng.Perm(len(w.keys))[:n] {
		key := w.keys[ki]
		slot := engine.KeySlot(key)
		from := slices.IndexFunc(shards, func(s redistest.Shard) bool { return s.Serves(slot) })
		if from < 0 {
			w.h.fault("voter %d: no shard serves slot %d", i, slot)
			continue
		}
		to := (from + 1 + rng.Intn(len(shards)-1)) % len(shards)
		pause := randDur(rng, 50*time.Millisecond, 500*time.Millisecond)
		fp, tp := shards[from].Primary, shards[to].Primary
		moved, err := cl.MoveSlot(slot, fp, tp, pause)
		w.h.fault("voter %d: slot %d (%s) moved from node %d to node %d, %d keys, a pause of %s: %v",
			i, slot, key, slices.Index(cl.Nodes, fp), slices.Index(cl.Nodes, tp), moved, pause, err)
		if err != nil {
			w.h.count("reshard: failed")
			continue
		}
		w.h.count("reshard: a slot moved")
		if moved > 0 {
			w.h.count("reshard: a slot moved with its lock")
		}
		shards[from].Ranges = nil // served by tp now
		shards[to].Ranges = append(shards[to].Ranges, [2]int{slot, slot})
	}
}

// TestHistoryCluster plays the cluster schedule (15 s of faults;
// -history.duration for longer) and fails on any two holders of a lock at
// once.
func TestHistoryCluster(t *testing.T) {
	if testing.Short() {
		t.Skip("history test skipped in -short mode")
	}
	d := *historyDuration
	if d == 0 {
		d = 15 * time.Second
	}
	sch := clusterSchedule
	if *historyFaults != "" {
		sch.faults = maps.Clone(sch.faults)
		for _, kw := range strings.Split(*historyFaults, ",") {
			k, v, _ := strings.Cut(kw, "=")
			n, err := strconv.Atoi(v)
			if _, ok := sch.faults[k]; !ok || err != nil || n < 0 {
				t.Fatalf("-history.faults: %q is not kind=weight of a fault of the cluster schedule", kw)
			}
			sch.faults[k] = n
		}
		t.Logf("fault weights: %v", sch.faults)
	}
	sd := seed(t)
	t.Logf("this one again: bash scripts/faults.sh cluster <duration> %d", sd)
	cw := newClusterWorld(t, sch, sd)
	v := cw.run(d, false)
	cw.report(v)
	for _, s := range v {
		t.Error("violation: " + s)
	}
	t.Logf("faults:\n  %s", strings.Join(cw.h.faults, "\n  "))
	if n := cw.h.held(); n < 50 {
		t.Fatalf("only %d locks held: the run proves nothing", n)
	}
}

// TestHistoryClusterControls: with the guard against each shard fault off,
// the cluster history must find two holders.
func TestHistoryClusterControls(t *testing.T) {
	if testing.Short() {
		t.Skip("history test skipped in -short mode")
	}
	base := map[string]int{"set-nx": 6, "native": 2, "lease": 2}
	for _, sch := range []schedule{
		// A shard primary restarts empty: its restart guard is all that
		// keeps it from granting again the locks it held with one other
		// voter. A cluster primary answers CLUSTERDOWN for its first 2 s
		// (Redis's own rejoin delay), longer than these clients' locks
		// live (maxLife): the locks here are extended beyond the guard
		// window, which nothing guards with the restart guard off; through
		// one proxy, whose guard knows those TTLs (as ttl_stretch_off): with
		// the guard on, none of them is granted twice.
		{name: "cluster_restart_guard_off", noRestartGuard: true, faults: map[string]int{"shard-wipe": 1},
			ops: map[string]int{"set-nx": 1}, longExtends: true, oneProxy: true},
		// A shard's replica, older than the window, takes over without the
		// last locks: the promotion guard keeps it from voting on them.
		// A slot moves off a shard that lost its data: its new owner
		// does not vote on it while the old owner is guarded.
		{name: "cluster_slot_follow_off", guardsOff: []string{"slot-follow"}, faults: map[string]int{"wipe-reshard": 1},
			ops: map[string]int{"set-nx": 1}, longExtends: true, oneProxy: true},
		{name: "cluster_promotion_off", guardsOff: []string{"promotion"}, faults: map[string]int{"shard-failover": 1}, ops: base},
	} {
		t.Run(sch.name, func(t *testing.T) {
			cw := newClusterWorld(t, sch, seed(t))
			v := cw.run(60*time.Second, true) // stops at the first violation
			cw.report(v)
			if len(v) == 0 {
				t.Fatal("no violation with the guard off: the checker or the schedule cannot catch what it prevents")
			}
			t.Logf("first violation: %s\nfaults:\n  %s", v[0], strings.Join(cw.h.faults, "\n  "))
		})
	}
}
