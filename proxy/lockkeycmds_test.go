package proxy_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/redlock-proxy/redlock-proxy/internal/redistest"
	"github.com/redlock-proxy/redlock-proxy/proxy"
)

const notServed = "is not served by the quorum"

// With lock keys of their own (proxy.lock_keys = ["lock:*"]), a command the
// quorum does not serve is refused on a lock key, wherever the key is among
// its arguments (fixed positions, a subcommand's, keys that move with the
// arguments, in MULTI, pipelined), and nothing reaches any master; the same
// commands on other keys pass through, and channels are not keys.
func TestLockKeyCommandsRefused(t *testing.T) {
	e := newEnv(t, 3, func(c *proxy.Config) { c.Proxy.LockKeys = []string{"lock:*"} })
	ctx := context.Background()
	lk, other := "lock:"+e.key("a"), e.key("other")
	mustEqual(t, "SET NX", must(e.do("SET", lk, "t", "NX", "PX", 10000)), any("OK"))
	refused := [][]any{
		{"INCR", lk},
		{"APPEND", lk, "x"},
		{"HSET", lk, "f", "v"},
		{"HGET", lk, "f"}, // not a Redisson holder's field
		{"ZADD", lk, 1, "m"},
		{"LPUSH", lk, "x"},
		{"RENAME", lk, other},
		{"RENAME", other, lk},
		{"MSET", other, "1", lk, "2"},         // every other argument a key
		{"OBJECT", "ENCODING", lk},            // a subcommand's key
		{"SORT", other, "STORE", lk},          // keys that move: COMMAND GETKEYS
		{"ZUNIONSTORE", lk, 1, other},         // likewise
		{"XREAD", "STREAMS", other, lk, 0, 0}, // likewise
		{"WATCH", lk},
		{"BLPOP", lk, 0.1},
		{"COPY", other, lk},
	}
	for _, args := range refused {
		_, err := e.do(args...)
		if err == nil || !strings.Contains(err.Error(), notServed) || !strings.Contains(err.Error(), "'"+lk+"'") {
			t.Errorf("%v: %v, want the refusal naming %s", args, err, lk)
		}
	}
	mustEqual(t, "the lock on every master, untouched", strings.Join(e.onMasters(lk), "|"), "t|t|t")
	if v := e.onMasters(other); v[0] != "" {
		t.Fatalf("a refused command reached the backend: %q", v[0])
	}

	// Other keys, channels and the quorum's own commands pass.
	mustEqual(t, "INCR of another key", must(e.do("INCR", other)), any(int64(1)))
	mustEqual(t, "MSET of other keys", must(e.do("MSET", other+"1", "a", other+"2", "b")), any("OK"))
	mustEqual(t, "SORT … STORE another key", must(e.do("SORT", other+"l", "STORE", other+"s")), any(int64(0)))
	mustEqual(t, "PUBLISH on a channel named like a lock key", must(e.do("PUBLISH", lk, "m")), any(int64(0)))
	mustEqual(t, "SPUBLISH likewise", must(e.do("SPUBLISH", lk, "m")), any(int64(0)))
	mustEqual(t, "PTTL of the lock", must(e.do("PTTL", lk)).(int64) > 0, true)
	mustEqual(t, "HEXISTS of a Redisson holder's field: the quorum", must(e.do("HEXISTS", lk+"free", "8d7c9a3e-1b2f-4c5d-9e8f-0a1b2c3d4e5f:1")), any(int64(0)))

	// MULTI: refused when queued, and EXEC aborts the transaction.
	tx := e.client()
	defer tx.Close()
	_, err := tx.TxPipelined(ctx, func(p redis.Pipeliner) error {
		p.Incr(ctx, other)
		p.Incr(ctx, lk)
		return nil
	})
	if err == nil || !strings.Contains(err.Error(), "EXECABORT") {
		t.Fatalf("MULTI with a refused command: %v, want EXECABORT", err)
	}
	mustEqual(t, "the aborted transaction's INCR", must(e.do("GET", other)), any("1"))

	// Pipelined with lock operations: each reply in its place.
	lk2 := "lock:" + e.key("b")
	p := e.c.Pipeline()
	set := p.SetNX(ctx, lk2, "u", 10*time.Second)
	incr := p.Incr(ctx, lk2)
	get := p.Get(ctx, lk2)
	incrOther := p.Incr(ctx, other)
	_, _ = p.Exec(ctx)
	mustEqual(t, "pipelined SET NX", set.Val(), true)
	if err := incr.Err(); err == nil || !strings.Contains(err.Error(), notServed) {
		t.Fatalf("pipelined INCR of a lock key: %v", err)
	}
	mustEqual(t, "pipelined GET", get.Val(), "u")
	mustEqual(t, "pipelined INCR of another key", incrOther.Val(), int64(2))
}

