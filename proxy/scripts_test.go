package proxy_test

import (
	"context"
	"crypto/sha1"
	"encoding/hex"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/redlock-proxy/redlock-proxy/internal/redistest"
	"github.com/redlock-proxy/redlock-proxy/proxy"
	"github.com/redlock-proxy/redlock-proxy/proxy/lockscripts"
)

// The unlock script as the Redlock spec gives it, and spellings of it that
// differ in white space, quotes and the case of command names.
var unlockSpellings = []string{
	`if redis.call("get",KEYS[1]) == ARGV[1] then return redis.call("del",KEYS[1]) else return 0 end`,
	"if redis.call(\"get\",KEYS[1]) == ARGV[1] then\n    return redis.call(\"del\",KEYS[1])\nelse\n    return 0\nend\n",
	"\n\tif redis.call('GET', KEYS[1]) == ARGV[1] then\n\t\treturn redis.call('DEL', KEYS[1])\n\telse\n\t\treturn 0\n\tend\n",
	`if redis.call("GET",KEYS[1])==ARGV[1] then return redis.call("DEL",KEYS[1]) else return 0 end`,
}

const extendScript = `if redis.call("get", KEYS[1]) == ARGV[1] then return redis.call("pexpire", KEYS[1], ARGV[2]) else return 0 end`

func TestUnlockSpellingsRunOnQuorum(t *testing.T) {
	e := newEnv(t, 3, nil)
	for i, script := range unlockSpellings {
		key := e.key(string(rune('a' + i)))
		if v, _ := e.do("SET", key, "tok", "NX", "PX", 10000); v != "OK" {
			t.Fatalf("acquire: %v", v)
		}
		n, err := e.do("EVAL", script, 1, key, "wrong")
		if err != nil {
			t.Fatal(err)
		}
		mustEqual(t, "unlock with a wrong token", n, any(int64(0)))
		eventually(t, "lock intact", func() bool { return count(e.onMasters(key), "tok") == 3 })
		n, err = e.do("EVAL", script, 1, key, "tok")
		if err != nil {
			t.Fatal(err)
		}
		mustEqual(t, "unlock", n, any(int64(1)))
		eventually(t, "deleted on every master", func() bool { return count(e.onMasters(key), "") == 3 })
		n, _ = e.do("EVAL", script, 1, key, "tok")
		mustEqual(t, "second unlock", n, any(int64(0)))
	}
}

// The unlock with code after a comment that Lua ends at "\r" is not the
// unlock: Redis would run the hidden code and answer 99. The proxy neither
// answers it as the unlock (1) nor deletes the lock: it is a script it does
// not know, on a lock key, and refused.
func TestHiddenCodeBesideTheUnlockIsNotTheUnlock(t *testing.T) {
	e := newEnv(t, 3, nil)
	key := e.key("k")
	mustEqual(t, "acquire", must(e.do("SET", key, "tok", "NX", "PX", 10000)), any("OK"))
	for _, hidden := range []string{
		"-- note\rdo return 99 end\n" + unlockSpellings[0],
		"--[=[ note ]=] do return 99 end\n" + unlockSpellings[0],
	} {
		if v, err := e.do("EVAL", hidden, 1, key, "tok"); err == nil || !strings.Contains(err.Error(), "[[scripts]]") {
			t.Fatalf("%q answered %v %v, want refused as a script the proxy does not know", hidden, v, err)
		}
	}
	eventually(t, "the lock on every master", func() bool { return count(e.onMasters(key), "tok") == 3 })
}

