package proxy_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/redlock-proxy/redlock-proxy/internal/redistest"
	"github.com/redlock-proxy/redlock-proxy/proxy"
	"github.com/redlock-proxy/redlock-proxy/redlock/engine"
)

// Every TTL the proxy writes on a lock key stretches the restart guard, not
// only those granted by acquires. A lock granted for 2 s is extended to
// 30 s by each way a client can, then two masters restart empty (the guard
// window is 1 s): 3 s after the grant a second client must still be refused.
// With the stretch off, the guard covers only the 2 s of the grant, and the
// second client gets the lock its holder keeps for 27 s more.
func TestEveryTTLWrittenStretchesTheGuard(t *testing.T) {
	writers := []struct {
		name      string
		native    bool // taken with LOCK.ACQUIRE
		redisson  bool // taken, and contended, with Redisson's lock script
		semaphore bool // a permit of a one-permit semaphore, taken and contended with redis-semaphore's acquire
		extend    func(e *env, key string) (any, error)
	}{
		{"extend_script", false, false, false, func(e *env, k string) (any, error) { return e.do("EVAL", extendScript, 1, k, "A", 30000) }},
		{"additive_extend_script", false, false, false, func(e *env, k string) (any, error) {
			return e.do("EVAL", redistest.RedisPyExtend, 1, k, "A", 28000, "0")
		}},
		{"LOCK.EXTEND", true, false, false, func(e *env, k string) (any, error) { return e.do("LOCK.EXTEND", k, "A", 30000) }},
		{"PEXPIRE", false, false, false, func(e *env, k string) (any, error) { return e.do("PEXPIRE", k, 30000) }},
		{"EXPIREAT", false, false, false, func(e *env, k string) (any, error) { return e.do("EXPIREAT", k, time.Now().Add(31*time.Second).Unix()) }},
		{"SET_XX_PX", false, false, false, func(e *env, k string) (any, error) { return e.do("SET", k, "A", "XX", "PX", 30000) }},
		{"GETEX", false, false, false, func(e *env, k string) (any, error) { return e.do("GETEX", k, "PX", 30000) }},
		{"redisson_renewal", false, true, false, func(e *env, k string) (any, error) {
			return e.do("EVAL", redistest.RedissonRenewLe343, 1, k, 30000, "A")
		}},
		{"redisson_batched_renewal", false, true, false, func(e *env, k string) (any, error) {
			return e.do("EVAL", redistest.RedissonRenewBatch, 1, k, 30000, "A")
		}},
		{"semaphore_refresh", false, false, true, func(e *env, k string) (any, error) { return e.semRefresh(k, "A", 1, 30000) }},
		// bsm/redislock 0.10's refresh, over two keys (the second taken for
		// 2 s too).
		{"bsm_refresh", false, false, false, func(e *env, k string) (any, error) {
			must(e.do("SET", k+":2", "A", "NX", "PX", 2000))
			return e.do(bsmArgsAny(bsmRefresh, []string{k, k + ":2"}, "A", "30000")...)
		}},
	}
	for _, w := range writers {
		for _, stretch := range []bool{true, false} {
			name := w.name + map[bool]string{true: "/on", false: "/off_grants_the_lock_twice"}[stretch]
			t.Run(name, func(t *testing.T) {
				t.Parallel()
				e, _ := newGuardedEnv(t, 3, time.Second, func(c *proxy.Config) {
					if !stretch {
						c.GuardsOff = []string{string(engine.GuardTTLStretch)}
					}
				})
				key := e.key("k")
				granted := time.Now()
				switch {
				case w.native:
					must(e.do("LOCK.ACQUIRE", key, 2000, "TOKEN", "A"))
				case w.redisson:
					if v, err := e.do("EVAL", redistest.RedissonAcquireGe319, 1, key, 2000, "A"); err != redis.Nil {
						t.Fatalf("acquire: %v %v", v, err)
					}
				case w.semaphore:
					mustEqual(t, "acquire", must(e.semAcq(key, "A", 1, 2000)), any(int64(1)))
				default:
					mustEqual(t, "acquire", must(e.do("SET", key, "A", "NX", "PX", 2000)), any("OK"))
				}
				v, err := w.extend(e, key)
				if err != nil || v == int64(0) {
					t.Fatalf("extend: %v %v", v, err)
				}
				eventually(t, "extended on every master", func() bool {
					n := 0
					for _, m := range e.masters {
						c := m.Client()
						if p, _ := c.PTTL(t.Context(), key).Result(); p > 20*time.Second {
							n++
						}
						c.Close()
					}
					return n == 3
				})
				e.masters[0].Restart()
				e.masters[1].Restart()
				for time.Since(granted) < 3*time.Second {
					_, _ = e.do("GET", key) // the proxy reconnects, and sees the restarts
					time.Sleep(100 * time.Millisecond)
				}
				var b any
				switch {
				case w.redisson:
					// Redisson's contender: nil is granted.
					if b, err = e.do("EVAL", redistest.RedissonAcquireGe319, 1, key, 5000, "B"); err == redis.Nil {
						b, err = "OK", nil
					}
				case w.semaphore:
					if b, err = e.semAcq(key, "B", 1, 5000); b == int64(1) {
						b = "OK"
					}
				default:
					b, err = e.do("SET", key, "B", "NX", "PX", 5000)
				}
				t.Logf("%s after the restarts: %v %v", fmt.Sprint(time.Since(granted).Round(time.Millisecond)), b, err)
				switch {
				case stretch && b == "OK":
					t.Fatal("a second client was granted a lock extended to 30 s, 3 s after it was granted")
				case !stretch && b != "OK":
					t.Fatalf("with the stretch off the second client should (unsafely) be granted it; got %v %v", b, err)
				}
			})
		}
	}
}
