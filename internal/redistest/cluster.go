package redistest

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// Cluster is a Redis Cluster of real redis-server processes on loopback,
// made with redis-cli --cluster create.
type Cluster struct {
	Nodes []*Server // the primaries first (shards of them), then the replicas
	// Relays, for a cluster started behind relays, are in front of Nodes,
	// one each: the address each node announces (StartClusterBehindRelays).
	Relays []*Relay
	t      testing.TB
}

// clusterWait bounds how long the cluster takes to agree on its slots.
const clusterWait = 30 * time.Second

// StartCluster starts shards primaries, each with replicas replicas, and
// joins them into one cluster whose slots are split evenly among the
// primaries. Extra arguments go to every node.
func StartCluster(t testing.TB, shards, replicas int, extra ...string) *Cluster {
	t.Helper()
	c := startClusterNodes(t, shards, replicas, extra)
	c.create(replicas)
	return c
}

// startClusterNodes starts the nodes of a cluster, not yet joined.
func startClusterNodes(t testing.TB, shards, replicas int, extra []string) *Cluster {
	t.Helper()
	if shards < 3 {
		// redis-cli --cluster create wants at least three primaries.
		t.Fatalf("a cluster needs at least 3 shards, not %d", shards)
	}
	args := append([]string{"--cluster-enabled", "yes", "--cluster-config-file", "nodes.conf",
		"--cluster-node-timeout", "2000", "--repl-diskless-sync-delay", "0"}, extra...)
	return &Cluster{t: t, Nodes: StartN(t, shards*(1+replicas), args...)}
}

// StartClusterBehindRelays is StartCluster with each node behind a fault
// relay of its own, whose address the node announces
// (cluster-announce-port): the cluster's clients, and the replicas of a
// shard, reach a node through its relay, while the cluster bus connects
// the nodes directly. Holding a relay's traffic back (Delay) or the
// replication stream alone (ReplDelay) then acts on what the cluster's
// clients see, as it does for a plain server.
func StartClusterBehindRelays(t testing.TB, shards, replicas int, extra ...string) *Cluster {
	t.Helper()
	c := startClusterNodes(t, shards, replicas, extra)
	for _, n := range c.Nodes {
		r := NewRelay(t, n.Addr)
		_, port, _ := strings.Cut(r.Addr(), ":")
		// The bus port stays the node's own (its port + 10000).
		announce := []string{"--cluster-announce-ip", "127.0.0.1", "--cluster-announce-port", port,
			"--cluster-announce-bus-port", strconv.Itoa(n.Port + 10000)}
		rc := n.Client()
		for i := 0; i < len(announce); i += 2 {
			if err := rc.ConfigSet(context.Background(), announce[i][2:], announce[i+1]).Err(); err != nil {
				t.Fatalf("%s: CONFIG SET %s: %v", n.Addr, announce[i][2:], err)
			}
		}
		rc.Close()
		n.args = append(n.args, announce...) // kept across restarts
		c.Relays = append(c.Relays, r)
	}
	c.create(replicas)
	return c
}

// create joins the nodes into one cluster with redis-cli --cluster create.
func (c *Cluster) create(replicas int) {
	t := c.t
	t.Helper()
	create := append([]string{"--cluster", "create"}, c.Addrs()...)
	create = append(create, "--cluster-replicas", strconv.Itoa(replicas), "--cluster-yes")
	if out, err := exec.Command("redis-cli", create...).CombinedOutput(); err != nil {
		t.Fatalf("redis-cli --cluster create: %v\n%s", err, out)
	}
	c.waitOK()
}

// Addrs lists every node's address: the one it announces (its relay's,
// behind relays).
func (c *Cluster) Addrs() []string {
	out := make([]string, len(c.Nodes))
	for i := range c.Nodes {
		out[i] = c.addrOf(i)
	}
	return out
}

// addrOf is the address node i announces.
func (c *Cluster) addrOf(i int) string {
	if c.Relays != nil {
		return c.Relays[i].Addr()
	}
	return c.Nodes[i].Addr
}

// byAddr is the node that announces addr (nil: none).
func (c *Cluster) byAddr(addr string) *Server {
	for i, n := range c.Nodes {
		if c.addrOf(i) == addr {
			return n
		}
	}
	return nil
}

// RelayOf is the relay in front of node s (nil when not behind relays).
func (c *Cluster) RelayOf(s *Server) *Relay {
	for i, n := range c.Nodes {
		if n == s && c.Relays != nil {
			return c.Relays[i]
		}
	}
	return nil
}

// Client returns a cluster client of the nodes.
func (c *Cluster) Client() *redis.ClusterClient {
	return redis.NewClusterClient(&redis.ClusterOptions{Addrs: c.Addrs(), MaxRedirects: 8, DialTimeout: time.Second, Protocol: 2})
}