// A script recognised as the unlock script must not run on one master: if
// it did, the copies on the other masters would survive.
func TestUnlockByEVALSHAAfterScriptLoad(t *testing.T) {
	e := newEnv(t, 3, nil)
	key := e.key("k")
	e.do("SET", key, "tok", "NX", "PX", 10000)
	sha, err := e.do("SCRIPT", "LOAD", unlockSpellings[1])
	if err != nil {
		t.Fatal(err)
	}
	want := sha1.Sum([]byte(unlockSpellings[1]))
	mustEqual(t, "SCRIPT LOAD answers the true SHA1", sha, any(hex.EncodeToString(want[:])))
	ex, _ := e.do("SCRIPT", "EXISTS", sha, "0000000000000000000000000000000000000000")
	mustEqual(t, "SCRIPT EXISTS", len(ex.([]any)), 2)
	mustEqual(t, "SCRIPT EXISTS loaded", ex.([]any)[0], any(int64(1)))
	mustEqual(t, "SCRIPT EXISTS unknown", ex.([]any)[1], any(int64(0)))
	n, err := e.do("EVALSHA", sha, 1, key, "tok")
	if err != nil {
		t.Fatal(err)
	}
	mustEqual(t, "EVALSHA unlock", n, any(int64(1)))
	eventually(t, "deleted on every master", func() bool { return count(e.onMasters(key), "") == 3 })
}

func TestEVALSHAUnknownDigestIsNOSCRIPT(t *testing.T) {
	e := newEnv(t, 3, nil)
	// Loaded straight on the backend, not through the proxy: the proxy must
	// still answer NOSCRIPT rather than run it on that one master.
	c := e.masters[0].Client()
	defer c.Close()
	sha, err := c.ScriptLoad(context.Background(), unlockSpellings[2]).Result()
	if err != nil {
		t.Fatal(err)
	}
	_, err = e.do("EVALSHA", sha, 1, e.key("k"), "tok")
	if err == nil || !strings.HasPrefix(err.Error(), "NOSCRIPT") {
		t.Fatalf("got %v, want NOSCRIPT", err)
	}
	// go-redis's Script falls back to EVAL on NOSCRIPT, as lock libraries do.
	e.do("SET", e.key("k"), "tok", "NX", "PX", 10000)
	n, err := redis.NewScript(unlockSpellings[2]).Run(context.Background(), e.c, []string{e.key("k")}, "tok").Result()
	if err != nil {
		t.Fatal(err)
	}
	mustEqual(t, "Script.Run after NOSCRIPT", n, any(int64(1)))
}

func TestExtendScript(t *testing.T) {
	e := newEnv(t, 3, nil)
	key := e.key("k")
	e.do("SET", key, "tok", "NX", "PX", 1000)
	n, _ := e.do("EVAL", extendScript, 1, key, "other", 30000)
	mustEqual(t, "extend with a wrong token", n, any(int64(0)))
	n, _ = e.do("EVALSHA", mustLoad(t, e, extendScript), 1, key, "tok", 30000)
	mustEqual(t, "extend", n, any(int64(1)))
	eventually(t, "every master extended", func() bool {
		for _, m := range e.masters {
			c := m.Client()
			p, _ := c.PTTL(context.Background(), key).Result()
			c.Close()
			if p < 20*time.Second {
				return false
			}
		}
		return true
	})
	n, _ = e.do("EVAL", extendScript, 1, e.key("absent"), "tok", 30000)
	mustEqual(t, "extend of an absent key", n, any(int64(0)))
}

// A lock whose token survives on a minority only is not held: release and
// extend answer 0, and the minority copy is deleted all the same.
func TestReleaseOnMinorityAnswersZero(t *testing.T) {
	e := newEnv(t, 3, nil)
	key := e.key("k")
	e.seed(key, "tok", 10*time.Second, 0)
	n, _ := e.do("EVAL", extendScript, 1, key, "tok", 30000)
	mustEqual(t, "extend on a minority", n, any(int64(0)))
	n, _ = e.do("EVAL", unlockSpellings[0], 1, key, "tok")
	mustEqual(t, "release on a minority", n, any(int64(0)))
	eventually(t, "minority copy deleted", func() bool { return count(e.onMasters(key), "") == 3 })
}

