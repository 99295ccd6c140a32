package main

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"math"
	"net"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
)

// Row 10: Redis Clusters, as voters and as the passthrough backend.
//
// A cluster here is made by hand: every node gets its range of slots with
// CLUSTER ADDSLOTSRANGE and the first node meets the others (CLUSTER
// MEET), so a cluster may have one or two primaries, which redis-cli
// --cluster create refuses (it wants three at least). Without replicas:
// the benchmark measures the path of a command, not a failover.

// clusterSlots is the number of hash slots of a Redis Cluster.
const clusterSlots = 16384

// slotRanges splits the hash slots evenly among n primaries: the first and
// last slot of each, in order.
func slotRanges(n int) [][2]int {
	var out [][2]int
	for i := range n {
		out = append(out, [2]int{i * clusterSlots / n, (i+1)*clusterSlots/n - 1})
	}
	return out
}

// clusterSeed is the redlock.masters entry naming a cluster by all its
// nodes (proxy.backend takes it without the closing /).
func clusterSeed(nodes []*proc) string {
	addrs := make([]string, len(nodes))
	for i, n := range nodes {
		addrs[i] = n.addr
	}
	return "cluster://" + strings.Join(addrs, ",") + "/"
}

// startCluster starts shards cluster-enabled redis-servers, gives each an
// even share of the slots and joins them, and waits until every node says
// cluster_state:ok and knows every other.
func (ps *procs) startCluster(prefix string, shards int) ([]*proc, error) {
	var nodes []*proc
	for i := range shards {
		p, err := ps.startRedis(fmt.Sprintf("%s-%d", prefix, i+1),
			"--cluster-enabled", "yes", "--cluster-config-file", "nodes.conf", "--cluster-node-timeout", "5000")
		if err != nil {
			return nil, err
		}
		nodes = append(nodes, p)
	}
	for i, rg := range slotRanges(shards) {
		reply, err := roundTrip(nodes[i].addr, 5*time.Second, "CLUSTER", "ADDSLOTSRANGE", strconv.Itoa(rg[0]), strconv.Itoa(rg[1]))
		if err != nil || reply != "+OK" {
			return nil, fmt.Errorf("CLUSTER ADDSLOTSRANGE %d %d on %s: %q %v", rg[0], rg[1], nodes[i].addr, reply, err)
		}
	}
	for _, n := range nodes[1:] {
		host, port, _ := strings.Cut(n.addr, ":")
		reply, err := roundTrip(nodes[0].addr, 5*time.Second, "CLUSTER", "MEET", host, port)
		if err != nil || reply != "+OK" {
			return nil, fmt.Errorf("CLUSTER MEET %s from %s: %q %v", n.addr, nodes[0].addr, reply, err)
		}
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		ok := true
		var last string
		for _, n := range nodes {
			info, err := bulkReply(n.addr, "CLUSTER", "INFO")
			if err != nil || !strings.Contains(info, "cluster_state:ok") ||
				!strings.Contains(info, "cluster_known_nodes:"+strconv.Itoa(shards)+"\r\n") ||
				!strings.Contains(info, "cluster_slots_ok:"+strconv.Itoa(clusterSlots)+"\r\n") {
				ok = false
				last = fmt.Sprintf("%s: %v %s", n.addr, err, clip(info))
				break
			}
		}
		if ok {
			return nodes, nil
		}
		if time.Now().After(deadline) {
			return nil, fmt.Errorf("cluster %s did not agree on its slots within 30s: %s", prefix, last)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// bulkReply sends one command and reads a bulk string reply.
func bulkReply(addr string, args ...string) (string, error) {
	c, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		return "", err
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(5 * time.Second))
	if _, err := c.Write(respCommand(args...)); err != nil {
		return "", err
	}
	br := bufio.NewReader(c)
	line, err := br.ReadString('\n')
	if err != nil {
		return "", err
	}
	n, err := strconv.Atoi(strings.TrimSpace(strings.TrimPrefix(line, "$")))
	if err != nil || !strings.HasPrefix(line, "$") {
		return "", fmt.Errorf("%s on %s answered %q", strings.Join(args, " "), addr, strings.TrimSpace(line))
	}
	b := make([]byte, n)
	if _, err := io.ReadFull(br, b); err != nil {
		return "", err
	}
	return string(b), nil
}

// addrsOf lists the processes' addresses.
func addrsOf(ps []*proc) []string {
	out := make([]string, len(ps))
	for i, p := range ps {
		out[i] = p.addr
	}
	return out
}

// goDataResult is one run of runGoData.
type goDataResult struct {
	ops, errs int
	elapsed   time.Duration
	sample    string
}

func (r goDataResult) rate() float64 { return float64(r.ops) / r.elapsed.Seconds() }

// runGoData runs clients goroutines on one go-redis client (a Client to a
// proxy or a ClusterClient to the cluster) for d, each a SET then a GET of
// key:<random below keyspace> in turn, one command in flight each, and
// counts the replies that were not errors.
func runGoData(c redis.UniversalClient, clients, keyspace int, d time.Duration) (goDataResult, error) {
	ctx := context.Background()
	// Warm up: one SET per goroutine, which also opens the connections.
	for i := range clients {
		if err := c.Set(ctx, "key:"+strconv.Itoa(i%keyspace), "val", 0).Err(); err != nil {
			return goDataResult{}, err
		}
	}
	var mu sync.Mutex
	var res goDataResult
	start := time.Now()
	deadline := start.Add(d)
	var wg sync.WaitGroup
	for g := range clients {
		wg.Add(1)
		go func(g int) {
			defer wg.Done()
			ops, errs, sample := 0, 0, ""
			x := uint32(g*2654435761 + 1)
			for i := 0; time.Now().Before(deadline); i++ {
				x ^= x << 13
				x ^= x >> 17
				x ^= x << 5
				key := "key:" + strconv.Itoa(int(x)%keyspace)
				var err error
				if i%2 == 0 {
					err = c.Set(ctx, key, "val", 0).Err()
				} else if err = c.Get(ctx, key).Err(); err == redis.Nil {
					err = nil
				}
				if err != nil {
					errs++
					if sample == "" {
						sample = err.Error()
					}
					continue
				}
				ops++
			}
			mu.Lock()
			res.ops += ops
			res.errs += errs
			if res.sample == "" {
				res.sample = sample
			}
			mu.Unlock()
		}(g)
	}
	wg.Wait()
	res.elapsed = time.Since(start)
	return res, nil
}

// row10Shards are the shard counts of each of row 10's three voters; 0
// stands for three plain masters (no cluster at all).
var row10Shards = []int{0, 1, 2, 3}

// row10Name names a row 10 lock configuration.
func row10Name(shards int) string {
	if shards == 0 {
		return "plain"
	}
	return fmt.Sprintf("c%d", shards)
}

// runRow10 measures row 10: (a) SET NX PX acquires through a proxy whose
// three voters are plain masters, or clusters of 1, 2 and 3 shards, taking
// turns in each repetition; (b) data commands through a proxy with a
// 3-shard cluster as its backend vs straight to the cluster, from
// redis-benchmark (--cluster when direct) and from go-redis.
func runRow10(o options, ps *procs, r *results, binary string, single *proc, sized func(label, cpuKey string, targets []*proc, names []string, tests int, flush []string, after func(name string), args ...string) (map[string]map[string][]rbResult, bool), serversOf map[*proc][]*proc) error {
	progress("row 10: starting 3 voters each as plain masters and as clusters of 1, 2 and 3 shards")
	var targets []*proc
	var names []string
	flush := []string{single.addr}
	voterNodes := map[string][][]*proc{} // by configuration: each voter's nodes
	shardsOf := row10Shards
	if !o.rows["10"] {
		shardsOf = []int{0} // -rows 10b: 10 b alone, its voters the plain masters
	}
	for _, shards := range shardsOf {
		name := row10Name(shards)
		masters, nodes, err := startRow10Voters(ps, name, shards)
		if err != nil {
			return err
		}
		voterNodes[name] = nodes
		var all []*proc
		for _, n := range nodes {
			all = append(all, n...)
		}
		// Every configuration has the same backend of its own, which the
		// first voter being a cluster requires, and refuses other commands
		// on lock keys, so that an acquire is the quorum's SET NX alone
		// (no mirror on the backend: that is row 9's mixed mode).
		p, err := ps.startProxy("proxy-r10-"+name, binary, proxyConfig{masters: masters, backend: single.addr,
			lockKeys: []string{"*"}, lockKeyCommands: "refuse"})
		if err != nil {
			return err
		}
		serversOf[p] = all
		targets = append(targets, p)
		names = append(names, name)
		flush = append(flush, addrsOf(all)...)
	}
	// After each run: the keys on the middle voter, shard by shard.
	keysHeld := func(name string) { recordKeysHeld(r, name, voterNodes[name][1]) }
	if !o.rows["10"] {
		return runRow10b(o, ps, r, binary, voterNodes["plain"], targets)
	}
	got, ok := sized("row 10 acquire", "cl", targets, names, 1, flush, keysHeld,
		"-c", strconv.Itoa(o.clients), "-r", "100000", "SET", "key:__rand_int__", "val", "NX", "PX", "10000")
	if ok {
		for name, tests := range got {
			for _, vs := range tests {
				for _, v := range vs {
					r.add("cl."+name+".rps", v.rps)
					r.add("cl."+name+".p99", v.p99ms)
				}
			}
		}
	}
	r.notes = append(r.notes, "row 10 a: each proxy has three voters: plain masters, or three clusters of 1, 2 or 3 primaries each (no replicas; slots given by hand with CLUSTER ADDSLOTSRANGE and joined with CLUSTER MEET, as redis-cli --cluster create wants three primaries at least), given as cluster://<every node>/; backend = the single Redis, lock_keys = [\"*\"], lock_key_commands = \"refuse\" (no mirror on the backend); CPU per acquire = the proxy process's user+system time over the run's commands; Redis servers = every node of the three voters")
	return runRow10b(o, ps, r, binary, voterNodes["plain"], targets)
}

// startRow10Voters starts the three voters of the row 10 configuration
// name: plain masters (shards 0) or clusters of shards primaries each. It
// returns their redlock.masters entries and each one's nodes.
func startRow10Voters(ps *procs, name string, shards int) (masters []string, nodes [][]*proc, err error) {
	for v := range 3 {
		if shards == 0 {
			p, err := ps.startRedis(fmt.Sprintf("r10-plain-%d", v+1))
			if err != nil {
				return nil, nil, err
			}
			nodes = append(nodes, []*proc{p})
			masters = append(masters, p.addr)
			continue
		}
		cl, err := ps.startCluster(fmt.Sprintf("r10-%s-v%d", name, v+1), shards)
		if err != nil {
			return nil, nil, err
		}
		nodes = append(nodes, cl)
		masters = append(masters, clusterSeed(cl))
	}
	return masters, nodes, nil
}

// recordKeysHeld records, for the row 10 configuration name, the keys on
// its middle voter (its nodes middle), in total and how evenly its shards
// share them. A granted lock is on at least two voters, so the middle
// voter's total counts most grants; its shards' shares show the keys
// were spread.
func recordKeysHeld(r *results, name string, middle []*proc) {
	var per []float64
	total := 0.0
	for _, n := range middle {
		k, err := dbsize(n.addr)
		if err != nil {
			r.problem("DBSIZE %s: %v", n.addr, err)
			return
		}
		per = append(per, float64(k))
		total += float64(k)
	}
	progress("row 10 %-5s keys on the middle voter, per shard: %v", name, per)
	r.add("cl."+name+".keys", total)
	if len(per) > 1 {
		lo, hi := math.Inf(1), 0.0
		for _, k := range per {
			lo, hi = math.Min(lo, k), math.Max(hi, k)
		}
		if hi > 0 {
			r.add("cl."+name+".spread", lo/hi)
		}
	}
}

// runRow10b measures row 10 b: data commands through a proxy with a
// 3-shard cluster as its backend (its voters the plain masters of 10 a)
// vs straight to the cluster, from redis-benchmark (--cluster when
// direct) and from go-redis; targets, 10 a's proxies, are checked alive at
// the end.
func runRow10b(o options, ps *procs, r *results, binary string, plainVoters [][]*proc, targets []*proc) error {
	progress("row 10: starting a 3-shard cluster as a backend")
	dc, err := ps.startCluster("r10-backend", 3)
	if err != nil {
		return err
	}
	// The voters are the plain masters of 10 a; lock:* keys only, so
	// redis-benchmark's key:… keys pass through.
	var plain []string
	for _, v := range plainVoters {
		plain = append(plain, v[0].addr)
	}
	pc, err := ps.startProxy("proxy-r10-backend", binary, proxyConfig{masters: plain, backend: strings.TrimSuffix(clusterSeed(dc), "/"), lockKeys: []string{"lock:*"}})
	if err != nil {
		return err
	}
	if err := runRow10bRedisBenchmark(o, r, pc, dc); err != nil {
		return err
	}
	if err := runRow10bGoRedis(o, r, pc, dc); err != nil {
		return err
	}
	if !pc.alive() {
		r.problem("%s exited during the run: %v\n%s", pc.name, pc.exitErr, pc.logTail(20))
	}
	for _, p := range targets {
		if !p.alive() {
			r.problem("%s exited during the run: %v\n%s", p.name, p.exitErr, p.logTail(20))
		}
	}
	return nil
}

// runRow10bRedisBenchmark is row 10 b from redis-benchmark, -P 16 then
// -P 1: SET and GET through the proxy pc vs straight to the cluster dc
// (--cluster), each repetition of the two with the same -n.
func runRow10bRedisBenchmark(o options, r *results, pc *proc, dc []*proc) error {
	rbTimeout := max(90*time.Second, 12*o.duration)
	c := strconv.Itoa(o.clients)
	for _, pl := range []string{"16", "1"} {
		key := "cb" + pl
		args := []string{"-c", c, "-P", pl, "-r", "100000", "-t", "set,get"}
		n, err := row10bRequests(pc.addr, rbTimeout, o.duration, args)
		if err != nil {
			r.problem("row 10 b -P %s pilot: %v", pl, err)
		}
		var lines []string
		for rep := range o.reps {
			for _, t := range []struct {
				name  string
				addr  string
				extra []string
				front *proc
			}{{"proxy", pc.addr, nil, pc}, {"direct", dc[0].addr, []string{"--cluster"}, nil}} {
				if err := flushAll(addrsOf(dc)...); err != nil {
					return err
				}
				snap0 := snapCPU(dc, t.front, false)
				res, line, gen, err := runRedisBenchmark(t.addr, n, rbTimeout, append(append([]string{}, t.extra...), args...)...)
				if rep == 0 {
					lines = append(lines, portRE.ReplaceAllString(line, "-h 127.0.0.1 -p <port>"))
				}
				if err != nil {
					r.problem("row 10 b -P %s %s, repetition %d: %v", pl, t.name, rep+1, err)
					continue
				}
				snap1 := snapCPU(dc, t.front, false)
				ops := n * len(res)
				r.recordCPU(key+"."+t.name, snap0, snap1, gen, ops)
				if t.front != nil {
					r.add(key+"."+t.name+".cpu", float64((snap1.proxy-snap0.proxy).Microseconds())/float64(ops))
				}
				var parts []string
				for test, v := range res {
					r.add(key+"."+t.name+"."+test, v.rps)
					r.add(key+"."+t.name+"."+test+".p99", v.p99ms)
					parts = append(parts, fmt.Sprintf("%s %.0f/s p99 %.2f ms", test, v.rps, v.p99ms))
				}
				progress("row 10 b -P %-2s %-6s rep %d: %s", pl, t.name, rep+1, strings.Join(parts, ", "))
			}
		}
		if len(lines) == 2 {
			r.notes = append(r.notes, fmt.Sprintf("row 10 b -P %s: `%s` against the proxy and `%s` straight to the cluster, same -n", pl, lines[0], lines[1]))
		}
	}
	return nil
}

// row10bRequests sizes row 10 b's redis-benchmark runs (-n) from a pilot
// run of args against addr: about half of d at the pilot's slowest test's
// rate, between 20000 and 5 million; 20000 if the pilot failed (its error
// is returned with it).
func row10bRequests(addr string, rbTimeout, d time.Duration, args []string) (int, error) {
	pilot, _, _, err := runRedisBenchmark(addr, 20000, rbTimeout, args...)
	if err != nil {
		return 20000, err
	}
	slowest := 0.0
	for _, v := range pilot {
		if slowest == 0 || v.rps < slowest {
			slowest = v.rps
		}
	}
	return max(20000, min(int(slowest*d.Seconds()/2), 5_000_000)), nil
}

// runRow10bGoRedis is row 10 b from go-redis: a Client to the proxy pc vs
// a ClusterClient to the cluster dc, both RESP2, a pool of as many
// connections as goroutines.
func runRow10bGoRedis(o options, r *results, pc *proc, dc []*proc) error {
	for rep := range o.reps {
		for _, t := range []struct {
			name  string
			front *proc
			open  func() redis.UniversalClient
		}{
			{"proxy", pc, func() redis.UniversalClient {
				return redis.NewClient(&redis.Options{Addr: pc.addr, Protocol: 2, PoolSize: o.clients, MaxRetries: -1})
			}},
			{"direct", nil, func() redis.UniversalClient {
				return redis.NewClusterClient(&redis.ClusterOptions{Addrs: addrsOf(dc), Protocol: 2, PoolSize: o.clients, MaxRetries: -1})
			}},
		} {
			if err := flushAll(addrsOf(dc)...); err != nil {
				return err
			}
			cl := t.open()
			snap0 := snapCPU(dc, t.front, true)
			res, err := runGoData(cl, o.clients, 100000, o.duration)
			snap1 := snapCPU(dc, t.front, true)
			cl.Close()
			if err != nil {
				r.problem("row 10 b go-redis %s, repetition %d: %v", t.name, rep+1, err)
				continue
			}
			r.recordCPU("cbgo."+t.name, snap0, snap1, 0, res.ops)
			if t.front != nil && res.ops > 0 {
				r.add("cbgo."+t.name+".cpu", float64((snap1.proxy-snap0.proxy).Microseconds())/float64(res.ops))
			}
			r.add("cbgo."+t.name+".rate", res.rate())
			r.add("cbgo."+t.name+".errors", float64(res.errs))
			progress("row 10 b go-redis %-6s rep %d: %.0f ops/s, %d errors", t.name, rep+1, res.rate(), res.errs)
			if res.errs > 0 {
				r.problem("row 10 b go-redis %s, repetition %d: %d error replies; e.g. %s", t.name, rep+1, res.errs, res.sample)
			}
		}
	}
	r.notes = append(r.notes, fmt.Sprintf("row 10 b: a cluster of 3 primaries (made as in 10 a) as the backend of a proxy with lock_keys = [\"lock:*\"] and the three plain masters of 10 a as voters, vs straight to the cluster; go-redis v9: %d goroutines on one client (a Client to the proxy, a ClusterClient to the cluster; RESP2, pool of %d, no retries), each SET then GET of key:<random below 100000> in turn, %v per run", o.clients, o.clients, o.duration))
	return nil
}
