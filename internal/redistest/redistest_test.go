package redistest

import (
	"bufio"
	"bytes"
	"context"
	"net"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// A test binary that dies without its cleanups (a panic, os.Exit) takes its
// redis-servers with it: they would otherwise keep running, and their ports.
func TestServersDieWithACrashedTest(t *testing.T) {
	if os.Getenv("REDISTEST_CRASH") == "1" {
		s := Start(t)
		os.Stdout.WriteString("addr " + s.Addr + "\n")
		os.Exit(3) // no cleanup runs
	}
	Require(t)
	cmd := exec.Command(os.Args[0], "-test.run", "^TestServersDieWithACrashedTest$")
	cmd.Env = append(os.Environ(), "REDISTEST_CRASH=1")
	out, _ := cmd.Output()
	var addr string
	for sc := bufio.NewScanner(bytes.NewReader(out)); sc.Scan(); {
		if a, ok := strings.CutPrefix(sc.Text(), "addr "); ok {
			addr = a
		}
	}
	if addr == "" {
		t.Fatalf("the crashing test printed no address: %q", out)
	}
	deadline := time.Now().Add(5 * time.Second)
	for {
		c, err := net.DialTimeout("tcp", addr, time.Second)
		if err != nil {
			return // gone
		}
		c.Close()
		if time.Now().After(deadline) {
			rc := redis.NewClient(&redis.Options{Addr: addr, MaxRetries: -1})
			_ = rc.Shutdown(context.Background()).Err()
			rc.Close()
			t.Fatalf("the redis-server on %s outlived the test binary that started it by 5 s", addr)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func TestSentinelGroupFailover(t *testing.T) {
	g := StartSentinels(t, "harness")
	if p := g.Primary(); p != g.Servers[0] {
		t.Fatalf("primary %v, want %v", p, g.Servers[0])
	}
	old, next := g.Failover()
	if old != g.Servers[0] || next != g.Servers[1] {
		t.Fatalf("failover %v -> %v", old, next)
	}
}

func TestSentinelGroupKilledPrimary(t *testing.T) {
	g := StartSentinels(t, "harness-kill")
	old := g.KillPrimary()
	if next := g.WaitPrimary(old); next != g.Servers[1] {
		t.Fatalf("promoted %v, want %v", next, g.Servers[1])
	}
}

// A cluster of three shards forms, serves a key on the owner of its slot,
// and moves slots between shards.
func TestStartCluster(t *testing.T) {
	c := StartCluster(t, 3, 0)
	rc := c.Client()
	defer rc.Close()
	ctx := context.Background()
	if err := rc.Set(ctx, "k", "v", 0).Err(); err != nil {
		t.Fatal(err)
	}
	owner := c.Owner("k")
	oc := owner.Client()
	defer oc.Close()
	if v, err := oc.Get(ctx, "k").Result(); v != "v" || err != nil {
		t.Fatalf("the owner of k's slot answers %q %v", v, err)
	}
	var to *Server
	for _, n := range c.Nodes {
		if n != owner {
			to = n
			break
		}
	}
	c.Reshard(owner, to, 100)
	if v, err := rc.Get(ctx, "k").Result(); v != "v" || err != nil {
		t.Fatalf("after resharding: %q %v", v, err)
	}
}

// A relay's ReplDelay holds back the replication stream alone: a write
// through the relay is answered, and does not reach the replica that
// follows the server through the same relay until the delay is cleared.
func TestRelayHoldsBackReplication(t *testing.T) {
	primary, replica := Start(t, "--repl-diskless-sync-delay", "0"), Start(t)
	r := NewRelay(t, primary.Addr)
	host, port, _ := strings.Cut(r.Addr(), ":")
	ctx := context.Background()
	rc := replica.Client()
	defer rc.Close()
	if err := rc.Do(ctx, "replicaof", host, port).Err(); err != nil {
		t.Fatal(err)
	}
	synced := func(key string) bool {
		deadline := time.Now().Add(15 * time.Second)
		for time.Now().Before(deadline) {
			if rc.Exists(ctx, key).Val() == 1 {
				return true
			}
			time.Sleep(20 * time.Millisecond)
		}
		return false
	}
	c := redis.NewClient(&redis.Options{Addr: r.Addr(), Protocol: 2})
	defer c.Close()
	if err := c.Set(ctx, "before", "1", 0).Err(); err != nil || !synced("before") {
		t.Fatalf("the replica does not follow through the relay (%v)", err)
	}
	r.ReplDelay.Store(int64(30 * time.Second))
	if err := c.Set(ctx, "held", "1", 0).Err(); err != nil {
		t.Fatalf("a write through the relay while replication is held back: %v", err)
	}
	time.Sleep(300 * time.Millisecond)
	if rc.Exists(ctx, "held").Val() != 0 {
		t.Fatal("the replica got a write while its stream was held back")
	}
	r.ReplDelay.Store(0)
	r.Reset() // the replica reconnects and catches up
	if !synced("held") {
		t.Fatal("the replica did not catch up once the stream was let through")
	}
}