// A script the proxy does not recognise, on keys that are not lock keys,
// passes through to a backend of the proxy's own.
func TestUnrecognisedScriptPassesThrough(t *testing.T) {
	be := redistest.Start(t)
	e := newEnv(t, 3, func(c *proxy.Config) { c.Proxy.LockKeys, c.Proxy.Backend = []string{"lock:*"}, be.Addr })
	v, err := e.do("EVAL", "return redis.call('incrby', KEYS[1], ARGV[1])", 1, e.key("n"), 5)
	if err != nil {
		t.Fatal(err)
	}
	mustEqual(t, "script result", v, any(int64(5)))
	vals := e.onMasters(e.key("n"))
	mustEqual(t, "ran on the backend only", vals[0]+"|"+vals[1]+"|"+vals[2], "||")
	bc := be.Client()
	defer bc.Close()
	mustEqual(t, "on the backend", bc.Get(context.Background(), e.key("n")).Val(), "5")
	_, err = e.do("EVAL", "return 1", "x")
	mustEqual(t, "bad numkeys", err.Error(), "ERR value is not an integer or out of range")
	_, err = e.do("EVAL", "return 1", 3, "a")
	mustEqual(t, "numkeys too big", err.Error(), "ERR Number of keys can't be greater than number of args")
}

// A one-key lock script sent with more keys (python-redis-lock adds its
// signal list) is refused: on the backend it would act on one master only.
func TestOneKeyLockScriptWithMoreKeysIsRefused(t *testing.T) {
	e := newEnv(t, 3, nil)
	key := e.key("k")
	e.do("SET", key, "tok", "NX", "PX", 10000)
	eventually(t, "the lock on every master", func() bool { return count(e.onMasters(key), "tok") == 3 })
	_, err := e.do("EVAL", unlockSpellings[0], 2, key, e.key("signal"), "tok")
	if err == nil || !strings.Contains(err.Error(), "takes one key") {
		t.Fatalf("got %v, want a refusal", err)
	}
	_, err = e.do("EVALSHA", mustLoad(t, e, extendScript), 2, key, e.key("signal"), "tok", 30000)
	if err == nil || !strings.Contains(err.Error(), "takes one key") {
		t.Fatalf("EVALSHA: got %v, want a refusal", err)
	}
	mustEqual(t, "lock intact on every master", count(e.onMasters(key), "tok"), 3)
}

func mustLoad(t *testing.T, e *env, src string) string {
	t.Helper()
	sha, err := e.do("SCRIPT", "LOAD", src)
	if err != nil {
		t.Fatal(err)
	}
	return sha.(string)
}

// A proxy that never saw a library's script loaded still runs it by its
// SHA1 (a restarted proxy, or another proxy behind the same balancer).
// 0f0f23b9… is node-redlock 4.2's release script, d75bb8b5… go-redsync's
// touch script; the compatibility suite drives both libraries for real.
func TestKnownLibraryScriptBySHAWithoutLoad(t *testing.T) {
	e := newEnv(t, 3, nil)
	key := e.key("k")
	e.do("SET", key, "tok", "NX", "PX", 1000)
	n, err := e.do("EVALSHA", "d75bb8b5bd13532ddedd17762e772346e39b321e", 1, key, "tok", 30000)
	if err != nil {
		t.Fatal(err)
	}
	mustEqual(t, "touch by SHA", n, any(int64(1)))
	eventually(t, "extended on every master", func() bool {
		p := must(e.do("PTTL", key)).(int64)
		return p > 20000
	})
	ex, _ := e.do("SCRIPT", "EXISTS", "0f0f23b9048b36752b5be114f357ba083449f908")
	mustEqual(t, "SCRIPT EXISTS of a known library script", ex.([]any)[0], any(int64(1)))
	n, err = e.do("EVALSHA", "0f0f23b9048b36752b5be114f357ba083449f908", 1, key, "tok")
	if err != nil {
		t.Fatal(err)
	}
	mustEqual(t, "release by SHA", n, any(int64(1)))
	eventually(t, "deleted on every master", func() bool { return count(e.onMasters(key), "") == 3 })
}

