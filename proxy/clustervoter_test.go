package proxy_test

import (
	"context"
	"fmt"
	"os/exec"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/redlock-proxy/redlock-proxy/internal/redistest"
	"github.com/redlock-proxy/redlock-proxy/proxy"
)

func TestClusterMasterConfig(t *testing.T) {
	cfg := func(backend string, masters ...string) proxy.Config {
		c := proxy.DefaultConfig()
		c.Proxy.Backend = backend
		c.Redlock.Masters = masters
		return c
	}
	cluster := "cluster://10.0.0.1:7000,10.0.0.2:7001/"
	for _, c := range []proxy.Config{
		cfg("127.0.0.1:6379", cluster, "10.0.0.3:6379", "10.0.0.4:6379"),
		cfg("", "10.0.0.3:6379", cluster, "cluster://10.0.0.5:7000"),
	} {
		if err := c.Validate(); err != nil {
			t.Errorf("%v: %v", c.Redlock.Masters, err)
		}
	}
	for _, tc := range []struct {
		cfg  proxy.Config
		want string
	}{
		{cfg("", cluster, "10.0.0.3:6379", "10.0.0.4:6379"), "give the proxy a backend of its own (proxy.backend) when the first voter is a cluster"},
		{cfg("b:1", "cluster:///"), "no seed node is given"},
		{cfg("b:1", "cluster://h1/"), "not host:port"},
		{cfg("b:1", "cluster://h:1/x"), "nothing may follow"},
		{cfg("b:1", "cluster://u:p@h:1/"), "credentials go in the masters' own settings"},
		{cfg("b:1", cluster, cluster), "listed twice"},
	} {
		err := tc.cfg.Validate()
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%v: %v, want an error saying %q", tc.cfg.Redlock.Masters, err, tc.want)
		}
	}
	for in, want := range map[string][]string{
		"cluster://a:1,b:2/,c:3":              {"cluster://a:1,b:2/", "c:3"},
		"c:3,cluster://a:1,b:2/,d:4":          {"c:3", "cluster://a:1,b:2/", "d:4"},
		"cluster://a:1/,sentinel://s:1/g,e:5": {"cluster://a:1/", "sentinel://s:1/g", "e:5"},
	} {
		if got := proxy.SplitMasters(in); !slices.Equal(got, want) {
			t.Errorf("SplitMasters(%q) = %q, want %q", in, got, want)
		}
	}
}

// TestClusterVoterThroughProxy runs the proxy binary in front of a voter
// given as a three-shard Redis Cluster and two plain masters: a lock lands
// on the shard that owns its key, is released by the usual script, and
// INFO shows the cluster's shards.
func TestClusterVoterThroughProxy(t *testing.T) {
	cl := redistest.StartCluster(t, 3, 0)
	plain := redistest.StartN(t, 2)
	backend := redistest.Start(t)
	masters := append([]string{"cluster://" + cl.Nodes[0].Addr + "/"}, redistest.Addrs(plain)...)
	p := redistest.StartProxy(t, proxyBinary(t), func(listen string) string {
		return fmt.Sprintf("[proxy]\nlisten = %q\nbackend = %q\n[redlock]\nmasters = [%s]\nquorum = 3\nrestart_guard = false\nnode_timeout = \"500ms\"\n[log]\nlevel = \"warn\"\n",
			listen, backend.Addr, redistest.Quote(masters))
	})
	c := p.Client()
	defer c.Close()
	ctx := context.Background()
	unlock := `if redis.call("get",KEYS[1]) == ARGV[1] then return redis.call("del",KEYS[1]) else return 0 end`
	for i := 0; i < 20; i++ {
		key := fmt.Sprintf("job:%d", i)
		if ok, err := c.SetNX(ctx, key, "tok", 30*time.Second).Result(); err != nil || !ok {
			t.Fatalf("SET NX PX %s = %v, %v", key, ok, err)
		}
		rc := cl.Owner(key).Client()
		v, _ := rc.Get(ctx, key).Result()
		rc.Close()
		if v != "tok" {
			t.Fatalf("%s is not on the shard that owns it (%q)", key, v)
		}
		if n, err := c.Eval(ctx, unlock, []string{key}, "tok").Int(); err != nil || n != 1 {
			t.Fatalf("unlock %s = %d, %v", key, n, err)
		}
	}
	info, err := c.Info(ctx, "redlock").Result()
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(info, "cluster_shards=3,cluster_slot_map=1,cluster_shards_guarded=0") || !strings.Contains(info, "master0_shard2:addr=") {
		t.Fatalf("INFO redlock does not show the cluster's shards:\n%s", info)
	}
}

// `redlock-proxy -init-masters` declares a cluster voter's shards a new
// deployment: with the restart guard on and fresh durable nodes, the
// proxy's first lock is granted at once on a key of each shard; without
// it, those shards are guarded for the window.
func TestInitMastersClusterVoterBinary(t *testing.T) {
	durable := []string{"--appendonly", "yes", "--appendfsync", "always"}
	cl := redistest.StartCluster(t, 3, 0, durable...)
	plain := redistest.StartN(t, 2, durable...)
	backend := redistest.Start(t)
	masters := append([]string{"cluster://" + cl.Nodes[0].Addr + "/"}, redistest.Addrs(plain)...)
	config := func(listen string) string {
		return fmt.Sprintf("[proxy]\nlisten = %q\nbackend = %q\n[redlock]\nmasters = [%s]\nnode_timeout = \"500ms\"\nretry_count = 0\nrestart_guard = true\nrestart_guard_window = \"1m\"\n[log]\nlevel = \"warn\"\n",
			listen, backend.Addr, redistest.Quote(masters))
	}
	ctx := context.Background()
	keyOf := func(n *redistest.Server) string {
		for i := 0; ; i++ {
			if k := fmt.Sprintf("first:%d", i); cl.Owner(k) == n {
				return k
			}
		}
	}
	bin := proxyBinary(t)
	before := redistest.StartProxy(t, bin, config)
	c := before.Client()
	_, err := c.SetNX(ctx, keyOf(cl.Nodes[0]), "tok", 30*time.Second).Result()
	c.Close()
	if err == nil || !strings.Contains(err.Error(), "restart guard") {
		t.Fatalf("fresh shards, not declared: SET NX PX gave %v, want NOQUORUM naming the restart guard", err)
	}
	before.Kill()
	if out, err := exec.Command(bin, "-config", before.Config, "-init-masters").CombinedOutput(); err != nil {
		t.Fatalf("-init-masters: %v\n%s", err, out)
	}
	p := redistest.StartProxy(t, bin, config)
	c = p.Client()
	defer c.Close()
	for _, n := range cl.Nodes {
		k := keyOf(n)
		if ok, err := c.SetNX(ctx, k, "tok", 30*time.Second).Result(); err != nil || !ok {
			t.Fatalf("declared: SET NX PX %s (shard %s) = %v, %v", k, n.Addr, ok, err)
		}
	}
}
