package proxy_test

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/redlock-proxy/redlock-proxy/proxy"
)

// What a lock operation may carry is bounded (proxy.max_lock_value, 64 KB
// by default; payload.go).

// Scripts of the libraries, by the SHA1 of the text each sends: the proxy
// runs a known library script without its text.
const (
	nodeRedlockAcquireSHA = "96da70f7716f27d278a5218544df37fd8b0a5e4c" // node-redlock 5, any number of keys
	redissonAcquireSHA    = "149c5a8bf18676fd99e9e6e24923bd64d9b62f94" // Redisson ≥ 3.19: ARGV lease, "<uuid>:<thread>"
	symfonySaveSHA        = "6fdee501a3714553b74c0d67687b921b90b05d18" // Symfony ≥ 5.2 save (TIME in the script)
	bsmObtainSHA          = "eb0c00d98f6f33b4262419a509002884540f30be" // bsm/redislock 0.10 obtain
	unlockScript          = `if redis.call("get",KEYS[1]) == ARGV[1] then return redis.call("del",KEYS[1]) else return 0 end`
)

// Every kind of lock operation beyond proxy.max_lock_value is refused with
// an error naming the setting, and nothing reaches any master: not the
// issue's 100 MB token in SET NX PX 20000, nor a long key, a long ARGV of
// a recognised script, node-redlock's keys, LOCK.*'s token.
func TestLockOperationBeyondMaxLockValueRefused(t *testing.T) {
	e := newEnv(t, 3, func(c *proxy.Config) { c.Proxy.LockKeys = []string{"lock:*", "semaphore:*"} })
	k := "lock:" + e.key("k")
	over := strings.Repeat("t", 64<<10+1) // one byte beyond 64 KB: the token alone
	longKey := "lock:" + strings.Repeat("k", 64<<10)
	var manyKeys []any // node-redlock: 700 resources of 100 bytes
	for i := 0; i < 700; i++ {
		manyKeys = append(manyKeys, fmt.Sprintf("lock:%s:%095d", e.key("m"), i))
	}
	cases := []struct {
		name string
		args []any
	}{
		{"SET NX PX", []any{"SET", k, over, "NX", "PX", 20000}},
		{"SETNX", []any{"SETNX", k, over}},
		{"SET", []any{"SET", k, over}},
		{"SET GET", []any{"SET", k, over, "GET"}},
		{"SETEX", []any{"SETEX", k, 10, over}},
		{"PSETEX", []any{"PSETEX", k, 10000, over}},
		{"SET NX of a long key", []any{"SET", longKey, "tok", "NX", "PX", 20000}},
		{"GET of a long key", []any{"GET", longKey}},
		{"GETDEL of a long key", []any{"GETDEL", longKey}},
		{"GETEX of a long key", []any{"GETEX", longKey, "PX", 100}},
		{"PEXPIRE of a long key", []any{"PEXPIRE", longKey, 100}},
		{"PTTL of a long key", []any{"PTTL", longKey}},
		{"EXISTS with a long key", []any{"EXISTS", k, longKey}},
		{"DEL with a long key", []any{"DEL", k, longKey}},
		{"unlock script", []any{"EVAL", unlockScript, 1, k, over}},
		{"node-redlock acquire of 700 keys", append(append([]any{"EVALSHA", nodeRedlockAcquireSHA, len(manyKeys)}, manyKeys...), "0123456789abcdef0123456789abcdef", 10000)},
		{"Redisson acquire", []any{"EVALSHA", redissonAcquireSHA, 1, k, 30000, over}},
		{"Symfony save", []any{"EVALSHA", symfonySaveSHA, 1, k, "1700000000.1", over, 30000}},
		{"bsm/redislock obtain", []any{"EVALSHA", bsmObtainSHA, 1, k, over, 22, 10000}},
		{"redis-semaphore acquire", []any{"EVAL", semAcquire, 1, "semaphore:" + e.key("s"), 3, over, 10000, time.Now().UnixMilli()}},
		{"ZREM of a semaphore", []any{"ZREM", "semaphore:" + e.key("s"), over}},
		{"LOCK.ACQUIRE", []any{"LOCK.ACQUIRE", k, 10000, "TOKEN", over}},
		{"LOCK.RELEASE", []any{"LOCK.RELEASE", k, over}},
		{"LOCK.EXTEND", []any{"LOCK.EXTEND", k, over, 10000}},
		{"LOCK.INFO of a long key", []any{"LOCK.INFO", longKey}},
	}
	for _, tc := range cases {
		_, err := e.do(tc.args...)
		if err == nil || !strings.Contains(err.Error(), "exceeds proxy.max_lock_value (65536 bytes)") {
			t.Errorf("%s: got %v, want the max_lock_value refusal", tc.name, err)
		}
	}
	// The issue's own case: a 100 MB token in SET NX PX 20000.
	start := time.Now()
	_, err := e.do("SET", k, strings.Repeat("x", 100<<20), "NX", "PX", 20000)
	t.Logf("SET NX PX 20000 of a 100 MB token refused in %v: %v", time.Since(start).Round(time.Millisecond), err)
	if err == nil || !strings.HasPrefix(err.Error(), "ERR redlock-proxy: lock operation of 104857") {
		t.Fatalf("100 MB token: %v", err)
	}
	for i, m := range e.masters {
		if n := userKeys(t, m); n != 0 {
			t.Errorf("master %d holds %d keys after refused lock operations", i, n)
		}
	}
	e.assertServingKeys()
}