// An operator's own unlock script, taught through [[scripts]], runs on the
// quorum; untaught, it is refused (with the guard backend-scripts off, the
// same script runs on the voting backend alone and leaves the lock on the
// other masters).
func TestCustomScriptFromConfig(t *testing.T) {
	const mine = `local v = redis.call('get', KEYS[1]) if v == ARGV[2] then return redis.call('del', KEYS[1]) end return -7`
	for _, taught := range []bool{true, false} {
		t.Run(map[bool]string{true: "taught", false: "untaught_passed_through"}[taught], func(t *testing.T) {
			e := newEnv(t, 3, func(c *proxy.Config) {
				if taught {
					c.Scripts = []proxy.ScriptConfig{{File: "mine.lua", Source: mine, Op: "release", TokenArg: 2, OK: int64(1), NotOwned: int64(-7)}}
				} else {
					c.GuardsOff = []string{"backend-scripts"}
				}
			})
			key := e.key("k")
			e.do("SET", key, "tok", "NX", "PX", 10000)
			eventually(t, "lock on every master", func() bool { return count(e.onMasters(key), "tok") == 3 })
			n, err := e.do("EVAL", mine, 1, key, "ignored", "tok")
			if err != nil {
				t.Fatal(err)
			}
			mustEqual(t, "reply", n, any(int64(1)))
			if taught {
				// Answered at quorum: the last master's delete lands a moment later.
				eventually(t, "no copies left after a taught release", func() bool { return count(e.onMasters(key), "tok") == 0 })
				n, _ = e.do("EVAL", mine, 1, key, "ignored", "tok")
				mustEqual(t, "not owned", n, any(int64(-7)))
			} else {
				mustEqual(t, "copies left when the script ran on one master", count(e.onMasters(key), "tok"), 2)
			}
		})
	}
}

