package proxy_test

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

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

// FLUSHDB and FLUSHALL, a cache's clear (Laravel's Cache::flush, Django's
// cache.clear), answer as on one Redis where the backend holds data beside
// the locks: the flush erases the application's data and its locks (those
// whose mirror it erased), and an add of the same key takes it again. The
// locks of another application sharing the masters (their mirrors on
// another backend) and locks without a mirror (LOCK.*) stay held: a flush
// that ended them would let a second holder in.
func TestFlushEndsItsLocksOnly(t *testing.T) {
	be := redistest.Start(t)
	e := newEnv(t, 3, func(c *proxy.Config) { c.Proxy.Backend = be.Addr })
	plain := startPlain(t)
	// Another application: its own backend, the same masters.
	other := &env{t: t, masters: e.masters}
	cfg := proxy.DefaultConfig()
	cfg.Proxy.Listen, cfg.Proxy.Backend = "127.0.0.1:0", redistest.Start(t).Addr
	cfg.Redlock.Masters, cfg.Redlock.RestartGuard = redistest.Addrs(e.masters), false
	other.startProxy(cfg)
	mustEqual(t, "the other application's lock", must(other.do("SET", "shared", "theirs", "NX", "PX", 30000)), any("OK"))
	mustEqual(t, "a lock without a mirror", fmt.Sprint(must(e.do("LOCK.ACQUIRE", "native", "10000")) != nil), "true")

	for _, flush := range []string{"FLUSHDB", "FLUSHALL"} {
		t.Run(flush, func(t *testing.T) {
			p, r := dialRESP(t, e.addr), dialRESP(t, plain)
			defer p.close()
			defer r.close()
			for i, cmd := range [][]string{
				{"SET", "data", "v"}, {"SET", "lk", "tok", "NX", "PX", "30000"}, {"SELECT", "1"},
				{"SET", "lk1", "tok1", "NX", "PX", "30000"}, {"SELECT", "0"}, {flush},
				{"GET", "data"}, {"GET", "lk"}, {"EXISTS", "lk"}, {"SET", "lk", "other", "NX", "PX", "30000"},
				{"GET", "lk"}, {"DEL", "lk"}, {"SELECT", "1"}, {"GET", "lk1"}, {"SELECT", "0"},
			} {
				got, want := p.do(t, cmd...), r.do(t, cmd...)
				if flush == "FLUSHDB" && i == 13 {
					want = "$4\r\ntok1\r\n" // database 1 was not flushed
				}
				if !sameReply(cmd, got, want) {
					t.Fatalf("command %d %q: proxy %q, Redis %q", i, cmd, got, want)
				}
			}
			eventually(t, "lk gone from every master", func() bool { return count(e.onMasters("lk"), "") == 3 })
			if flush == "FLUSHALL" {
				eventually(t, "lk1 gone from every master's database 1", func() bool { return count(e.onMastersDB("lk1", 1), "") == 3 })
			} else {
				for _, a := range []string{e.addr, plain} {
					c1 := redis.NewClient(&redis.Options{Addr: a, DB: 1})
					c1.Del(context.Background(), "lk1")
					c1.Close()
				}
			}
		})
	}
	mustEqual(t, "the other application's lock stays on every master", count(e.onMasters("shared"), "theirs"), 3)
	if v, err := e.do("SET", "shared", "mine", "NX", "PX", 30000); err != redis.Nil {
		t.Fatalf("the other application's lock granted again after the flush: %v %v", v, err)
	}
	info := must(e.do("LOCK.INFO", "native"))
	if info == nil {
		t.Fatal("the lock without a mirror was ended by the flush")
	}
}

// masterKeyCommands counts, per master, the commands it has run on keys
// (INFO commandstats, the commands a script runs included), leaving out
// the proxy's background checks: the settings script (TIME, HSET, HGETALL,
// HDEL), INFO, PING and connection set-up. EVAL and EVALSHA are left out
// too: what a script does on a key counts as its commands (a quorum read
// runs STRLEN, GET and PTTL).
func masterKeyCommands(t *testing.T, masters []*redistest.Server) []int64 {
	t.Helper()
	skip := map[string]bool{"eval": true, "evalsha": true, "script": true, "time": true, "hset": true, "hgetall": true,
		"hdel": true, "info": true, "ping": true, "hello": true, "client": true, "command": true, "config": true,
		"select": true, "auth": true}
	var out []int64
	for _, m := range masters {
		c := m.Client()
		info, err := c.Info(context.Background(), "commandstats").Result()
		c.Close()
		if err != nil {
			t.Fatal(err)
		}
		var n int64
		for _, l := range strings.Split(info, "\n") {
			name, rest, ok := strings.Cut(strings.TrimSpace(l), ":calls=")
			name, isCmd := strings.CutPrefix(name, "cmdstat_")
			if !ok || !isCmd || skip[name] {
				continue
			}
			calls, _, _ := strings.Cut(rest, ",")
			v, err := strconv.ParseInt(calls, 10, 64)
			if err != nil {
				t.Fatalf("INFO commandstats line %q", l)
			}
			n += v
		}
		out = append(out, n)
	}
	return out
}