// waitOK waits until every node says cluster_state:ok and knows every
// other node.
func (c *Cluster) waitOK() {
	c.t.Helper()
	deadline := time.Now().Add(clusterWait)
	for {
		ok := true
		for _, n := range c.Nodes {
			rc := n.Client()
			info, err := rc.ClusterInfo(context.Background()).Result()
			rc.Close()
			if err != nil || !strings.Contains(info, "cluster_state:ok") ||
				!strings.Contains(info, fmt.Sprintf("cluster_known_nodes:%d\r\n", len(c.Nodes))) {
				ok = false
				break
			}
		}
		if ok {
			return
		}
		if time.Now().After(deadline) {
			c.t.Fatalf("the cluster did not agree on its state within %s", clusterWait)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// Owner returns the primary that serves key's slot now, as the nodes say.
func (c *Cluster) Owner(key string) *Server {
	c.t.Helper()
	rc := c.Nodes[0].Client()
	defer rc.Close()
	slot, err := rc.ClusterKeySlot(context.Background(), key).Result()
	if err != nil {
		c.t.Fatal(err)
	}
	//lint:ignore SA1019 the proxy reads CLUSTER SLOTS (Redis 6 has no CLUSTER SHARDS): so does the test.
	slots, err := rc.ClusterSlots(context.Background()).Result()
	if err != nil {
		c.t.Fatal(err)
	}
	for _, s := range slots {
		if int64(s.Start) <= slot && slot <= int64(s.End) && len(s.Nodes) > 0 {
			if n := c.byAddr(s.Nodes[0].Addr); n != nil {
				return n
			}
		}
	}
	c.t.Fatalf("no node serves slot %d", slot)
	return nil
}

// Reshard moves n slots from the primary from to the primary to with
// redis-cli --cluster reshard, and waits until the cluster agrees again.
func (c *Cluster) Reshard(from, to *Server, n int) {
	c.t.Helper()
	id := func(s *Server) string {
		rc := s.Client()
		defer rc.Close()
		v, err := rc.Do(context.Background(), "cluster", "myid").Text()
		if err != nil {
			c.t.Fatal(err)
		}
		return v
	}
	out, err := exec.Command("redis-cli", "--cluster", "reshard", c.Nodes[0].Addr,
		"--cluster-from", id(from), "--cluster-to", id(to), "--cluster-slots", strconv.Itoa(n), "--cluster-yes").CombinedOutput()
	if err != nil {
		c.t.Fatalf("redis-cli --cluster reshard: %v\n%s", err, out)
	}
	c.waitOK()
}

// ID is node s's cluster node id.
func (c *Cluster) ID(s *Server) (string, error) {
	rc := s.Client()
	defer rc.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	return rc.Do(ctx, "cluster", "myid").Text()
}

// Shard is one shard of a cluster as a node's CLUSTER SLOTS has it.
type Shard struct {
	Primary  *Server
	Replicas []*Server
	Slots    int      // how many slots it serves
	Lowest   int      // the lowest of them
	Ranges   [][2]int // the slots it serves, first to last of each range
}

// Serves reports whether the shard serves slot.
func (s Shard) Serves(slot int) bool {
	for _, r := range s.Ranges {
		if r[0] <= slot && slot <= r[1] {
			return true
		}
	}
	return false
}

// Shards lists the shards as the first node that answers says they are
// now (CLUSTER NODES), in the order of their lowest slot; nodes this
// cluster did not start are left out.
func (c *Cluster) Shards() ([]Shard, error) {
	var errs []string
	for i, n := range c.Nodes {
		if n.cmd == nil {
			continue
		}
		rc := n.Client()
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		text, err := rc.ClusterNodes(ctx).Result()
		cancel()
		rc.Close()
		if err != nil {
			errs = append(errs, fmt.Sprintf("%s: %v", c.addrOf(i), err))
			continue
		}
		byID := map[string]*Shard{}
		replicaOf := map[*Server]string{}
		for _, line := range strings.Split(text, "\n") {
			f := strings.Fields(line)
			if len(f) < 8 {
				continue
			}
			addr, _, _ := strings.Cut(f[1], "@")
			node := c.byAddr(addr)
			if node == nil {
				continue
			}
			flags := f[2]
			switch {
			case strings.Contains(flags, "slave"):
				replicaOf[node] = f[3]
			case strings.Contains(flags, "master") && len(f) > 8:
				sh := &Shard{Primary: node, Lowest: numSlots}
				for _, r := range f[8:] {
					if strings.HasPrefix(r, "[") {
						continue // a slot migrating or importing
					}
					lo, hi, ok := strings.Cut(r, "-")
					a, _ := strconv.Atoi(lo)
					b := a
					if ok {
						b, _ = strconv.Atoi(hi)
					}
					sh.Slots += b - a + 1
					sh.Lowest = min(sh.Lowest, a)
					sh.Ranges = append(sh.Ranges, [2]int{a, b})
				}
				if sh.Slots > 0 {
					byID[f[0]] = sh
				}
			}
		}
		for r, id := range replicaOf {
			if sh := byID[id]; sh != nil {
				sh.Replicas = append(sh.Replicas, r)
			}
		}
		var res []Shard
		for _, sh := range byID {
			res = append(res, *sh)
		}
		sort.Slice(res, func(a, b int) bool { return res[a].Lowest < res[b].Lowest })
		return res, nil
	}
	return nil, fmt.Errorf("no node answers CLUSTER NODES: %s", strings.Join(errs, "; "))
}

// numSlots is the number of hash slots of a Redis Cluster.
const numSlots = 16384

// MoveSlot moves slot from the primary from to the primary to as redis-cli
// --cluster reshard does, one step after another: to IMPORTING, from
// MIGRATING, pause, the slot's keys MIGRATEd (with their TTLs) a few at a
// time, then the slot given to to on every primary. Between the steps
// clients meet ASK and MOVED replies. It returns how many keys moved.
func (c *Cluster) MoveSlot(slot int, from, to *Server, pause time.Duration) (int, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	fromID, err := c.ID(from)
	if err != nil {
		return 0, err
	}
	toID, err := c.ID(to)
	if err != nil {
		return 0, err
	}
	fc, tc := from.Client(), to.Client()
	defer fc.Close()
	defer tc.Close()
	if err := tc.Do(ctx, "cluster", "setslot", slot, "importing", fromID).Err(); err != nil {
		return 0, fmt.Errorf("%s: SETSLOT IMPORTING: %w", to.Addr, err)
	}
	if err := fc.Do(ctx, "cluster", "setslot", slot, "migrating", toID).Err(); err != nil {
		return 0, fmt.Errorf("%s: SETSLOT MIGRATING: %w", from.Addr, err)
	}
	time.Sleep(pause)
	// A step refused while a node is not serving (CLUSTERDOWN just after
	// a restart) is tried again until ctx ends: a slot left migrating
	// would refuse its keys' commands for good.
	retry := func(step func() error) error {
		for {
			err := step()
			if err == nil || ctx.Err() != nil {
				return err
			}
			time.Sleep(100 * time.Millisecond)
		}
	}
	moved := 0
	host, port, _ := strings.Cut(to.Addr, ":")
	for {
		var keys []string
		err := retry(func() (err error) {
			keys, err = fc.Do(ctx, "cluster", "getkeysinslot", slot, 3).StringSlice()
			return err
		})
		if err != nil {
			return moved, fmt.Errorf("%s: GETKEYSINSLOT: %w", from.Addr, err)
		}
		if len(keys) == 0 {
			break
		}
		args := []any{"migrate", host, port, "", 0, 5000, "keys"}
		for _, k := range keys {
			args = append(args, k)
		}
		if err := retry(func() error { return fc.Do(ctx, args...).Err() }); err != nil {
			return moved, fmt.Errorf("%s: MIGRATE: %w", from.Addr, err)
		}
		moved += len(keys)
		time.Sleep(pause / 4)
	}
	for _, n := range []*redis.Client{tc, fc} {
		if err := retry(func() error { return n.Do(ctx, "cluster", "setslot", slot, "node", toID).Err() }); err != nil {
			return moved, fmt.Errorf("SETSLOT NODE: %w", err)
		}
	}
	if sh, err := c.Shards(); err == nil {
		for _, s := range sh {
			if s.Primary != from && s.Primary != to {
				pc := s.Primary.Client()
				_ = pc.Do(ctx, "cluster", "setslot", slot, "node", toID).Err()
				pc.Close()
			}
		}
	}
	return moved, nil
}

// WipeData kills the server, removes its data (the RDB and AOF files)
// but keeps its cluster configuration (nodes.conf), and starts it again:
// a cluster node that lost its data and comes back as the same node (its
// node id, its slots) — a volume of data lost, the node's configuration
// kept. Wipe removes nodes.conf too, and the node would come back a
// stranger to its cluster.
func (s *Server) WipeData() {
	s.t.Helper()
	s.Kill()
	entries, err := os.ReadDir(s.Dir)
	if err != nil {
		s.t.Fatal(err)
	}
	for _, e := range entries {
		if e.Name() == "nodes.conf" {
			continue
		}
		if err := os.RemoveAll(filepath.Join(s.Dir, e.Name())); err != nil {
			s.t.Fatal(err)
		}
	}
	s.start()
}