// A lock library declared in configuration only: an acquire by absolute
// expiry that lets its holder take the key again, an inspect, and a
// release that publishes for its waiters, each in spellings the proxy does
// not know, run on the quorum as the built-in scripts of that kind do.
func TestCustomScriptVocabulary(t *testing.T) {
	const (
		acquire = `if redis.call('get', KEYS[1]) == ARGV[1] then redis.call('set', KEYS[1], ARGV[1], 'pxat', ARGV[2]) return 'OK' end
			return redis.call('set', KEYS[1], ARGV[1], 'nx', 'pxat', ARGV[2])`
		inspect = `local v = redis.call('get', KEYS[1]) if not v then return nil end return {v, redis.call('pttl', KEYS[1])}`
		release = `local k = KEYS[1] if redis.call('get', k) == ARGV[1] then redis.call('del', k) redis.call('publish', KEYS[2], k) end`
	)
	e := newEnv(t, 3, func(c *proxy.Config) {
		c.Scripts = []proxy.ScriptConfig{
			{File: "acquire.lua", Source: acquire, Op: "acquire", TokenArg: 1, TTLArg: 2, TTLUnit: "unix_ms", Reclaim: "same_token", OK: "OK", NotOwned: "nil"},
			{File: "inspect.lua", Source: inspect, Op: "inspect"},
			{File: "release.lua", Source: release, Op: "release", TokenArg: 1, Publish: "released {key} by {token}", OK: "nil", NotOwned: "nil"},
		}
	})
	ctx := context.Background()
	key := e.key("k")
	at := func(d time.Duration) int64 { return time.Now().Add(d).UnixMilli() }
	if v, err := e.do("EVAL", acquire, 1, key, "tok", at(10*time.Second)); err != nil || v != "OK" {
		t.Fatalf("acquire: %v %v", v, err)
	}
	eventually(t, "on every master", func() bool { return count(e.onMasters(key), "tok") == 3 })
	if _, err := e.do("EVAL", acquire, 1, key, "other", at(10*time.Second)); err != redis.Nil {
		t.Fatalf("another token's acquire: %v, want nil", err)
	}
	if v, err := e.do("EVAL", acquire, 1, key, "tok", at(30*time.Second)); err != nil || v != "OK" {
		t.Fatalf("the holder's acquire again: %v %v", v, err)
	}
	got, err := e.do("EVAL", inspect, 1, key)
	if err != nil {
		t.Fatal(err)
	}
	if a := got.([]any); len(a) != 2 || a[0] != "tok" || a[1].(int64) < 25000 {
		t.Fatalf("inspect after the holder took it for 30 s: %v", a)
	}

	sub := e.masters[0].Client().Subscribe(ctx, "releases")
	defer sub.Close()
	if _, err := sub.Receive(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := e.do("EVAL", release, 2, key, "releases", "other"); err != redis.Nil {
		t.Fatalf("another token's release: %v", err)
	}
	if _, err := e.do("EVAL", release, 2, key, "releases", "tok"); err != redis.Nil {
		t.Fatalf("release: %v", err)
	}
	eventually(t, "gone from every master", func() bool { return count(e.onMasters(key), "") == 3 })
	msg, err := sub.ReceiveMessage(ctx)
	if err != nil || msg.Payload != "released "+key+" by tok" {
		t.Fatalf("the release's message: %v %v", msg, err)
	}
	if _, err := e.do("EVAL", inspect, 1, key); err != redis.Nil {
		t.Fatalf("inspect of a released key: %v, want nil", err)
	}
	// Nothing more was published: not for the other token's release.
	next := sub.Channel()
	select {
	case m := <-next:
		t.Fatalf("a second message: %v", m)
	case <-time.After(200 * time.Millisecond):
	}
}

// Operations the vocabulary gained with the built-in table's declaration,
// declared for a library the proxy does not know and run on the quorum: an
// extend that adds to the TTL when ARGV[3] says so and answers -2 for a key
// without one, an acquire whose holder (by a token prefix) takes the key
// again, answering arrays, and a read/write lock in Symfony's format.
func TestCustomScriptDeclaredOps(t *testing.T) {
	const (
		extend = `local v = redis.call('get', KEYS[1]) if v ~= ARGV[1] then return 0 end
			local left = redis.call('pttl', KEYS[1]) if left < 0 then return -2 end
			if ARGV[3] == 'add' then return redis.call('pexpire', KEYS[1], left + ARGV[2]) end
			return redis.call('pexpire', KEYS[1], ARGV[2])`
		acquire = `local v, n = redis.call('get', KEYS[1]), tonumber(ARGV[2])
			if v and string.sub(v, 1, n) == string.sub(ARGV[1], 1, n) then redis.call('set', KEYS[1], ARGV[1], 'px', ARGV[3]) return {1} end
			if redis.call('set', KEYS[1], ARGV[1], 'nx', 'px', ARGV[3]) then return {1} end return {0}`
		read   = `if redis.call('zscore', KEYS[1], '__write__') then return 0 end redis.call('zadd', KEYS[1], ARGV[2], ARGV[1]) return 1`
		write  = `if redis.call('zcard', KEYS[1]) > 0 then return 0 end redis.call('zadd', KEYS[1], ARGV[2], ARGV[1], ARGV[2], '__write__') return 1`
		unlock = `return redis.call('zrem', KEYS[1], ARGV[1])`
	)
	e := newEnv(t, 3, func(c *proxy.Config) {
		c.Scripts = []proxy.ScriptConfig{
			{File: "extend.lua", Source: extend, Op: "extend", TokenArg: 1, TTLArg: 2, Mode: "setttl",
				AddIf: &lockscripts.ArgEquals{Arg: 3, Value: "add"}, NoTTL: int64(-2)},
			{File: "acquire.lua", Source: acquire, Op: "acquire", TokenArg: 1, TTLArg: 3, Reclaim: "token_prefix", PrefixLenArg: 2,
				OK: []any{int64(1)}, NotOwned: []any{int64(0)}},
			{File: "read.lua", Source: read, Op: "rw_acquire", TokenArg: 1, TTLArg: 2, Shared: true},
			{File: "write.lua", Source: write, Op: "rw_acquire", TokenArg: 1, TTLArg: 2},
			{File: "unlock.lua", Source: unlock, Op: "rw_release", TokenArg: 1},
		}
	})
	ctx := context.Background()
	eval := func(args ...any) any {
		t.Helper()
		v, err := e.do(append([]any{"EVAL"}, args...)...)
		if err != nil {
			t.Fatalf("EVAL %v: %v", args[1:], err)
		}
		return v
	}

	key := e.key("ext")
	must(e.do("SET", key, "tok", "NX", "PX", 10000))
	mustEqual(t, "extend adding", eval(extend, 1, key, "tok", 20000, "add"), any(int64(1)))
	if p := must(e.do("PTTL", key)).(int64); p <= 20000 {
		t.Fatalf("PTTL after adding 20 s to 10 s: %d", p)
	}
	mustEqual(t, "extend setting", eval(extend, 1, key, "tok", 5000, "set"), any(int64(1)))
	if p := must(e.do("PTTL", key)).(int64); p > 5000 {
		t.Fatalf("PTTL after setting 5 s: %d", p)
	}
	mustEqual(t, "extend by another token", eval(extend, 1, key, "other", 5000, "set"), any(int64(0)))
	noTTL := e.key("nottl")
	e.seed(noTTL, "tok", 0, 0, 1, 2)
	mustEqual(t, "adding to a key without a TTL", eval(extend, 1, noTTL, "tok", 5000, "add"), any(int64(-2)))
	mustEqual(t, "setting a key without a TTL", eval(extend, 1, noTTL, "tok", 5000, "set"), any(int64(-2)))

	key = e.key("acq")
	mustEqual(t, "acquire", fmt.Sprint(eval(acquire, 1, key, "app1:a", 5, 10000)), "[1]")
	mustEqual(t, "another's acquire", fmt.Sprint(eval(acquire, 1, key, "app2:b", 5, 10000)), "[0]")
	mustEqual(t, "the holder's acquire again", fmt.Sprint(eval(acquire, 1, key, "app1:c", 5, 30000)), "[1]")
	eventually(t, "the holder's new token on every master", func() bool { return count(e.onMasters(key), "app1:c") == 3 })

	key = e.key("rw")
	mustEqual(t, "a reader", eval(read, 1, key, "r1", 10000), any(int64(1)))
	mustEqual(t, "a second reader", eval(read, 1, key, "r2", 10000), any(int64(1)))
	mustEqual(t, "a writer while they read", eval(write, 1, key, "w", 10000), any(int64(0)))
	mustEqual(t, "a reader's release", eval(unlock, 1, key, "r1"), any(int64(1)))
	mustEqual(t, "the other reader's release", eval(unlock, 1, key, "r2"), any(int64(1)))
	mustEqual(t, "a release not held", eval(unlock, 1, key, "r2"), any(int64(0)))
	mustEqual(t, "the writer", eval(write, 1, key, "w", 10000), any(int64(1)))
	mustEqual(t, "a reader while it writes", eval(read, 1, key, "r3", 10000), any(int64(0)))
	eventually(t, "the writer in the sorted set of every master", func() bool {
		for _, m := range e.masters {
			c := m.Client()
			_, err := c.ZScore(ctx, key, "w").Result()
			c.Close()
			if err != nil {
				return false
			}
		}
		return true
	})
}

// Multi-key scripts of a library the proxy does not know, declared in
// configuration with multi_reply = "outcome": an acquire whose holder
// takes its keys again, an extend and a release that answer their outcome
// rather than a count (absent keys told from another holder's; the
// release all or none on each master), and an owner TTL of several keys,
// the least of theirs, a key without expiry counting as the longest.
func TestCustomMultiKeyScripts(t *testing.T) {
	const (
		acquire = `for _, k in ipairs(KEYS) do local v = redis.call('get', k) if v and v ~= ARGV[1] then return false end end
			for _, k in ipairs(KEYS) do redis.call('set', k, ARGV[1], 'px', ARGV[2]) end return redis.status_reply('OK')`
		extend = `for _, k in ipairs(KEYS) do local v = redis.call('get', k) if not v then return -1 elseif v ~= ARGV[1] then return 0 end end
			for _, k in ipairs(KEYS) do redis.call('pexpire', k, ARGV[2]) end return 1`
		release = `for _, k in ipairs(KEYS) do local v = redis.call('get', k) if not v then return -1 elseif v ~= ARGV[1] then return 0 end end
			redis.call('del', unpack(KEYS)) return 1`
		left = `local least = -1 for _, k in ipairs(KEYS) do local v = redis.call('get', k) if not v then return -2 elseif v ~= ARGV[1] then return -3 end
			local p = redis.call('pttl', k) if p >= 0 and (least < 0 or p < least) then least = p end end return least`
	)
	outcome := func(c proxy.ScriptConfig) proxy.ScriptConfig {
		c.TokenArg, c.Multi, c.MultiReply = 1, true, "outcome"
		return c
	}
	e := newEnv(t, 3, func(c *proxy.Config) {
		c.Scripts = []proxy.ScriptConfig{
			outcome(proxy.ScriptConfig{File: "acquire.lua", Source: acquire, Op: "acquire", TTLArg: 2, Reclaim: "same_token", OK: "OK", NotOwned: "nil"}),
			outcome(proxy.ScriptConfig{File: "extend.lua", Source: extend, Op: "extend", TTLArg: 2, OK: int64(1), NotOwned: int64(0), Absent: int64(-1)}),
			outcome(proxy.ScriptConfig{File: "release.lua", Source: release, Op: "release", OK: int64(1), NotOwned: int64(0), Absent: int64(-1)}),
			{File: "left.lua", Source: left, Op: "owner_ttl", TokenArg: 1, Multi: true, NotOwned: int64(-3), Absent: int64(-2)},
		}
	})
	a, b, forever, absent := e.key("a"), e.key("b"), e.key("forever"), e.key("absent")
	eval := func(src string, keys []string, argv ...any) (any, error) {
		args := []any{"EVAL", src, len(keys)}
		for _, k := range keys {
			args = append(args, k)
		}
		return e.do(append(args, argv...)...)
	}
	want := func(what string, v any, err error, w any) {
		t.Helper()
		if w == nil && err == redis.Nil || err == nil && v == w {
			return
		}
		t.Fatalf("%s: %v %v, want %v", what, v, err, w)
	}
	ab := []string{a, b}
	v, err := eval(acquire, ab, "tok", 10000)
	want("acquire", v, err, "OK")
	v, err = eval(acquire, ab, "other", 10000)
	want("another's acquire", v, err, nil)
	v, err = eval(acquire, ab, "tok", 30000)
	want("the holder's acquire again", v, err, "OK")
	p, err := eval(left, ab, "tok")
	if err != nil || p.(int64) <= 20000 {
		t.Fatalf("owner TTL after the holder's acquire again for 30 s: %v %v", p, err)
	}
	e.seed(forever, "tok", 0, 0, 1, 2)
	p, err = eval(left, []string{forever, a}, "tok")
	if err != nil || p.(int64) <= 20000 || p.(int64) > 30000 {
		t.Fatalf("owner TTL of a key without expiry and one of 30 s: %v %v", p, err)
	}
	v, err = eval(left, []string{forever, forever}, "tok")
	want("owner TTL of keys without expiry", v, err, int64(-1))
	v, err = eval(left, ab, "other")
	want("owner TTL by another", v, err, int64(-3))
	v, err = eval(left, []string{a, absent}, "tok")
	want("owner TTL with a key absent", v, err, int64(-2))
	v, err = eval(extend, ab, "tok", 40000)
	want("extend", v, err, int64(1))
	v, err = eval(extend, []string{a, absent}, "tok", 40000)
	want("extend with a key absent", v, err, int64(-1))
	v, err = eval(extend, ab, "other", 40000)
	want("extend by another", v, err, int64(0))
	v, err = eval(release, []string{a, absent}, "tok")
	want("release with a key absent", v, err, int64(-1))
	mustEqual(t, "a kept: all or none", count(e.onMasters(a), "tok"), 3)
	v, err = eval(release, ab, "other")
	want("release by another", v, err, int64(0))
	v, err = eval(release, ab, "tok")
	want("release", v, err, int64(1))
	v, err = eval(release, ab, "tok")
	want("release again", v, err, int64(-1))
}

// A release that publishes is checked like every script operation: one
// that SELECTs a database other than the connection's is refused, and
// nothing is released or published.
func TestReleasePublishOtherDatabaseRefused(t *testing.T) {
	const release = `redis.pcall('select', ARGV[2]) if redis.call('get', KEYS[1]) == ARGV[1] then redis.call('del', KEYS[1]) redis.call('publish', KEYS[2], 'x') end`
	e := newEnv(t, 3, func(c *proxy.Config) {
		c.Scripts = []proxy.ScriptConfig{{File: "release.lua", Source: release, Op: "release", TokenArg: 1, DBArg: 2, Publish: "x", OK: "nil", NotOwned: "nil"}}
	})
	key := e.key("k")
	must(e.do("SET", key, "tok", "NX", "PX", 10000))
	_, err := e.do("EVAL", release, 2, key, "ch", "tok", "1")
	if err == nil || err.Error() != "ERR redlock-proxy: the 'release.lua' script selects database 1, the connection is on database 0; SELECT it first" {
		t.Fatalf("release selecting database 1: %v", err)
	}
	if on := e.onMasters(key); count(on, "tok") < 2 {
		t.Fatalf("the refused release took the lock: %v", on)
	}
	if _, err := e.do("EVAL", release, 2, key, "ch", "tok", "0"); err != redis.Nil {
		t.Fatalf("release selecting database 0: %v", err)
	}
	eventually(t, "released", func() bool { return count(e.onMasters(key), "") == 3 })
}

// Symfony Lock's probe of TIME in scripts (it sets its key for a
// millisecond and answers 1) is answered through the proxy as by one
// Redis: on a lock key, its SET runs on the quorum; then the key is gone
// there as on Redis.
func TestSymfonyTimeProbeLikeRedis(t *testing.T) {
	const probe = "\n                local now = redis.call(\"TIME\")\n                redis.call(\"SET\", KEYS[1], \"1\", \"PX\", 1)\n\n\t            return 1\n            "
	e := newEnv(t, 3, nil)
	plain := redistest.Start(t)
	key := e.key("symfony_check_support_time")
	p, r := dialRESP(t, e.addr), dialRESP(t, plain.Addr)
	defer p.close()
	defer r.close()
	mustEqual(t, "the probe", p.do(t, "EVAL", probe, "1", key), r.do(t, "EVAL", probe, "1", key))
	// Without its key the script fails on Redis (SET of nil); the proxy
	// refuses it with its own error.
	if got, want := p.do(t, "EVAL", probe, "0"), r.do(t, "EVAL", probe, "0"); got[0] != '-' || want[0] != '-' {
		t.Fatalf("the probe without a key: %q through the proxy, %q on Redis; want errors", got, want)
	}
	time.Sleep(20 * time.Millisecond)
	mustEqual(t, "GET after the probe", p.do(t, "GET", key), r.do(t, "GET", key))
	mustEqual(t, "on the masters", strings.Join(e.onMasters(key), "|"), "||")
}
