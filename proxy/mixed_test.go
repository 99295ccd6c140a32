package proxy_test

import (
	"strings"
	"testing"

	"github.com/redlock-proxy/redlock-proxy/internal/redistest"
	"github.com/redlock-proxy/redlock-proxy/proxy"
)

// With a backend of its own and every key a lock key (the deployment
// scripts/run.sh starts), the keys an application uses both ways answer
// as on one Redis, reply for reply: a rate limiter's SET NX EX then INCR, a
// cache's add then GET, an idempotency key's SET NX then DEL, data then a
// lock on the same key, and plain data beside locks (the README's `incr
// visits` then `get visits`). Each lock taken by SET NX is also held on a
// quorum of masters, and data never reaches a master.
func TestDataBesideLocksLikeRedis(t *testing.T) {
	be := redistest.Start(t)
	e := newEnv(t, 3, func(c *proxy.Config) { c.Proxy.Backend = be.Addr })
	plain := startPlain(t)
	unlock := `if redis.call("get",KEYS[1]) == ARGV[1] then return redis.call("del",KEYS[1]) else return 0 end`
	for _, seq := range []struct {
		name string
		cmds [][]string
	}{
		{"rate limiter", [][]string{
			{"SET", "rl", "0", "EX", "60", "NX"}, {"INCR", "rl"}, {"INCR", "rl"}, {"GET", "rl"}, {"TTL", "rl"},
			{"SET", "rl", "0", "EX", "60", "NX"}, {"INCRBY", "rl", "5"}, {"EXISTS", "rl"}, {"GET", "rl"},
		}},
		{"cache add", [][]string{
			{"SET", "c", "v1", "NX", "EX", "100"}, {"GET", "c"}, {"SET", "c", "v2", "NX", "EX", "100"}, {"GET", "c"},
			{"STRLEN", "c"}, {"APPEND", "c", "x"}, {"GET", "c"}, {"DEL", "c"}, {"GET", "c"}, {"SET", "c", "v3", "NX", "EX", "100"}, {"GET", "c"},
		}},
		{"idempotency key", [][]string{
			{"SET", "idem", "1", "NX", "EX", "3600"}, {"SET", "idem", "1", "NX", "EX", "3600"}, {"DEL", "idem"},
			{"SET", "idem", "1", "NX", "EX", "3600"}, {"EXPIRE", "idem", "100"}, {"TTL", "idem"}, {"PERSIST", "idem"}, {"TTL", "idem"},
		}},
		{"data, then a lock", [][]string{
			{"SET", "d", "data"}, {"SET", "d", "tok", "NX", "PX", "10000"}, {"SETNX", "d", "tok"}, {"GET", "d"}, {"DEL", "d"},
			{"SET", "d", "tok", "NX", "PX", "10000"}, {"PTTL", "d"}, {"EVAL", unlock, "1", "d", "tok"}, {"GET", "d"}, {"EXISTS", "d"},
			{"SET", "d", "x", "NX", "GET"}, {"SET", "d", "y", "NX", "GET"}, {"GETDEL", "d"}, {"GET", "d"},
		}},
		{"data beside locks", [][]string{
			{"INCR", "visits"}, {"GET", "visits"}, {"EXISTS", "visits"}, {"SET", "visits", "5"}, {"INCR", "visits"}, {"GET", "visits"},
			{"MSET", "a", "1", "b", "2"}, {"MGET", "a", "b"}, {"GET", "a"}, {"SET", "s", "v"}, {"APPEND", "s", "x"}, {"GET", "s"},
			{"SETEX", "se", "100", "v"}, {"TTL", "se"}, {"GETEX", "se", "PERSIST"}, {"TTL", "se"}, {"DEL", "visits", "a", "b", "nope"},
			{"MULTI"}, {"SET", "m", "1"}, {"INCR", "m"}, {"GET", "m"}, {"EXEC"},
		}},
		// Laravel's cache add (a script the proxy recognises as a lock
		// acquire) and its RateLimiter: add, then increment.
		{"laravel rate limiter", [][]string{
			{"EVAL", laravelAdd, "1", "lrl", "0", "60"}, {"INCRBY", "lrl", "1"}, {"GET", "lrl"}, {"TTL", "lrl"},
			{"EVAL", laravelAdd, "1", "lrl", "0", "60"}, {"INCRBY", "lrl", "1"}, {"GET", "lrl"},
			{"SET", "ldata", "x"}, {"EVAL", laravelAdd, "1", "ldata", "0", "60"}, {"GET", "ldata"},
		}},
	} {
		t.Run(strings.ReplaceAll(seq.name, " ", "_"), func(t *testing.T) {
			p, r := dialRESP(t, e.addr), dialRESP(t, plain)
			defer p.close()
			defer r.close()
			var queued [][]string
			for i, cmd := range seq.cmds {
				got, want := p.do(t, cmd...), r.do(t, cmd...)
				switch {
				case cmd[0] == "MULTI":
					queued = [][]string{}
				case cmd[0] == "EXEC":
				case queued != nil:
					queued = append(queued, cmd)
				}
				same := sameReply(cmd, got, want) || cmd[0] == "EXEC" && sameElements(t, queued, got, want)
				if !same {
					t.Fatalf("command %d %q:\nproxy %q\nRedis %q", i, cmd, got, want)
				}
			}
		})
	}
	// The locks were taken on the quorum; data never reached a master.
	for _, k := range []string{"visits", "a", "b", "s", "m", "ldata"} {
		if on := e.onMasters(k); strings.Join(on, "") != "" {
			t.Errorf("data key %s on the masters: %q", k, on)
		}
	}
	mustEqual(t, "the rate limiter's first window, a lock on every master", count(e.onMasters("rl"), "0"), 3)
	mustEqual(t, "Laravel's add, a lock on every master", count(e.onMasters("lrl"), "0"), 3)
}

