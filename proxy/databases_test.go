package proxy_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/rs/zerolog"

	"github.com/redlock-proxy/redlock-proxy/internal/redistest"
	"github.com/redlock-proxy/redlock-proxy/proxy"
)

// inDB is a client of a master's (or any Redis's) database db.
func inDB(m *redistest.Server, db int) *redis.Client {
	return redis.NewClient(&redis.Options{Addr: m.Addr, DB: db})
}

// onMastersDB is onMasters in database db.
func (e *env) onMastersDB(key string, db int) []string {
	out := make([]string, len(e.masters))
	for i, m := range e.masters {
		c := inDB(m, db)
		v, err := c.Get(context.Background(), key).Result()
		if err != nil && err != redis.Nil {
			v = "<" + err.Error() + ">"
		}
		out[i] = v
		c.Close()
	}
	return out
}

// pipeline sends cmds in one write and reads their raw replies.
func (c *respConn) pipeline(t *testing.T, cmds ...[]string) []string {
	t.Helper()
	_ = c.c.SetDeadline(time.Now().Add(10 * time.Second))
	var b []byte
	for _, cmd := range cmds {
		b = append(b, respArgs(cmd...)...)
	}
	if _, err := c.c.Write(b); err != nil {
		t.Fatal(err)
	}
	out := make([]string, len(cmds))
	for i := range cmds {
		out[i] = readRESP(t, c.r)
	}
	return out
}

// SELECT answers as on Redis, and each database's data stays apart, in
// both configurations: a backend of its own with every key a lock key,
// and the first master as the backend with locks under a prefix. The same
// commands go to a plain Redis, compared reply for reply.
func TestSelectLikeRedis(t *testing.T) {
	for _, cfg := range []struct {
		name string
		set  func(t *testing.T, c *proxy.Config)
	}{
		{"own_backend_every_key", func(t *testing.T, c *proxy.Config) { c.Proxy.Backend = ownBackend(t) }},
		{"voting_backend_prefix", func(t *testing.T, c *proxy.Config) { c.Proxy.LockKeys = []string{"lock:*"} }},
	} {
		t.Run(cfg.name, func(t *testing.T) {
			e := newEnv(t, 3, func(c *proxy.Config) { cfg.set(t, c) })
			plain := startPlain(t)
			p, r := dialRESP(t, e.addr), dialRESP(t, plain)
			defer p.close()
			defer r.close()
			unlock := `if redis.call("get",KEYS[1]) == ARGV[1] then return redis.call("del",KEYS[1]) else return 0 end`
			for i, cmd := range [][]string{
				{"SELECT", "1"}, {"SET", "a", "1"}, {"INCR", "a"}, {"GET", "a"}, {"DBSIZE"},
				{"SELECT", "0"}, {"GET", "a"}, {"EXISTS", "a"}, {"SET", "a", "zero"}, {"DBSIZE"},
				{"SELECT", "1"}, {"GET", "a"}, {"HSET", "h", "f", "v"}, {"HGET", "h", "f"},
				{"SET", "lock:x", "t1", "NX", "PX", "10000"}, {"SET", "lock:x", "t2", "NX", "PX", "10000"}, {"GET", "lock:x"},
				{"SELECT", "2"}, {"GET", "lock:x"}, {"SET", "lock:x", "t2", "NX", "PX", "10000"}, {"EVAL", unlock, "1", "lock:x", "t1"},
				{"EVAL", unlock, "1", "lock:x", "t2"}, {"SELECT", "1"}, {"GET", "lock:x"}, {"EVAL", unlock, "1", "lock:x", "t1"},
				{"SELECT", "16"}, {"SELECT", "-1"}, {"SELECT", "x"}, {"SELECT", "1", "2"}, {"SELECT", "01"}, {"GET", "a"},
				{"SELECT", "15"}, {"GET", "a"}, {"SELECT", "0"}, {"GET", "a"},
			} {
				got, want := p.do(t, cmd...), r.do(t, cmd...)
				if !sameReply(cmd, got, want) {
					t.Fatalf("command %d %q:\nproxy %q\nRedis %q", i, cmd, got, want)
				}
			}
		})
	}
}

