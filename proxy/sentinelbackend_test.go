package proxy_test

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/redlock-proxy/redlock-proxy/internal/redistest"
	"github.com/redlock-proxy/redlock-proxy/proxy"
)

// sentinelBackendProxy runs an in-process proxy in front of three plain
// masters, its passthrough backend the Sentinel group g (or, with
// voting, a voter: the group as the first master and the backend empty).
// Locks live under lock:*.
func sentinelBackendProxy(t *testing.T, g *redistest.SentinelGroup, voting bool) (*redis.Client, string, *logBuf) {
	t.Helper()
	var cfg proxy.Config
	if voting {
		cfg = testConfig(append([]string{g.URL()}, redistest.Addrs(redistest.StartN(t, 2))...))
	} else {
		cfg = testConfig(redistest.Addrs(redistest.StartN(t, 3)))
		cfg.Proxy.Backend = g.URL()
	}
	cfg.Proxy.LockKeys = []string{"lock:*"}
	e := &env{t: t}
	e.startProxy(cfg)
	c := redis.NewClient(&redis.Options{Addr: e.addr, MaxRetries: -1, Protocol: 2, ReadTimeout: 5 * time.Second})
	t.Cleanup(func() { _ = c.Close() })
	return c, e.addr, e.logs
}

// getOn reads key on one server directly; "" when it does not hold it.
// A read that fails (a timeout on a loaded machine) is tried again, for
// up to 20 s.
func getOn(s *redistest.Server, key string) string {
	c := s.Client()
	defer c.Close()
	for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		v, err := c.Get(context.Background(), key).Result()
		if err == nil || errors.Is(err, redis.Nil) || time.Now().After(deadline) {
			return v
		}
	}
}