// In the deployment scripts/run.sh starts (a backend of its own, every key
// a lock key), data commands cost no quorum round trip: GET, PTTL and TTL
// of a key the backend holds — data or a lock's mirror — are answered by
// the backend, and SET and INCR run there alone, one by one or pipelined;
// no master runs a command on a key for them. A read of a key the backend
// does not hold asks the quorum (a lock may have no mirror), and the
// masters' counts show it: the count sees quorum reads.
func TestDataReadsCostNoQuorumRoundTrip(t *testing.T) {
	be := redistest.Start(t)
	e := newEnv(t, 3, func(c *proxy.Config) { c.Proxy.Backend = be.Addr })
	ctx := context.Background()
	for _, cmd := range [][]any{{"set", "page", "v"}, {"incr", "hits"}, {"set", "lk", "tok", "nx", "px", "60000"}} {
		if err := e.c.Do(ctx, cmd...).Err(); err != nil {
			t.Fatalf("%v: %v", cmd, err)
		}
	}
	// Every master has taken the lock before the count starts.
	eventually(t, "the lock on every master", func() bool { return count(e.onMasters("lk"), "tok") == 3 })
	before := masterKeyCommands(t, e.masters)
	data := [][]any{{"get", "page"}, {"get", "hits"}, {"get", "lk"}, {"pttl", "lk"}, {"ttl", "page"},
		{"set", "page", "v2"}, {"incr", "hits"}, {"get", "page"}}
	for range 20 {
		for _, cmd := range data {
			if err := e.c.Do(ctx, cmd...).Err(); err != nil {
				t.Fatalf("%v: %v", cmd, err)
			}
		}
		pipe := e.c.Pipeline()
		for _, cmd := range data {
			pipe.Do(ctx, cmd...)
		}
		if _, err := pipe.Exec(ctx); err != nil {
			t.Fatalf("pipelined: %v", err)
		}
	}
	if got, err := e.c.Get(ctx, "lk").Result(); err != nil || got != "tok" {
		t.Fatalf("GET lk: %q, %v", got, err)
	}
	after := masterKeyCommands(t, e.masters)
	for i := range after {
		if after[i] != before[i] {
			t.Errorf("master %d ran %d commands on keys for %d data commands the backend answers", i+1, after[i]-before[i], 2*20*len(data)+1)
		}
	}
	// The control: reads of a key the backend does not hold go to the quorum.
	for range 10 {
		if err := e.c.Get(ctx, "absent").Err(); err != redis.Nil {
			t.Fatalf("GET absent: %v", err)
		}
	}
	eventually(t, "10 reads of an absent key counted on a majority of masters", func() bool {
		n := 0
		for i, v := range masterKeyCommands(t, e.masters) {
			if v-after[i] >= 10 {
				n++
			}
		}
		return n >= 2
	})
}

// Pipelined GETs of lock keys pass through with the data commands around
// them, in one batch; one the backend answers with nil — a lock without a
// mirror, here written on the masters directly — is answered by the
// quorum, in its place among the replies, in RESP2 and RESP3, in short
// pipelines and in one longer than a batch on the shared connection.
func TestPipelinedReadsOfLocksWithoutMirror(t *testing.T) {
	be := redistest.Start(t)
	e := newEnv(t, 3, func(c *proxy.Config) { c.Proxy.Backend = be.Addr })
	ctx := context.Background()
	for _, m := range e.masters {
		c := m.Client()
		err := c.Set(ctx, "bare", "tokX", time.Minute).Err()
		c.Close()
		if err != nil {
			t.Fatal(err)
		}
	}
	for _, proto := range []int{2, 3} {
		c := redis.NewClient(&redis.Options{Addr: e.addr, Protocol: proto, MaxRetries: -1})
		for _, rounds := range []int{1, 40} {
			pipe := c.Pipeline()
			var want []any
			for i := range rounds {
				a := "a" + strconv.Itoa(i)
				pipe.Do(ctx, "set", a, "1")
				pipe.Do(ctx, "get", "bare")
				pipe.Do(ctx, "get", "absent")
				pipe.Do(ctx, "incr", "cnt"+strconv.Itoa(proto)+"-"+strconv.Itoa(rounds))
				pipe.Do(ctx, "get", a)
				want = append(want, "OK", "tokX", nil, int64(i+1), "1")
			}
			cmds, err := pipe.Exec(ctx)
			if err != nil && err != redis.Nil {
				t.Fatalf("RESP%d, %d rounds: %v", proto, rounds, err)
			}
			for i, cmd := range cmds {
				v, err := cmd.(*redis.Cmd).Result()
				if err == redis.Nil {
					v, err = nil, nil
				}
				if err != nil || v != want[i] {
					t.Fatalf("RESP%d, %d rounds, reply %d to %v: %v, %v; want %v", proto, rounds, i, cmd.Args(), v, err, want[i])
				}
			}
		}
		c.Close()
	}
	if v, err := be.Client().Get(ctx, "bare").Result(); err != redis.Nil {
		t.Fatalf("the backend holds bare: %q, %v", v, err)
	}
}
