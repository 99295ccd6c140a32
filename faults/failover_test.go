package faults

import (
	"context"
	"fmt"
	"math/rand"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/redlock-proxy/redlock-proxy/internal/redistest"
)

// Voters that fail over, and voters that evict, in the history.
//
// Every voter has a replica (persisting every write, as the masters do),
// in both configurations: with a voting backend, master 0's failover is a
// failover of the backend too, behind the one address the proxies know,
// and the data client holds none of its data across it (losing), as
// across a wipe. Each replica follows its primary through a relay of its
// own (w.links), which can hold the replication stream back and drop it:
// the last writes of a primary that crashes are not on its replica.
//
// The faults:
//   - failover: the replication of voter i is held back for a short
//     random time, and so are the writes to another voter k (as
//     split-flush does): locks granted meanwhile are on i and the third
//     voter only, and not on i's replica. Then i's primary is killed, the
//     held-back stream dropped, the replica promoted (REPLICAOF NO ONE)
//     and the voter's address (w.relays[i], through which the proxies
//     connect) moved to it; k's held-back writes are dropped. A new
//     replica of the new primary is started for the next failover. The
//     replica is older than the guard window when it is promoted, so its
//     age alone does not guard it.
//   - failover-pause: the same, with the primary frozen (SIGSTOP) instead
//     of killed; a moment after the promotion it resumes and becomes the
//     new primary's replica: an old primary that comes back.
//   - evict: voter i (not master 0 with a voting backend, where the data
//     client's keys with a TTL would be evicted with the locks), after
//     another voter's writes were held back for a short random time, gets
//     a maxmemory just above what it uses and maxmemory-policy
//     volatile-ttl, and is written filler until it evicts a key with a
//     TTL (the locks are the keys with TTLs); then maxmemory 0 and
//     noeviction are restored and the filler deleted. Meanwhile what the
//     proxies send it is held back, and then dropped with their
//     connections: an eviction between two of a proxy's checks is not
//     known to it yet (docs/safety.md, "Voters that evict"; the history
//     reached that gap when the evicting voter stayed reachable), and
//     this fault tests the guard, from the check that reads the eviction
//     on (each new connection's, here).

// replicaOf makes s a replica of primary, through a new relay, and waits
// until it is in sync: the replica of voter i from now on.
func (w *world) replicaOf(i int, s, primary *redistest.Server) error {
	link := redistest.NewRelay(w.t, primary.Addr)
	host, port, _ := strings.Cut(link.Addr(), ":")
	ctx := context.Background()
	// The full sync starts at once, not 5 s later (the default delay
	// waits for more replicas).
	pc := primary.Client()
	err := pc.ConfigSet(ctx, "repl-diskless-sync-delay", "0").Err()
	pc.Close()
	if err != nil {
		return err
	}
	c := s.Client()
	defer c.Close()
	if err := c.Do(ctx, "replicaof", host, port).Err(); err != nil {
		return err
	}
	w.replicas[i], w.links[i] = s, link
	deadline := time.Now().Add(15 * time.Second)
	for infoOf(c, "replication", "master_link_status") != "up" {
		if time.Now().After(deadline) {
			return fmt.Errorf("the replica %s of master %d not in sync after 15s", s.Addr, i)
		}
		time.Sleep(20 * time.Millisecond)
	}
	return nil
}

// startReplicas starts a replica of every voter.
func (w *world) startReplicas() {
	w.replicas = make([]*redistest.Server, len(w.masters))
	w.links = make([]*redistest.Relay, len(w.masters))
	for i, m := range w.masters {
		if err := w.replicaOf(i, redistest.Start(w.t, redistest.Durable...), m); err != nil {
			w.t.Fatal(err)
		}
	}
}

// infoOf reads one field of an INFO section through c ("" on an error).
func infoOf(c *redis.Client, section, field string) string {
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	info, err := c.Info(ctx, section).Result()
	if err != nil {
		return ""
	}
	for _, line := range strings.Split(info, "\r\n") {
		if v, ok := strings.CutPrefix(line, field+":"); ok {
			return v
		}
	}
	return ""
}