// TestSentinelBackendThroughFailover: with proxy.backend a Sentinel group,
// data written through the proxy is read back after SENTINEL FAILOVER from
// the promoted primary, and new writes land there; the sessions that were
// on the old primary are ended as a Sentinel client sees it: a
// subscription is disconnected (and subscribes again, to the new
// primary), a blocking command, a WATCH and an open MULTI answer an
// error, and the transaction runs nowhere. RESP3 clients and the shared
// connection move too.
func TestSentinelBackendThroughFailover(t *testing.T) {
	g := redistest.StartSentinels(t, "app-a")
	c, addr, logs := sentinelBackendProxy(t, g, false)
	ctx := context.Background()
	first := g.Servers[0]

	// A client of database 1 (its own pools, databases.go), written
	// before the writes the replica is waited for below.
	c1 := redis.NewClient(&redis.Options{Addr: addr, MaxRetries: -1, Protocol: 2, DB: 1})
	defer c1.Close()
	if err := c1.Set(ctx, "in-db1", "1", 0).Err(); err != nil {
		t.Fatal(err)
	}
	const n = 50
	for i := range n {
		if err := c.Set(ctx, fmt.Sprintf("k%d", i), fmt.Sprintf("v%d", i), 0).Err(); err != nil {
			t.Fatal(err)
		}
	}
	if v := getOn(first, "k7"); v != "v7" {
		t.Fatalf("k7 on the first primary = %q: the writes did not go to it", v)
	}
	within(t, 20*time.Second, "the replica has the writes", func() bool { return getOn(g.Servers[1], fmt.Sprintf("k%d", n-1)) != "" })
	if ok := quorumAnswer(t, func() (bool, error) { return c.SetNX(ctx, "lock:a", "tok", time.Minute).Result() }); !ok {
		t.Fatal("a lock before the failover was not granted")
	}

	// Sessions on the first primary: a subscription, a blocking pop, a
	// WATCH and an open transaction, and a RESP3 client.
	ps := c.Subscribe(ctx, "news")
	defer ps.Close()
	if _, err := ps.Receive(ctx); err != nil {
		t.Fatal(err)
	}
	blocked := c.Conn()
	defer blocked.Close()
	popped := make(chan error, 1)
	go func() { popped <- blocked.BLPop(ctx, 0, "queue").Err() }()
	within(t, 20*time.Second, "BLPOP waits on the primary", func() bool { return first.InfoField("clients", "blocked_clients") == "1" })
	watcher := c.Conn()
	defer watcher.Close()
	if err := watcher.Do(ctx, "watch", "k1").Err(); err != nil {
		t.Fatal(err)
	}
	tx := c.Conn()
	defer tx.Close()
	if err := tx.Do(ctx, "multi").Err(); err != nil {
		t.Fatal(err)
	}
	if v, err := tx.Do(ctx, "set", "in-tx", "1").Result(); err != nil || v != "QUEUED" {
		t.Fatalf("SET in MULTI = %v, %v", v, err)
	}
	c3 := redis.NewClient(&redis.Options{Addr: addr, MaxRetries: -1, Protocol: 3})
	defer c3.Close()
	if v, err := c3.Get(ctx, "k3").Result(); err != nil || v != "v3" {
		t.Fatalf("RESP3 GET k3 = %q, %v", v, err)
	}

	old, next := g.Failover()
	within(t, 20*time.Second, "INFO shows the backend's switch", func() bool {
		info, _ := c.Info(ctx, "redlock").Result()
		return strings.Contains(info, "backend:sentinel_group=app-a,primary="+next.Addr+",") && strings.Contains(info, "primary_switches=1")
	})
	if !strings.Contains(logs.String(), "moved from "+old.Addr+" to "+next.Addr) {
		t.Fatalf("no log of the switch:\n%s", logs)
	}

	// Each session on the old primary is told.
	if _, err := ps.ReceiveTimeout(ctx, 20*time.Second); err == nil || isTimeout(err) {
		t.Fatalf("the subscription after the failover: %v, want its connection closed", err)
	}
	select {
	case err := <-popped:
		if err == nil || !strings.Contains(err.Error(), "passthrough backend failed") {
			t.Fatalf("BLPOP across the failover = %v, want the lost connection's error", err)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("BLPOP still waits after the failover")
	}
	if err := watcher.Get(ctx, "k1").Err(); err == nil || !strings.Contains(err.Error(), "WATCH was reset") {
		t.Fatalf("a command after WATCH across the failover = %v, want WATCH reset", err)
	}
	if err := tx.Do(ctx, "exec").Err(); err == nil {
		t.Fatal("EXEC of a transaction opened on the old primary succeeded")
	}
	if getOn(next, "in-tx") != "" || getOn(old, "in-tx") != "" {
		t.Fatal("the transaction opened on the old primary ran")
	}

	// Data commands reach the new primary: what was replicated is read,
	// writes succeed there, in RESP2 (the shared connection and pooled
	// ones) and RESP3.
	within(t, 20*time.Second, "a write through the proxy after the failover", func() bool {
		return c.Set(ctx, "after", "yes", 0).Err() == nil
	})
	if v := getOn(next, "after"); v != "yes" {
		t.Fatalf("a write after the failover is not on the new primary %s: %q", next.Addr, v)
	}
	for i := range n {
		if v, err := c.Get(ctx, fmt.Sprintf("k%d", i)).Result(); err != nil || v != fmt.Sprintf("v%d", i) {
			t.Fatalf("GET k%d after the failover = %q, %v", i, v, err)
		}
	}
	pipe := c.Pipeline()
	for range 40 { // more than one shared batch: a connection of its own
		pipe.Incr(ctx, "counter")
	}
	if _, err := pipe.Exec(ctx); err != nil {
		t.Fatalf("a pipeline after the failover: %v", err)
	}
	if v := getOn(next, "counter"); v != "40" {
		t.Fatalf("counter on the new primary = %q", v)
	}
	within(t, 20*time.Second, "a RESP3 write after the failover", func() bool { return c3.Set(ctx, "after3", "yes", 0).Err() == nil })
	if v := getOn(next, "after3"); v != "yes" {
		t.Fatalf("a RESP3 write is not on the new primary: %q", v)
	}
	within(t, 20*time.Second, "a write in database 1 after the failover", func() bool { return c1.Set(ctx, "in-db1-after", "1", 0).Err() == nil })
	next1 := redis.NewClient(&redis.Options{Addr: next.Addr, DB: 1})
	defer next1.Close()
	for _, k := range []string{"in-db1", "in-db1-after"} {
		if v, _ := next1.Get(ctx, k).Result(); v != "1" {
			t.Fatalf("%s in database 1 of the new primary = %q", k, v)
		}
	}
	// The transaction and WATCH work again, on the new primary.
	if _, err := watcher.TxPipelined(ctx, func(p redis.Pipeliner) error {
		p.Set(ctx, "tx-after", "1", 0)
		return nil
	}); err != nil {
		t.Fatalf("MULTI/EXEC after the failover: %v", err)
	}
	if getOn(next, "tx-after") != "1" {
		t.Fatal("a transaction after the failover is not on the new primary")
	}
	// The subscription, subscribed again, hears what is published now.
	msgs := ps.Channel()
	within(t, 20*time.Second, "a message reaches the subscriber again", func() bool {
		_ = c.Publish(ctx, "news", "hello").Err()
		select {
		case m := <-msgs:
			return m.Payload == "hello"
		case <-time.After(200 * time.Millisecond):
			return false
		}
	})
	// Locks are the masters' business, untouched by the backend's failover.
	if released := quorumAnswer(t, func() (bool, error) {
		n, err := c.Eval(ctx, `if redis.call("get",KEYS[1]) == ARGV[1] then return redis.call("del",KEYS[1]) else return 0 end`, []string{"lock:a"}, "tok").Int()
		return n == 1, err
	}); !released {
		t.Fatal("unlock after the backend's failover released nothing")
	}
}

// quorumAnswer runs a lock operation until it answers without an error
// (NOQUORUM while a loaded machine makes masters miss their node
// timeout), for up to 20 s, and returns its answer.
func quorumAnswer(t *testing.T, op func() (bool, error)) bool {
	t.Helper()
	var ok bool
	var err error
	for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		if ok, err = op(); err == nil {
			return ok
		}
		if !strings.HasPrefix(err.Error(), "NOQUORUM") || time.Now().After(deadline) {
			t.Fatalf("lock operation: %v", err)
		}
	}
}