// A lock of database 1 lives in database 1 of every master, apart from
// the lock of the same name in database 0; releasing one leaves the other.
func TestLocksOfDatabasesApart(t *testing.T) {
	e := newEnv(t, 3, nil)
	ctx := context.Background()
	key := e.key("k")
	c1 := redis.NewClient(&redis.Options{Addr: e.addr, DB: 1, MaxRetries: -1})
	defer c1.Close()
	mustEqual(t, "db 1 acquires", must(c1.Do(ctx, "SET", key, "one", "NX", "PX", 20000).Result()), any("OK"))
	mustEqual(t, "db 0 acquires its own", must(e.do("SET", key, "zero", "NX", "PX", 20000)), any("OK"))
	if _, err := c1.Do(ctx, "SET", key, "other", "NX", "PX", 20000).Result(); err != redis.Nil {
		t.Fatalf("db 1 granted twice: %v", err)
	}
	eventually(t, "db 1's lock on every master's database 1", func() bool { return count(e.onMastersDB(key, 1), "one") == 3 })
	eventually(t, "db 0's lock on every master's database 0", func() bool { return count(e.onMasters(key), "zero") == 3 })
	mustEqual(t, "GET in db 1", must(c1.Get(ctx, key).Result()), "one")
	unlock := `if redis.call("get",KEYS[1]) == ARGV[1] then return redis.call("del",KEYS[1]) else return 0 end`
	mustEqual(t, "db 0's token does not unlock db 1", must(c1.Eval(ctx, unlock, []string{key}, "zero").Result()), any(int64(0)))
	mustEqual(t, "db 1 unlocks", must(c1.Eval(ctx, unlock, []string{key}, "one").Result()), any(int64(1)))
	eventually(t, "db 1's lock gone", func() bool { return count(e.onMastersDB(key, 1), "") == 3 })
	mustEqual(t, "db 0's lock stays", count(e.onMasters(key), "zero"), 3)

	// The proxy's own lock commands, with a lease released when the
	// connection closes, in database 1.
	lk := e.key("lease")
	l1 := redis.NewClient(&redis.Options{Addr: e.addr, DB: 1, MaxRetries: -1, PoolSize: 1})
	g := must(l1.Do(ctx, "LOCK.ACQUIRE", lk, "LEASE").Result()).([]any)
	tok := fmt.Sprint(g[0])
	eventually(t, "lease held in database 1", func() bool { return count(e.onMastersDB(lk, 1), tok) == 3 })
	mustEqual(t, "nothing in database 0", count(e.onMasters(lk), ""), 3)
	l1.Close()
	eventually(t, "lease released on close", func() bool { return count(e.onMastersDB(lk, 1), "") == 3 })
}

// One connection pipelines lock operations in two databases: each runs in
// the database selected when it was sent, as on Redis.
func TestSelectPipelined(t *testing.T) {
	e := newEnv(t, 3, func(c *proxy.Config) { c.Proxy.Backend = ownBackend(t) })
	p := dialRESP(t, e.addr)
	defer p.close()
	key := e.key("k")
	var cmds [][]string
	for db := 0; db < 4; db++ {
		cmds = append(cmds, []string{"SELECT", fmt.Sprint(db)}, []string{"SET", key, fmt.Sprint("t", db), "NX", "PX", "20000"},
			[]string{"SET", key, "again", "NX", "PX", "20000"}, []string{"INCR", key + ":n"}, []string{"GET", key})
	}
	got := p.pipeline(t, cmds...)
	for db := 0; db < 4; db++ {
		want := []string{"+OK", "+OK", "$-1", ":1", fmt.Sprintf("$2\r\nt%d", db)}
		for i, w := range want {
			if g := got[db*5+i]; !strings.HasPrefix(g, w) {
				t.Fatalf("database %d, command %q: %q, want %q", db, cmds[db*5+i], g, w)
			}
		}
		tok := fmt.Sprint("t", db)
		eventually(t, "held in its database", func() bool { return count(e.onMastersDB(key, db), tok) == 3 })
	}
}