// The control: with the guard backend-lock-keys off, the same command
// changes the backend's copy of the lock alone, and the masters disagree
// about it: what the refusal prevents.
func TestLockKeyCommandsBackendChangesOneCopy(t *testing.T) {
	e := newEnv(t, 3, func(c *proxy.Config) {
		c.Proxy.LockKeys = []string{"lock:*"}
		c.GuardsOff = []string{"backend-lock-keys"}
	})
	lk := "lock:" + e.key("a")
	mustEqual(t, "SET NX", must(e.do("SET", lk, "t", "NX", "PX", 10000)), any("OK"))
	mustEqual(t, "APPEND of the lock key", must(e.do("APPEND", lk, "x")), any(int64(2)))
	mustEqual(t, "one master's copy changed", strings.Join(e.onMasters(lk), "|"), "tx|t|t")
}

// With every key a lock key (proxy.lock_keys = ["*"], the default) and a
// backend of its own, the default is the backend: an application's other
// data passes through there, and never reaches a master. With the backend
// a voting master, the same commands are refused, whatever
// lock_key_commands says ("backend" is a configuration error then).
func TestLockKeyCommandsDefaultWithEveryKey(t *testing.T) {
	be := redistest.Start(t)
	e := newEnv(t, 3, func(c *proxy.Config) { c.Proxy.Backend = be.Addr })
	k := e.key("n")
	mustEqual(t, "INCR", must(e.do("INCR", k)), any(int64(1)))
	mustEqual(t, "HSET", must(e.do("HSET", k+"h", "f", "v")), any(int64(1)))
	mustEqual(t, "no master holds them", strings.Join(e.onMasters(k), "|"), "||")

	e2 := newEnv(t, 3, func(c *proxy.Config) { c.Proxy.Backend = be.Addr; c.Proxy.LockKeyCommands = "refuse" })
	if _, err := e2.do("INCR", k); err == nil || !strings.Contains(err.Error(), notServed) {
		t.Fatalf("INCR with lock_key_commands = \"refuse\" and every key a lock key: %v", err)
	}
	mustEqual(t, "PING", must(e2.do("PING")), any("PONG"))

	voting := newEnv(t, 3, nil)
	if _, err := voting.do("INCR", k); err == nil || !strings.Contains(err.Error(), "a voting master") {
		t.Fatalf("INCR with every key a lock key and the first master as backend: %v", err)
	}
	cfg := proxy.DefaultConfig()
	cfg.Redlock.Masters = []string{"127.0.0.1:1", "127.0.0.1:2", "127.0.0.1:3"}
	cfg.Proxy.LockKeyCommands = "backend"
	if err := cfg.Validate(); err == nil || !strings.Contains(err.Error(), "proxy.lock_key_commands") {
		t.Fatalf("lock_key_commands = \"backend\" with a voting backend: %v", err)
	}
	cfg.Proxy.LockKeyCommands, cfg.Proxy.UnknownScripts = "", "passthrough"
	if err := cfg.Validate(); err == nil || !strings.Contains(err.Error(), "proxy.unknown_scripts") {
		t.Fatalf("unknown_scripts = \"passthrough\" with a voting backend: %v", err)
	}
}

// A semaphore's key among lock keys of their own: its ZREM is the quorum's
// (semaphore.go), not refused; other sorted sets of lock keys are.
func TestLockKeyCommandsAndSemaphores(t *testing.T) {
	e := newEnv(t, 3, func(c *proxy.Config) { c.Proxy.LockKeys = []string{"lock:*", "semaphore:*"} })
	sem := "semaphore:" + e.key("s")
	mustEqual(t, "ZREM of a semaphore's permits", must(e.do("ZREM", sem, "m")), any(int64(0)))
	if _, err := e.do("ZCARD", sem); err == nil || !strings.Contains(err.Error(), "a semaphore's permits") {
		t.Fatalf("ZCARD of a semaphore's permits: %v", err)
	}
	if _, err := e.do("ZADD", "lock:"+e.key("z"), 1, "m"); err == nil || !strings.Contains(err.Error(), notServed) {
		t.Fatalf("ZADD of a lock key: %v", err)
	}
	mustEqual(t, "ZADD of another key", must(e.do("ZADD", e.key("z"), 1, "m")), any(int64(1)))
}
