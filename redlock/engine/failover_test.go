package engine

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/redlock-proxy/redlock-proxy/internal/redistest"
)

// startReplica starts a replica of primary (through addr, the primary's
// own address or a relay in front of it) and waits until it is in sync.
func startReplica(t *testing.T, addr string) *redistest.Server {
	t.Helper()
	host, port, _ := strings.Cut(addr, ":")
	pc := redis.NewClient(&redis.Options{Addr: addr, MaxRetries: -1, Protocol: 2})
	defer pc.Close()
	if err := pc.ConfigSet(context.Background(), "repl-diskless-sync-delay", "0").Err(); err != nil {
		t.Fatal(err) // else the first sync waits 5 s for more replicas
	}
	r := redistest.Start(t, "--replicaof", host, port)
	waitFor(t, 10*time.Second, "the replica in sync", func() bool {
		return r.InfoField("replication", "master_link_status") == "up"
	})
	return r
}

func newFailoverClient(t *testing.T, addrs []string, w time.Duration, off ...Guard) *Client {
	t.Helper()
	c, err := New(addrs, WithRestartGuard(w), WithMaxLockTTL(w), WithNodeTimeout(300*time.Millisecond),
		WithRetry(0, 0), WithGuardsOff(off...))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// A master that answers as a replica never votes: an acquire it cannot
// settle with the others is a *QuorumError that names it, not a refusal.
// Promoted in place (REPLICAOF NO ONE), it votes only after the window
// from its promotion.
func TestReplicaNeverVotes(t *testing.T) {
	primary := redistest.Start(t)
	replica := startReplica(t, primary.Addr)
	ms := redistest.StartN(t, 2)
	const w = 2 * time.Second
	time.Sleep(w) // every process older than the window: age alone guards none
	c := newFailoverClient(t, []string{replica.Addr, ms[0].Addr, ms[1].Addr}, w)
	ctx := context.Background()
	waitFor(t, 5*time.Second, "the replica seen", func() bool {
		c.Probe(ctx)
		return c.Status()[0].Role == "slave"
	})
	if st := c.Status()[0]; !st.Guarded {
		t.Fatalf("a replica's status: %+v, want guarded", st)
	}
	ms[1].Stop()
	_, err := c.Acquire(ctx, "lock:replica", "t1", time.Second)
	ms[1].Cont()
	var qe *QuorumError
	if !errors.As(err, &qe) || !strings.Contains(err.Error(), "answering as a replica") {
		t.Fatalf("acquire with the replica and one master stalled: %v, want a *QuorumError naming the replica", err)
	}

	rc := replica.Client()
	defer rc.Close()
	if err := rc.Do(ctx, "replicaof", "no", "one").Err(); err != nil {
		t.Fatal(err)
	}
	promoted := time.Now()
	waitFor(t, 5*time.Second, "the promotion seen", func() bool {
		st := c.Status()[0]
		return st.Role == "master" && st.Promotions == 1
	})
	if st := c.Status()[0]; !st.Guarded || st.GuardLeft < w-time.Since(promoted)-time.Second {
		t.Fatalf("promoted in place: %+v, want guarded for about the window", st)
	}
	ms[1].Stop()
	_, err = c.Acquire(ctx, "lock:replica", "t2", time.Second)
	ms[1].Cont()
	if !errors.As(err, &qe) {
		t.Fatalf("acquire within the window after the promotion: %v, want a *QuorumError", err)
	}
	waitFor(t, w+3*time.Second, "the promoted master votes", func() bool {
		return !c.Status()[0].Guarded
	})
	ms[1].Stop()
	defer ms[1].Cont()
	if _, err := c.Acquire(ctx, "lock:replica", "t3", time.Second); err != nil {
		t.Fatalf("acquire after the window: %v", err)
	}
}

// failoverScene is a voter behind an address that moves (a relay, as a DNS
// name or a managed service's endpoint moves) from its primary to the
// primary's replica, which lacks the last lock the primary granted: its
// replication was held back for that key only, as asynchronous
// replication loses the last writes of a primary that crashes. The third
// voter is behind a relay too, which can hold back one lock's commands.
type failoverScene struct {
	primary, replica, other, third *redistest.Server
	voter                          *redistest.Relay // the first voter's address
	repl                           *redistest.Relay // between the replica and the primary
	thirdRelay                     *redistest.Relay
}

func newFailoverScene(t *testing.T, w time.Duration) *failoverScene {
	t.Helper()
	s := &failoverScene{primary: redistest.Start(t)}
	s.repl = redistest.NewRelay(t, s.primary.Addr)
	s.other, s.third = redistest.Start(t), redistest.Start(t)
	s.replica = startReplica(t, s.repl.Addr())
	s.voter = redistest.NewRelay(t, s.primary.Addr)
	s.thirdRelay = redistest.NewRelay(t, s.third.Addr)
	olderThan(t, w, s.other, s.third, s.replica)
	return s
}

// olderThan waits until every server has been up for longer than w: age
// alone then guards none of them.
func olderThan(t *testing.T, w time.Duration, ss ...*redistest.Server) {
	t.Helper()
	waitFor(t, w+10*time.Second, "the servers older than the window", func() bool {
		for _, s := range ss {
			up, _ := strconv.Atoi(s.InfoField("server", "uptime_in_seconds"))
			if time.Duration(up)*time.Second <= w {
				return false
			}
		}
		return true
	})
}

func (s *failoverScene) addrs() []string {
	return []string{s.voter.Addr(), s.other.Addr, s.thirdRelay.Addr()}
}

// holdBack keeps whatever is sent through r that names key from arriving;
// the returned func drops it for good (the connections through r close)
// and lets the rest through again.
func holdBack(r *redistest.Relay, key string) (drop func()) {
	b := []byte(key)
	r.DelayOnly.Store(&b)
	r.Delay.Store(int64(time.Hour))
	return func() { r.Delay.Store(0); r.Reset() }
}

// failOver kills the primary, drops what its replication still held back,
// promotes the replica and moves the voter's address to it.
func (s *failoverScene) failOver(t *testing.T) {
	t.Helper()
	s.primary.Kill()
	s.repl.Reset()
	rc := s.replica.Client()
	defer rc.Close()
	if err := rc.Do(context.Background(), "replicaof", "no", "one").Err(); err != nil {
		t.Fatal(err)
	}
	s.voter.SetTarget(s.replica.Addr)
	s.voter.Reset()
}

// A promoted replica is a restart without proof of kept data: a lock the
// old primary granted and did not replicate is not granted again within
// the window, to a client that saw the old primary nor to one that sees
// only the promoted replica. With GuardPromotion off, the replica (up for
// longer than the window) votes at once, and the lock has two holders.
func TestPromotionGuard(t *testing.T) {
	for _, guardOn := range []bool{true, false} {
		t.Run(fmt.Sprintf("guard=%v", guardOn), func(t *testing.T) {
			const w = 4 * time.Second
			s := newFailoverScene(t, w)
			var off []Guard
			if !guardOn {
				off = []Guard{GuardPromotion}
			}
			ctx := context.Background()
			x := newFailoverClient(t, s.addrs(), w, off...)
			y := newFailoverClient(t, s.addrs(), w, off...)
			for _, c := range []*Client{x, y} {
				if c.Probe(ctx) != 3 || c.VotersAvailable() != 3 {
					t.Fatalf("before the failover: %d voters, want 3", c.VotersAvailable())
				}
			}
			const key = "lock:failover"
			holdBack(s.repl, key)
			drop := holdBack(s.thirdRelay, key) // X's lock lands on the primary and the other master only
			lock, err := x.Acquire(ctx, key, "x", w)
			drop()
			if err != nil || lock == nil {
				t.Fatalf("X's acquire: %v", err)
			}
			s.failOver(t)
			rc := s.replica.Client()
			defer rc.Close()
			if v, _ := rc.Get(ctx, key).Result(); v != "" {
				t.Fatalf("the promoted replica holds %q: the scene did not lose the write", v)
			}
			z := newFailoverClient(t, s.addrs(), w, off...) // sees the promoted replica first
			run := s.replica.InfoField("server", "run_id")
			for _, name := range []string{"Y", "Z"} {
				c := map[string]*Client{"Y": y, "Z": z}[name]
				waitFor(t, 5*time.Second, name+" reaches the promoted replica", func() bool {
					c.Probe(ctx)
					return c.Status()[0].RunID == run
				})
				l, err := c.Acquire(ctx, key, strings.ToLower(name), w)
				switch {
				case guardOn && l != nil:
					t.Fatalf("%s was granted the lock X holds (%d masters answer it)", name, countHolders(t, c, key))
				case guardOn:
					if st := c.Status()[0]; !st.Guarded || st.Promotions == 0 {
						t.Fatalf("%s: the promoted voter %+v, want guarded after a promotion (acquire: %v)", name, st, err)
					}
				case name == "Y" && l == nil:
					t.Fatalf("guard off: Y was not granted the lock (%v); the control shows nothing", err)
				case name == "Y":
					t.Logf("guard off: X and Y both hold %s, as the guard prevents", key)
				}
			}
		})
	}
}

// countHolders counts, for logs, the masters that answer the key.
func countHolders(t *testing.T, c *Client, key string) int {
	t.Helper()
	k := 0
	for _, r := range c.Broadcast(context.Background(), key, nil, "get", key) {
		if r.Err == nil {
			k++
		}
	}
	return k
}

// A master that evicts keys (a volatile-* or allkeys-* policy under
// maxmemory) may drop a held lock: from the eviction on it does not vote
// for the window. The eviction is found by the periodic check, and, on a
// master whose policy can evict, by the INFO stats that ends every batch
// sent to it, before the batch's replies count: "before any check" runs
// with the periodic check an hour apart. With GuardEviction off, a lock
// evicted from one master is granted again with the votes of that master
// and one the first holder's acquire did not reach.
func TestEvictionGuard(t *testing.T) {
	for _, tc := range []struct {
		name           string
		guardOn, check bool
	}{{"guard=true/seen_by_the_check", true, true}, {"guard=true/before_any_check", true, false}, {"guard=false", false, false}} {
		t.Run(tc.name, func(t *testing.T) {
			const w = 4 * time.Second
			ms := redistest.StartN(t, 3)
			third := redistest.NewRelay(t, ms[2].Addr)
			olderThan(t, w, ms...)
			addrs := []string{ms[0].Addr, ms[1].Addr, third.Addr()}
			var off []Guard
			if !tc.guardOn {
				off = []Guard{GuardEviction}
			}
			ctx := context.Background()
			x := newFailoverClient(t, addrs, w, off...)
			if x.Probe(ctx) != 3 || x.VotersAvailable() != 3 {
				t.Fatalf("%d voters, want 3", x.VotersAvailable())
			}
			const key = "lock:evicted"
			drop := holdBack(third, key) // X's lock lands on the first two masters only
			lock, err := x.Acquire(ctx, key, "x", w)
			drop()
			if err != nil || lock == nil {
				t.Fatalf("X's acquire: %v", err)
			}
			mayEvict(t, ms[0])
			every := time.Second
			if !tc.check {
				every = time.Hour
			}
			y, err := New(addrs, WithRestartGuard(w), WithMaxLockTTL(w), WithNodeTimeout(300*time.Millisecond),
				WithRetry(0, 0), WithGuardsOff(off...), WithClockCheck(every, time.Second))
			if err != nil {
				t.Fatal(err)
			}
			defer y.Close()
			// Y meets the masters after the policy changed: it knows it.
			if y.Probe(ctx) != 3 || y.VotersAvailable() != 3 || y.Status()[0].EvictionPolicy != "volatile-ttl" {
				t.Fatalf("Y: %d voters, master 0 %+v", y.VotersAvailable(), y.Status()[0])
			}
			evict(t, ms[0], key)
			if tc.check {
				waitFor(t, 5*time.Second, "the eviction seen", func() bool {
					return y.Status()[0].EvictedKeys > 0
				})
			}
			l, err := y.Acquire(ctx, key, "y", w)
			switch {
			case tc.guardOn && l != nil:
				t.Fatal("Y was granted the lock X holds, with the vote of the master that evicted it")
			case tc.guardOn && (!y.Status()[0].Guarded || y.Status()[0].Evictions != 1):
				t.Fatalf("the master that evicted: %+v, want guarded once (acquire: %v)", y.Status()[0], err)
			case !tc.guardOn && l == nil:
				t.Fatalf("guard off: Y was not granted the lock (%v); the control shows nothing", err)
			case !tc.guardOn:
				t.Logf("guard off: X and Y both hold %s", key)
			}
		})
	}
}

// mayEvict gives m the policy volatile-ttl under a maxmemory just above
// what it uses.
func mayEvict(t *testing.T, m *redistest.Server) {
	t.Helper()
	ctx := context.Background()
	rc := m.Client()
	defer rc.Close()
	used, _ := strconv.ParseInt(m.InfoField("memory", "used_memory"), 10, 64)
	if err := rc.ConfigSet(ctx, "maxmemory-policy", "volatile-ttl").Err(); err != nil {
		t.Fatal(err)
	}
	if err := rc.ConfigSet(ctx, "maxmemory", strconv.FormatInt(used+512<<10, 10)).Err(); err != nil {
		t.Fatal(err)
	}
}

// evict fills m, under the policy mayEvict gave it, until it evicts key,
// the one key with a TTL.
func evict(t *testing.T, m *redistest.Server, key string) {
	t.Helper()
	ctx := context.Background()
	rc := m.Client()
	defer rc.Close()
	filler := strings.Repeat("x", 64<<10)
	for i := 0; i < 64; i++ {
		err := rc.Set(ctx, fmt.Sprintf("filler:%d", i), filler, 0).Err()
		if n, _ := rc.Exists(ctx, key).Result(); n == 0 {
			return
		}
		if err != nil && !errors.Is(err, redis.Nil) {
			t.Fatalf("filling %s: %v before %s was evicted", m.Addr, err, key)
		}
	}
	t.Fatalf("%s kept %s", m.Addr, key)
}

// INFO's replication lines say whether a process was ever promoted, and
// the record's note dates the promotion by the master's clock.
func TestPromotedAt(t *testing.T) {
	info := "# Replication\r\nrole:master\r\nconnected_slaves:1\r\nmaster_replid:bbbb\r\nmaster_replid2:aaaa\r\nmaster_repl_offset:120\r\nsecond_repl_offset:57\r\n# Stats\r\nevicted_keys:3\r\n# Memory\r\nmaxmemory:1000\r\nmaxmemory_policy:volatile-lru\r\n"
	st := parseServerInfo(info)
	if !st.repl.promoted() || st.repl.isReplica() || st.repl.replicas != 1 || st.repl.evicted != 3 || !st.repl.evicts() || st.repl.minReplicas != -1 {
		t.Fatalf("parsed %+v", st.repl)
	}
	if fresh := parseServerInfo("role:master\r\nmaster_replid:cccc\r\nsecond_repl_offset:-1\r\n"); fresh.repl.promoted() {
		t.Fatal("a master that was never a replica read as promoted")
	}
	now := time.Now()
	for _, c := range []struct {
		name string
		rec  record
		has  bool
		ago  time.Duration
	}{
		{"no record", record{}, false, 0},
		{"the record names another id", record{term: "aaaa", termAt: 1000, now: 61000}, true, 0},
		{"noted a minute ago", record{term: "bbbb", termAt: 1000, now: 61000}, true, 59999 * time.Millisecond},
		{"noted just now", record{term: "bbbb", termAt: 1000, now: 1001}, true, 0},
		{"the master's clock went back", record{term: "bbbb", termAt: 5000, now: 1000}, true, 0},
	} {
		st.rec, st.hasRec = c.rec, c.has
		if got := now.Sub(st.promotedAt(now)); got != c.ago {
			t.Errorf("%s: promoted %s ago, want %s", c.name, got, c.ago)
		}
	}
}

// With WithWaitReplicas, a master's lock writes count only once its
// replicas acknowledged them: with the replicas of two of three masters
// stalled, an acquire is not granted (its outcome is not known, and what
// it took is undone); with one stalled, it is.
func TestWaitReplicas(t *testing.T) {
	const w = time.Second
	ms := redistest.StartN(t, 3)
	var replicas []*redistest.Server
	for _, m := range ms {
		replicas = append(replicas, startReplica(t, m.Addr))
	}
	olderThan(t, w, ms...)
	c, err := New(redistest.Addrs(ms), WithRestartGuard(w), WithNodeTimeout(300*time.Millisecond), WithRetry(0, 0), WithWaitReplicas(1))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ctx := context.Background()
	if l, err := c.Acquire(ctx, "lock:wait", "a", 2*time.Second); err != nil || l == nil {
		t.Fatalf("every replica in sync: %v", err)
	}
	if r, err := c.Release(ctx, "lock:wait", "a"); err != nil || !r.Released(c.Quorum()) {
		t.Fatalf("release: %+v %v", r, err)
	}
	replicas[0].Stop()
	l, err := c.Acquire(ctx, "lock:wait", "b", 2*time.Second)
	if err != nil || l == nil {
		replicas[0].Cont()
		t.Fatalf("one replica stalled: %v", err)
	}
	if _, err := c.Release(ctx, "lock:wait", "b"); err != nil {
		t.Logf("release with one replica stalled: %v", err)
	}
	replicas[1].Stop()
	_, err = c.Acquire(ctx, "lock:wait", "c", 2*time.Second)
	replicas[0].Cont()
	replicas[1].Cont()
	var qe *QuorumError
	var nr *NotReplicatedError
	if !errors.As(err, &qe) || !errors.As(err, &nr) {
		t.Fatalf("two replicas stalled: %v, want a *QuorumError with a *NotReplicatedError", err)
	}
	waitFor(t, 5*time.Second, "the refused acquire undone", func() bool {
		for _, m := range ms {
			rc := m.Client()
			v, _ := rc.Get(ctx, "lock:wait").Result()
			rc.Close()
			if v == "c" {
				return false
			}
		}
		return true
	})
}

// A lock held across each kind of failover of a voter given as a Sentinel
// group (SENTINEL FAILOVER; the primary killed; the primary paused, so
// that it comes back as a replica): the voter follows the new primary and
// guards it as promoted, no second holder is granted, and the holder
// still extends and releases its lock with the other two voters.
func TestLockAcrossSentinelFailovers(t *testing.T) {
	for _, mode := range []string{"sentinel-failover", "kill", "pause"} {
		t.Run(mode, func(t *testing.T) {
			const w = 3 * time.Second
			g := redistest.StartSentinels(t, "locks")
			ms := redistest.StartN(t, 2)
			addrs := []string{g.URL(), ms[0].Addr, ms[1].Addr}
			// The lock outlives the scene (a paused primary's comes back
			// after tens of seconds on a loaded machine).
			const ttl = time.Minute
			var x, y *Client
			for _, c := range []**Client{&x, &y} {
				var err error
				if *c, err = New(addrs, WithRestartGuard(w), WithMaxLockTTL(ttl), WithNodeTimeout(300*time.Millisecond), WithRetry(0, 0)); err != nil {
					t.Fatal(err)
				}
				t.Cleanup(func() { (*c).Close() })
			}
			ctx := context.Background()
			for _, c := range []*Client{x, y} {
				waitFor(t, w+5*time.Second, "every voter votes", func() bool {
					c.Probe(ctx)
					return c.VotersAvailable() == 3
				})
			}
			const key = "lock:across"
			if l, err := x.Acquire(ctx, key, "x", ttl); err != nil || l == nil {
				t.Fatalf("X's acquire: %v", err)
			}
			switch mode {
			case "sentinel-failover":
				g.Failover()
			case "kill":
				g.WaitPrimary(g.KillPrimary())
			case "pause":
				old := g.PausePrimary()
				g.WaitPrimary(old)
				g.Resume(old)
				waitFor(t, 30*time.Second, "the old primary back as a replica", func() bool {
					return old.InfoField("replication", "role") == "slave"
				})
			}
			for name, c := range map[string]*Client{"X": x, "Y": y} {
				waitFor(t, 30*time.Second, name+" follows the promoted primary", func() bool {
					c.Probe(ctx)
					st := c.Status()[0]
					return st.Sentinel != nil && st.Sentinel.Switches > 0 && st.Promotions > 0
				})
			}
			if l, err := y.Acquire(ctx, key, "y", ttl); l != nil {
				t.Fatal("Y was granted the lock X holds")
			} else {
				t.Logf("Y's acquire after the failover: %v", err)
			}
			if _, ok, err := x.Extend(ctx, key, "x", ttl, ExtendSet); !ok || err != nil {
				t.Fatalf("X's extend after the failover: %v %v", ok, err)
			}
			if r, err := x.Release(ctx, key, "x"); err != nil || !r.Released(x.Quorum()) {
				t.Fatalf("X's release after the failover: %+v %v", r, err)
			}
		})
	}
}

// The connections that carry lock commands are kept from client eviction
// (CLIENT NO-EVICT on, flag e in CLIENT LIST), set ahead of their first
// batch.
func TestLockConnectionsNoEvict(t *testing.T) {
	m := redistest.Start(t)
	c, err := New([]string{m.Addr}, WithRestartGuard(0))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ctx := context.Background()
	if _, err := c.Acquire(ctx, "lock:noevict", "t", time.Second); err != nil {
		t.Fatal(err)
	}
	rc := m.Client()
	defer rc.Close()
	list, err := rc.ClientList(ctx).Result()
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(strings.TrimSpace(list), "\n") {
		if strings.Contains(line, "cmd=set") || strings.Contains(line, "cmd=evalsha") || strings.Contains(line, "cmd=eval ") {
			for _, f := range strings.Fields(line) {
				if v, ok := strings.CutPrefix(f, "flags="); ok && strings.Contains(v, "e") {
					return
				}
			}
			t.Fatalf("the lock connection is not kept from eviction: %s", line)
		}
	}
	t.Fatalf("no lock connection in CLIENT LIST:\n%s", list)
}