// SELECT on a connection of the client's own (after WATCH) moves it too;
// SELECT inside MULTI is refused and the transaction aborted; RESET goes
// back to database 0.
func TestSelectConnectionState(t *testing.T) {
	be := redistest.Start(t)
	e := newEnv(t, 3, func(c *proxy.Config) { c.Proxy.Backend = be.Addr })
	p := dialRESP(t, e.addr)
	defer p.close()
	for _, step := range []struct{ cmd, want string }{
		{"WATCH w", "+OK"}, {"SELECT 3", "+OK"}, {"MULTI", "+OK"}, {"SET x in3", "+QUEUED"}, {"EXEC", "*1"},
		{"GET x", "$3\r\nin3"}, {"MULTI", "+OK"}, {"SET y 1", "+QUEUED"},
		{"SELECT 4", "-ERR redlock-proxy: SELECT cannot be queued in MULTI"}, {"EXEC", "-EXECABORT"},
		{"GET y", "$-1"}, {"RESET", "+RESET"}, {"GET x", "$-1"}, {"SELECT 3", "+OK"}, {"GET x", "$3\r\nin3"},
	} {
		if got := p.do(t, strings.Fields(step.cmd)...); !strings.HasPrefix(got, step.want) {
			t.Fatalf("%s: %q, want %q", step.cmd, got, step.want)
		}
	}
	c3 := inDB(be, 3)
	defer c3.Close()
	mustEqual(t, "on the backend's database 3", must(c3.Get(context.Background(), "x").Result()), "in3")
}

// The restart guard works in every database, crossed with SELECT: A holds
// a lock of database 1 on two of three masters, one of those restarts
// empty, and B asks for it in database 1. With the guard B is refused;
// without it B is granted the lock A still holds.
func TestRestartGuardInDatabase(t *testing.T) {
	for _, guard := range []bool{true, false} {
		name := map[bool]string{true: "on", false: "off_shows_the_violation"}[guard]
		t.Run(name, func(t *testing.T) {
			window := 3 * time.Second
			e := newEnv(t, 3, func(c *proxy.Config) {
				c.Redlock.RestartGuard = guard
				c.Redlock.GuardWindow = proxy.Duration{Duration: window}
				c.Redlock.RetryCount = 2
			})
			ctx := context.Background()
			key := e.key("k")
			c1 := redis.NewClient(&redis.Options{Addr: e.addr, DB: 1, MaxRetries: -1})
			defer c1.Close()
			// The masters are younger than the window at first: wait until
			// database 1 takes locks (a probe's short TTL keeps no key
			// guarded for long).
			probe := e.key("probe")
			eventually2(t, window+5*time.Second, "database 1 takes locks", func() bool {
				v, _ := c1.Do(ctx, "SET", probe, "p", "NX", "PX", 200).Result()
				return v == "OK"
			})
			mustEqual(t, "A acquires", must(c1.Do(ctx, "SET", key, "A", "NX", "PX", 60000).Result()), any("OK"))
			eventually(t, "A on every master", func() bool { return count(e.onMastersDB(key, 1), "A") == 3 })
			m2 := inDB(e.masters[2], 1)
			m2.Del(ctx, key) // A holds r0 and r1 only
			m2.Close()
			e.masters[0].Restart() // r0 comes back empty
			v, err := c1.Do(ctx, "SET", key, "B", "NX", "PX", 60000).Result()
			if err != nil && err != redis.Nil && !strings.HasPrefix(err.Error(), "NOQUORUM") {
				t.Fatal(err)
			}
			if guard && v == "OK" {
				t.Fatal("B was granted a lock of database 1 that A still holds")
			}
			if !guard && v != "OK" {
				t.Fatalf("without the guard B should (unsafely) win; got %v %v", v, err)
			}
		})
	}
}

// -init-masters declares every database of the masters new, so that with
// the restart guard on a fresh deployment of durable masters takes locks
// at once in any of them.
func TestInitMastersEveryDatabase(t *testing.T) {
	masters := redistest.StartN(t, 3, "--appendonly", "yes", "--appendfsync", "always")
	cfg := proxy.DefaultConfig()
	cfg.Proxy.Listen = "127.0.0.1:0"
	cfg.Redlock.Masters = redistest.Addrs(masters)
	cfg.Redlock.NodeTimeout = proxy.Duration{Duration: 500 * time.Millisecond}
	srv, err := proxy.New(cfg, zerolog.New(zerolog.NewTestWriter(t)).Level(zerolog.WarnLevel))
	if err != nil {
		t.Fatal(err)
	}
	if err := srv.InitMasters(context.Background()); err != nil {
		t.Fatal(err)
	}
	_ = srv.Close()
	e := &env{t: t, masters: masters}
	e.startProxy(cfg)
	for _, db := range []int{0, 5, 15} {
		c := redis.NewClient(&redis.Options{Addr: e.addr, DB: db, MaxRetries: -1})
		v, err := c.Do(context.Background(), "SET", e.key("k"), "t", "NX", "PX", 10000).Result()
		c.Close()
		if v != "OK" {
			t.Fatalf("database %d, right after -init-masters: %v %v", db, v, err)
		}
	}
}