// isTimeout reports whether err is a deadline that passed.
func isTimeout(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}

// TestSentinelBackendKilledPrimary: the backend's primary killed, the
// sentinels promote the replica and the proxy's data commands reach it,
// with the data it had received.
func TestSentinelBackendKilledPrimary(t *testing.T) {
	g := redistest.StartSentinels(t, "app-k")
	c, _, _ := sentinelBackendProxy(t, g, false)
	ctx := context.Background()
	if err := c.Set(ctx, "before", "1", 0).Err(); err != nil {
		t.Fatal(err)
	}
	within(t, 20*time.Second, "the replica has the write", func() bool { return getOn(g.Servers[1], "before") == "1" })
	ps := c.Subscribe(ctx, "news")
	defer ps.Close()
	if _, err := ps.Receive(ctx); err != nil {
		t.Fatal(err)
	}
	old := g.KillPrimary()
	if _, err := ps.ReceiveTimeout(ctx, 20*time.Second); err == nil || isTimeout(err) {
		t.Fatalf("the subscription after its primary was killed: %v, want its connection closed", err)
	}
	next := g.WaitPrimary(old)
	within(t, 30*time.Second, "a write through the proxy after the failover", func() bool {
		return c.Set(ctx, "after", "1", 0).Err() == nil
	})
	if getOn(next, "after") != "1" {
		t.Fatalf("the write is not on the promoted primary %s", next.Addr)
	}
	if v, err := c.Get(ctx, "before").Result(); err != nil || v != "1" {
		t.Fatalf("GET before = %q, %v", v, err)
	}
}