// Every library's lock operation passes the default bound by far, and an
// operation of exactly proxy.max_lock_value bytes of keys and arguments is
// served.
func TestLockOperationWithinMaxLockValueServed(t *testing.T) {
	e := newEnv(t, 3, func(c *proxy.Config) { c.Proxy.LockKeys = []string{"lock:*"} })
	k := "lock:" + e.key("k")
	// The options count too: "NX", "PX", "20000" are 9 bytes.
	exact := strings.Repeat("t", 64<<10-len(k)-9)
	mustEqual(t, "SET NX PX of exactly 64 KB", must(e.do("SET", k, exact, "NX", "PX", 20000)), any("OK"))
	mustEqual(t, "the token on every master", count(e.onMasters(k), exact), 3)
	mustEqual(t, "unlock of exactly 64 KB", must(e.do("EVAL", unlockScript, 1, k, exact)), any(int64(1)))

	var keys []any // node-redlock with 100 resources
	for i := 0; i < 100; i++ {
		keys = append(keys, fmt.Sprintf("lock:%s:resource-%d", e.key("m"), i))
	}
	args := append(append([]any{"EVALSHA", nodeRedlockAcquireSHA, len(keys)}, keys...), "0123456789abcdef0123456789abcdef", 10000)
	mustEqual(t, "node-redlock acquire of 100 keys", must(e.do(args...)), any(int64(100)))
	holder := "2b38a1cd-53c6-4b1e-9b31-3f0c5c9c4a21:57"
	if v, err := e.do("EVALSHA", redissonAcquireSHA, 1, "lock:"+e.key("r"), 30000, holder); err != redis.Nil {
		t.Fatalf("Redisson acquire: %v %v", v, err)
	}
	mustEqual(t, "LOCK.ACQUIRE with a UUID token", fmt.Sprint(must(e.do("LOCK.ACQUIRE", "lock:"+e.key("n"), 10000, "TOKEN", "5a0e1c8e-1b65-4c57-8d0c-6c2f3a3d9f10")))[:38], "[5a0e1c8e-1b65-4c57-8d0c-6c2f3a3d9f10 ")
}

// The negative control: with the bound switched off (a test-only guard),
// an oversized token is written on every master.
func TestMaxLockValueOffWritesEveryMaster(t *testing.T) {
	e := newEnv(t, 3, func(c *proxy.Config) { c.GuardsOff = []string{"max-lock-value"} })
	k := e.key("k")
	over := strings.Repeat("t", 1<<20)
	mustEqual(t, "SET NX PX of a 1 MB token, bound off", must(e.do("SET", k, over, "NX", "PX", 20000)), any("OK"))
	mustEqual(t, "masters holding the 1 MB token", count(e.onMasters(k), over), 3)
}
