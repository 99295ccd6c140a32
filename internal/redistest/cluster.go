package redistest

import (
	"context"
	"fmt"
	"os/exec"
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
	t     testing.TB
}

// clusterWait bounds how long the cluster takes to agree on its slots.
const clusterWait = 30 * time.Second

// StartCluster starts shards primaries, each with replicas replicas, and
// joins them into one cluster whose slots are split evenly among the
// primaries. Extra arguments go to every node.
func StartCluster(t testing.TB, shards, replicas int, extra ...string) *Cluster {
	t.Helper()
	if shards < 3 {
		// redis-cli --cluster create wants at least three primaries.
		t.Fatalf("a cluster needs at least 3 shards, not %d", shards)
	}
	args := append([]string{"--cluster-enabled", "yes", "--cluster-config-file", "nodes.conf",
		"--cluster-node-timeout", "2000", "--repl-diskless-sync-delay", "0"}, extra...)
	c := &Cluster{t: t, Nodes: StartN(t, shards*(1+replicas), args...)}
	create := append([]string{"--cluster", "create"}, Addrs(c.Nodes)...)
	create = append(create, "--cluster-replicas", strconv.Itoa(replicas), "--cluster-yes")
	if out, err := exec.Command("redis-cli", create...).CombinedOutput(); err != nil {
		t.Fatalf("redis-cli --cluster create: %v\n%s", err, out)
	}
	c.waitOK()
	return c
}

// Addrs lists every node's address.
func (c *Cluster) Addrs() []string { return Addrs(c.Nodes) }

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
			for _, n := range c.Nodes {
				if n.Addr == s.Nodes[0].Addr {
					return n
				}
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