// TestSentinelVotingBackend: with proxy.backend empty and the first
// master a Sentinel group, the backend is that voter's group: data
// commands follow its failover, and commands on lock keys stay refused
// (a voting backend).
func TestSentinelVotingBackend(t *testing.T) {
	g := redistest.StartSentinels(t, "app-v")
	c, _, _ := sentinelBackendProxy(t, g, true)
	ctx := context.Background()
	if err := c.Set(ctx, "data", "1", 0).Err(); err != nil {
		t.Fatal(err)
	}
	if getOn(g.Servers[0], "data") != "1" {
		t.Fatal("the write is not on the group's primary")
	}
	if ok := quorumAnswer(t, func() (bool, error) { return c.SetNX(ctx, "lock:v", "tok", time.Minute).Result() }); !ok {
		t.Fatal("a lock was not granted")
	}
	if err := c.Incr(ctx, "lock:v").Err(); err == nil || !strings.Contains(err.Error(), "not served by the quorum") {
		t.Fatalf("INCR of a lock key on a voting backend = %v, want it refused", err)
	}
	within(t, 20*time.Second, "the replica has the write", func() bool { return getOn(g.Servers[1], "data") == "1" })
	_, next := g.Failover()
	within(t, 20*time.Second, "a write through the proxy after the failover", func() bool {
		return c.Set(ctx, "after", "1", 0).Err() == nil && getOn(next, "after") == "1"
	})
	if v, err := c.Get(ctx, "data").Result(); err != nil || v != "1" {
		t.Fatalf("GET data after the failover = %q, %v", v, err)
	}
	if err := c.Incr(ctx, "lock:v").Err(); err == nil || !strings.Contains(err.Error(), "not served by the quorum") {
		t.Fatalf("INCR of a lock key after the failover = %v, want it refused", err)
	}
}

// TestSentinelBackendBinary runs the proxy binary with the backend given
// as a Sentinel group by REDLOCK_PROXY_BACKEND (the -backend flag's
// variable), every key a lock key (mixed mode, as scripts/run.sh runs
// it): data and the lock's mirror land on the group's primary, and after
// SENTINEL FAILOVER on the promoted one.
func TestSentinelBackendBinary(t *testing.T) {
	g := redistest.StartSentinels(t, "app-bin")
	masters := redistest.StartN(t, 3)
	p := redistest.StartProxy(t, proxyBinary(t), func(listen string) string {
		return fmt.Sprintf("[proxy]\nlisten = %q\nbackend = \"127.0.0.1:1\"\n[redlock]\nmasters = [%s]\nrestart_guard = false\nnode_timeout = \"200ms\"\n[log]\nlevel = \"warn\"\n",
			listen, redistest.Quote(redistest.Addrs(masters)))
	}, redistest.WithEnv("REDLOCK_PROXY_BACKEND="+g.URL()))
	c := p.Client()
	defer c.Close()
	ctx := context.Background()
	if err := c.Set(ctx, "data", "1", 0).Err(); err != nil {
		t.Fatal(err)
	}
	if ok := quorumAnswer(t, func() (bool, error) { return c.SetNX(ctx, "lock", "tok", time.Minute).Result() }); !ok {
		t.Fatal("SET NX was not granted")
	}
	if d, l := getOn(g.Servers[0], "data"), getOn(g.Servers[0], "lock"); d != "1" || l != "tok" {
		t.Fatalf("on the group's primary %s: data %q, the lock's mirror %q; the sentinels name %v", g.Servers[0].Addr, d, l, g.Primary())
	}
	within(t, 20*time.Second, "the replica has the writes", func() bool { return getOn(g.Servers[1], "lock") == "tok" })
	_, next := g.Failover()
	within(t, 20*time.Second, "a write through the proxy after the failover", func() bool {
		return c.Set(ctx, "after", "1", 0).Err() == nil && getOn(next, "after") == "1"
	})
	if v, err := c.Get(ctx, "data").Result(); err != nil || v != "1" {
		t.Fatalf("GET data after the failover = %q, %v", v, err)
	}
	if ok := quorumAnswer(t, func() (bool, error) { return c.SetNX(ctx, "lock", "other", time.Minute).Result() }); ok {
		t.Fatal("SET NX of a held lock after the backend's failover was granted")
	}
}
