package proxy_test

import (
	"context"
	"strings"
	"testing"

	"github.com/redlock-proxy/redlock-proxy/internal/redistest"
	"github.com/redlock-proxy/redlock-proxy/proxy"
)

// clusterEnv is a proxy whose backend is a Redis Cluster of three
// primaries.
func clusterEnv(t *testing.T, mutate func(*proxy.Config)) (*env, *redistest.Cluster) {
	t.Helper()
	cl := redistest.StartCluster(t, 3, 0)
	e := newEnv(t, 3, func(cfg *proxy.Config) {
		cfg.Proxy.Backend = "cluster://" + strings.Join(cl.Addrs(), ",")
		if mutate != nil {
			mutate(cfg)
		}
	})
	return e, cl
}

// Single-key commands reach the primary of their slot, and multi-key
// commands across slots are split, through a client that knows nothing
// of the cluster.
func TestClusterBackendRoutesBySlot(t *testing.T) {
	e, cl := clusterEnv(t, nil)
	ctx := context.Background()
	cc := cl.Client()
	defer cc.Close()
	keys := []string{"a", "b", "c", "d", "e", "f", "{t}1", "{t}2"}
	for _, k := range keys {
		if err := e.c.Set(ctx, k, "v"+k, 0).Err(); err != nil {
			t.Fatalf("SET %s: %v", k, err)
		}
	}
	owners := map[string]bool{}
	for _, k := range keys {
		owner := cl.Owner(k)
		owners[owner.Addr] = true
		rc := owner.Client()
		v, err := rc.Get(ctx, k).Result()
		rc.Close()
		if err != nil || v != "v"+k {
			t.Fatalf("%s on its owner %s: %q %v", k, owner.Addr, v, err)
		}
	}
	if len(owners) < 2 {
		t.Fatalf("the keys landed on %d primaries", len(owners))
	}
	got, err := e.c.MGet(ctx, append(keys, "nope")...).Result()
	if err != nil {
		t.Fatal(err)
	}
	for i, k := range keys {
		if got[i] != "v"+k {
			t.Fatalf("MGET %s: %v", k, got[i])
		}
	}
	if got[len(keys)] != nil {
		t.Fatalf("MGET of a missing key: %v", got[len(keys)])
	}
	if n, err := e.c.Exists(ctx, keys...).Result(); err != nil || n != int64(len(keys)) {
		t.Fatalf("EXISTS: %d %v", n, err)
	}
	if n, err := e.c.DBSize(ctx).Result(); err != nil || n != int64(len(keys)) {
		t.Fatalf("DBSIZE: %d %v", n, err)
	}
	if n, err := e.c.Del(ctx, keys...).Result(); err != nil || n != int64(len(keys)) {
		t.Fatalf("DEL: %d %v", n, err)
	}
	if err := e.c.SUnionStore(ctx, "x", "a", "b").Err(); err == nil || !strings.HasPrefix(err.Error(), "CROSSSLOT") {
		t.Fatalf("SUNIONSTORE across slots: %v", err)
	}
}