// laravelAdd is Laravel's RedisStore::add, which the proxy recognises as
// a lock acquire.
const laravelAdd = "return redis.call('exists',KEYS[1])<1 and redis.call('setex',KEYS[1],ARGV[2],ARGV[1])"

// FLUSHDB, a cache's clear (Laravel's Cache::flush, Django's cache.clear),
// passes through to a backend of the proxy's own and erases the
// application's data and the locks' mirrors there, but not the locks: they
// stay on the quorum until their TTL ends or they are deleted, so an
// acquire of such a key is refused meanwhile, and a read of it answers the
// lock (on one Redis the lock is gone with the rest). docs/commands.md
// lists it among the differences.
func TestFlushDBKeepsLocks(t *testing.T) {
	be := redistest.Start(t)
	e := newEnv(t, 3, func(c *proxy.Config) { c.Proxy.Backend = be.Addr })
	p := dialRESP(t, e.addr)
	defer p.close()
	for _, step := range []struct {
		cmd  []string
		want string
	}{
		{[]string{"SET", "data", "v"}, "+OK\r\n"},
		{[]string{"SET", "lk", "tok", "NX", "PX", "30000"}, "+OK\r\n"},
		{[]string{"FLUSHDB"}, "+OK\r\n"},
		{[]string{"DBSIZE"}, ":0\r\n"},
		{[]string{"GET", "data"}, "$-1\r\n"},
		{[]string{"GET", "lk"}, "$3\r\ntok\r\n"},                         // one Redis: nil
		{[]string{"SET", "lk", "other", "NX", "PX", "30000"}, "$-1\r\n"}, // one Redis: OK
		{[]string{"DEL", "lk"}, ":1\r\n"},                                // one Redis: 0
		{[]string{"SET", "lk", "other", "NX", "PX", "30000"}, "+OK\r\n"},
	} {
		if got := p.do(t, step.cmd...); got != step.want {
			t.Fatalf("%q: %q, want %q", step.cmd, got, step.want)
		}
	}
	mustEqual(t, "the new lock on every master", count(e.onMasters("lk"), "other"), 3)
}