// olderThanWindow waits until s has been up for longer than the guard
// window (uptime_in_seconds is whole seconds), up to 10 s.
func olderThanWindow(s *redistest.Server) {
	c := s.Client()
	defer c.Close()
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		up, err := strconv.Atoi(infoOf(c, "server", "uptime_in_seconds"))
		if err == nil && time.Duration(up)*time.Second > guardWindow {
			return
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// holdBack keeps every chunk sent through r from arriving (until Reset
// drops them): a connection cut without a word.
func holdBack(r *redistest.Relay) {
	r.DelayOnly.Store(nil)
	r.Delay.Store(int64(30 * time.Second))
}

// letThrough drops what r held back and lets the rest through again. The
// delay goes first: a connection made between the two would otherwise
// carry a command held back for the full delay, and run it that late.
func letThrough(r *redistest.Relay) {
	r.Delay.Store(0)
	r.Reset()
}

// other draws a voter other than i.
func (w *world) other(rng *rand.Rand, i int) int {
	return (i + 1 + rng.Intn(len(w.masters)-1)) % len(w.masters)
}

// failover fails voter i over to its replica (pause: the old primary is
// frozen, not killed, and comes back as the new primary's replica).
func (w *world) failover(rng *rand.Rand, i int, pause bool) {
	old, replica, link := w.masters[i], w.replicas[i], w.links[i]
	if replica == nil {
		w.h.fault("master %d has no replica to fail over to", i)
		return
	}
	k := w.other(rng, i)
	d := randDur(rng, 300*time.Millisecond, 900*time.Millisecond)
	olderThanWindow(replica)
	defer w.losing(i)()
	defer w.losingLate(k)
	defer w.losing(k)() // from the hold on, then lateBound after it (losingLate)
	how := "killed"
	if pause {
		how = "frozen"
	}
	w.h.fault("master %d's replication and master %d's writes held back for %s, then master %d's primary %s and its replica promoted", i, k, d, i, how)
	holdBack(link)
	holdBack(w.relays[k])
	time.Sleep(d)
	if pause {
		old.Stop()
	} else {
		old.Kill()
	}
	link.Reset() // what the replica had not received is lost
	c := replica.Client()
	promoted := c.Do(context.Background(), "replicaof", "no", "one").Err()
	c.Close()
	w.setMaster(i, replica)
	w.relays[i].SetTarget(replica.Addr)
	w.relays[i].Reset()
	letThrough(w.relays[k])
	w.h.fault("master %d is its promoted replica %s (REPLICAOF NO ONE: %v); master %d's held-back writes dropped", i, replica.Addr, promoted, k)
	w.replicas[i], w.links[i] = nil, nil
	next := old
	if pause {
		time.Sleep(randDur(rng, 300*time.Millisecond, 1500*time.Millisecond))
		old.Cont()
	} else {
		next = redistest.Start(w.t, redistest.Durable...)
	}
	err := w.replicaOf(i, next, replica)
	switch {
	case err != nil:
		w.h.count("failover: no replica in sync after it")
	case promoted != nil:
		w.h.count("failover: the promotion failed")
	default:
		w.h.count("failover: a replica promoted, another in sync")
	}
	if pause {
		w.h.fault("master %d's old primary resumes as the replica of the new one: %v", i, err)
	} else {
		w.h.fault("master %d has a new replica: %v", i, err)
	}
}

// evict makes voter i evict keys with a TTL: locks granted while voter
// k's writes were held back are on i and the third voter only. The
// proxies go on sending to i while it evicts: what they learn of the
// eviction (the INFO stats ending each batch sent to a master whose policy
// can evict, the periodic check) must keep i's votes from counting.
func (w *world) evict(rng *rand.Rand, i int) {
	k := w.other(rng, i)
	d := randDur(rng, 300*time.Millisecond, 700*time.Millisecond)
	defer w.losingLate(k)
	defer w.losing(k)() // from the hold on, then lateBound after it (losingLate)
	w.h.fault("master %d's writes held back for %s, then master %d evicts under volatile-ttl", k, d, i)
	holdBack(w.relays[k])
	time.Sleep(d)
	ctx := context.Background()
	c := w.masters[i].Client()
	defer c.Close()
	evicted := func() int64 {
		n, _ := strconv.ParseInt(infoOf(c, "stats", "evicted_keys"), 10, 64)
		return n
	}
	before := evicted()
	used, _ := strconv.ParseInt(infoOf(c, "memory", "used_memory"), 10, 64)
	c.ConfigSet(ctx, "maxmemory-policy", "volatile-ttl")
	c.ConfigSet(ctx, "maxmemory", strconv.FormatInt(used+128<<10, 10))
	// A policy that evicts, switched on at runtime, is known to a proxy
	// from its next check of the master (clock_check) on: from then, every
	// batch it sends there reads evicted_keys after its commands. An
	// eviction within the check interval of the switch is not covered
	// (docs/safety.md, "Voters that evict").
	w.waitPolicyKnown(i, "volatile-ttl")
	filler := strings.Repeat("x", 16<<10)
	var names []string
	after, refused := before, 0
	for deadline := time.Now().Add(1500 * time.Millisecond); after == before && time.Now().Before(deadline); after = evicted() {
		name := fmt.Sprintf("filler:%d", len(names))
		if err := c.Set(ctx, name, filler, 0).Err(); err != nil {
			refused++ // OOM: nothing with a TTL to evict
			time.Sleep(10 * time.Millisecond)
			continue
		}
		names = append(names, name)
	}
	c.ConfigSet(ctx, "maxmemory", "0")
	c.ConfigSet(ctx, "maxmemory-policy", "noeviction")
	for len(names) > 0 {
		n := min(len(names), 50)
		c.Del(ctx, names[:n]...)
		names = names[n:]
	}
	letThrough(w.relays[k])
	w.h.fault("master %d evicted %d keys (%d filler writes refused); maxmemory 0, noeviction again; what master %d was sent meanwhile dropped", i, after-before, refused, k)
	if after == before {
		w.h.count("evict: nothing evicted")
		return
	}
	w.h.count("evict: keys with a TTL evicted")
	// For the report: whether both proxies read the eviction within 2 s.
	field := fmt.Sprintf("master%d", i)
	for deadline := time.Now().Add(2 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		seen := 0
		for _, p := range w.proxies {
			pc := p.Client()
			if n, ok := proxyEvicted(infoOf(pc, "redlock", field)); ok && n >= after {
				seen++
			}
			pc.Close()
		}
		if seen == len(w.proxies) {
			w.h.count("evict: read by both proxies within 2s")
			return
		}
	}
}

// waitPolicyKnown waits, for at most 5 s, until every proxy's INFO shows
// master i's maxmemory-policy as policy.
func (w *world) waitPolicyKnown(i int, policy string) {
	field := fmt.Sprintf("master%d", i)
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		known := 0
		for _, p := range w.proxies {
			pc := p.Client()
			if strings.Contains(infoOf(pc, "redlock", field), ",maxmemory_policy="+policy+",") {
				known++
			}
			pc.Close()
		}
		if known == len(w.proxies) {
			return
		}
	}
	w.h.fault("master %d's policy %s not known to every proxy within 5s", i, policy)
}

// proxyEvicted reads evicted_keys from a master's line of the proxy's
// INFO redlock.
func proxyEvicted(line string) (int64, bool) {
	for _, f := range strings.Split(line, ",") {
		if v, ok := strings.CutPrefix(f, "evicted_keys="); ok {
			n, err := strconv.ParseInt(v, 10, 64)
			return n, err == nil
		}
	}
	return 0, false
}

// setMaster makes s voter i's process from now on.
func (w *world) setMaster(i int, s *redistest.Server) {
	w.mmu.Lock()
	defer w.mmu.Unlock()
	w.masters[i] = s
}

// masterAddr is the address of voter i's process now.
func (w *world) masterAddr(i int) string {
	w.mmu.Lock()
	defer w.mmu.Unlock()
	return w.masters[i].Addr
}
