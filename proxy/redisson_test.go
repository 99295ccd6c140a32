package proxy_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/redlock-proxy/redlock-proxy/internal/redistest"
)

// redissonVersion is one generation of Redisson's lock scripts.
type redissonVersion struct {
	name                   string
	acquire, unlock, renew string
	unlockArgs             int  // 3 (≤ 3.21), 4 (3.22–3.23: the publish command), 5 (≥ 3.24: the latch)
	batch                  bool // ≥ 3.44: LockTask's batched renewal
	evalsha                bool // ≥ 3.46: useScriptCache, EVALSHA first
}

var redissonVersions = []redissonVersion{
	{name: "3.12", acquire: redistest.RedissonAcquireLe312, unlock: redistest.RedissonUnlock311, renew: redistest.RedissonRenewLe343, unlockArgs: 3},
	{name: "3.18", acquire: redistest.RedissonAcquire313, unlock: redistest.RedissonUnlock311, renew: redistest.RedissonRenewLe343, unlockArgs: 3},
	{name: "3.21", acquire: redistest.RedissonAcquireGe319, unlock: redistest.RedissonUnlock311, renew: redistest.RedissonRenewLe343, unlockArgs: 3},
	{name: "3.23", acquire: redistest.RedissonAcquireGe319, unlock: redistest.RedissonUnlock322, renew: redistest.RedissonRenewLe343, unlockArgs: 4},
	{name: "3.43", acquire: redistest.RedissonAcquireGe319, unlock: redistest.RedissonUnlockGe324, renew: redistest.RedissonRenewLe343, unlockArgs: 5},
	{name: "3.44", acquire: redistest.RedissonAcquireGe319, unlock: redistest.RedissonUnlockGe324, renew: redistest.RedissonRenewBatch, unlockArgs: 5, batch: true},
	{name: "3.46", acquire: redistest.RedissonAcquireGe319, unlock: redistest.RedissonUnlockGe324, renew: redistest.RedissonRenewBatch, unlockArgs: 5, batch: true, evalsha: true},
}

// redissonClient sends what Redisson sends for one lock: by EVAL, or from
// 3.46 by EVALSHA, with SCRIPT LOAD and EVALSHA again on NOSCRIPT.
type redissonClient struct {
	c   *redis.Client
	v   redissonVersion
	key string
}

func (r redissonClient) eval(script string, keys []string, args ...any) string {
	ctx := context.Background()
	if !r.v.evalsha {
		return replyOf(r.c.Eval(ctx, script, keys, args...).Result())
	}
	sha := redis.NewScript(script).Hash()
	v, err := r.c.EvalSha(ctx, sha, keys, args...).Result()
	if err != nil && strings.HasPrefix(err.Error(), "NOSCRIPT") {
		if _, err := r.c.ScriptLoad(ctx, script).Result(); err != nil {
			return replyOf(nil, err)
		}
		v, err = r.c.EvalSha(ctx, sha, keys, args...).Result()
	}
	return replyOf(v, err)
}

func (r redissonClient) channel() string { return "redisson_lock__channel:{" + r.key + "}" }

func (r redissonClient) lock(holder string, lease int64) string {
	return r.eval(r.v.acquire, []string{r.key}, lease, holder)
}

func (r redissonClient) unlock(holder, request string) string {
	args := []any{0, 30000, holder, "publish", 5000}[:r.v.unlockArgs]
	keys := []string{r.key, r.channel()}
	if r.v.unlockArgs == 5 {
		keys = append(keys, "redisson_unlock_latch:{"+r.key+"}:"+request)
	}
	return r.eval(r.v.unlock, keys, args...)
}

// afterUnlock is what Redisson sends once an unlock is answered: from
// 3.24, DEL of its latch.
func (r redissonClient) afterUnlock(request string) {
	if r.v.unlockArgs == 5 {
		r.c.Del(context.Background(), "redisson_unlock_latch:{"+r.key+"}:"+request)
	}
}

// renew is the watchdog's renewal: for one lock, the single and the
// batched script take the same arguments.
func (r redissonClient) renew(holder string) string {
	return r.eval(r.v.renew, []string{r.key}, 30000, holder)
}

func (r redissonClient) forceUnlock() string {
	return r.eval(redistest.RedissonForceUnlock, []string{r.key, r.channel()}, 0, "publish")
}

// replyOf writes a reply as a comparable string; a PTTL is compared
// within a second (pttl:).
func replyOf(v any, err error) string {
	switch {
	case err == redis.Nil:
		return "nil"
	case err != nil:
		return "err:" + err.Error()
	}
	return fmt.Sprint(v)
}

// Redisson's RLock, replayed at the wire for two owners in every
// generation of its scripts, through the proxy and on one plain Redis:
// the replies match, the hash is on a quorum of masters while held, and a
// subscriber through the proxy gets exactly one unlock message per release.
func TestRedissonLockAtTheWire(t *testing.T) {
	e := newEnv(t, 3, nil)
	plain := redistest.Start(t)
	// The same client options on both sides (RESP3, as go-redis v9 speaks
	// by default).
	pc := redis.NewClient(&redis.Options{Addr: plain.Addr, MaxRetries: -1, ReadTimeout: 5 * time.Second})
	defer pc.Close()
	ctx := context.Background()
	for _, v := range redissonVersions {
		t.Run(v.name, func(t *testing.T) {
			key := e.key("lock-" + v.name)
			prox, one := redissonClient{c: e.c, v: v, key: key}, redissonClient{c: pc, v: v, key: key}
			subP := e.client().Subscribe(ctx, prox.channel())
			defer subP.Close()
			subOne := pc.Subscribe(ctx, one.channel())
			defer subOne.Close()
			for _, s := range []*redis.PubSub{subP, subOne} {
				if _, err := s.Receive(ctx); err != nil {
					t.Fatal(err)
				}
			}
			const a, b = "6f3e1a52-0c0b-4b35-9e1c-3d5a3e0b1f11:1", "0d9c2c4e-7a41-4f7e-8f8a-2b3c4d5e6f70:57"
			held := func(what, holder, holds string) {
				t.Helper()
				n := 0
				for _, m := range e.masters {
					c := m.Client()
					if h, _ := c.HGet(ctx, key, holder).Result(); h == holds {
						n++
					}
					c.Close()
				}
				if n < 2 {
					t.Fatalf("%s: %s holds %s on %d masters, want a majority", what, holder, holds, n)
				}
			}
			step := func(what string, f func(r redissonClient) string, want string) {
				t.Helper()
				got, ref := f(prox), f(one)
				if strings.HasPrefix(want, "pttl") {
					var gp, rp int64
					if _, err := fmt.Sscan(got, &gp); err != nil || gp <= 25000 || gp > 30000 {
						t.Fatalf("%s: proxy answered %q, want the holder's PTTL", what, got)
					}
					if _, err := fmt.Sscan(ref, &rp); err != nil || rp-gp > 1000 || gp-rp > 1000 {
						t.Fatalf("%s: proxy answered %s, one Redis %s", what, got, ref)
					}
					return
				}
				if got != ref || got != want {
					t.Fatalf("%s: proxy answered %q, one Redis %q, want %q", what, got, ref, want)
				}
			}
			renewed := "1"
			notRenewed := "0"
			if v.batch {
				renewed, notRenewed = "[1]", "[0]"
			}
			step("A locks", func(r redissonClient) string { return r.lock(a, 30000) }, "nil")
			held("A locks", a, "1")
			step("A locks again (reentrant)", func(r redissonClient) string { return r.lock(a, 30000) }, "nil")
			held("A reenters", a, "2")
			do := func(args ...any) func(r redissonClient) string {
				return func(r redissonClient) string { return replyOf(r.c.Do(ctx, args...).Result()) }
			}
			// What Redisson reads of its lock: isLocked, getHoldCount,
			// isHeldByThread, remainTimeToLive; and the rest of the hash.
			step("EXISTS", do("exists", key), "1")
			step("HGET (hold count)", do("hget", key, a), "2")
			step("HEXISTS of the holder", do("hexists", key, a), "1")
			step("HEXISTS of another", do("hexists", key, b), "0")
			step("PTTL", do("pttl", key), "pttl")
			step("GET of the hash", do("get", key), "err:"+wrongTypeErr)
			step("B is refused with the TTL", func(r redissonClient) string { return r.lock(b, 30000) }, "pttl")
			step("the watchdog renews A", func(r redissonClient) string { return r.renew(a) }, renewed)
			step("B's renewal fails", func(r redissonClient) string { return r.renew(b) }, notRenewed)
			step("A unlocks once: still held", func(r redissonClient) string { return r.unlock(a, "r1") }, "0")
			held("A holds once", a, "1")
			for _, r := range []redissonClient{prox, one} {
				r.afterUnlock("r1")
			}
			step("B is refused still", func(r redissonClient) string { return r.lock(b, 30000) }, "pttl")
			step("A unlocks twice: released", func(r redissonClient) string { return r.unlock(a, "r2") }, "1")
			if v.unlockArgs == 5 {
				// A retried unlock with the same latch answers again and
				// publishes nothing more.
				step("A's unlock retried", func(r redissonClient) string { return r.unlock(a, "r2") }, "1")
			}
			for _, r := range []redissonClient{prox, one} {
				r.afterUnlock("r2")
			}
			step("EXISTS after the release", do("exists", key), "0")
			step("PTTL after the release", do("pttl", key), "-2")
			step("HGET after the release", do("hget", key, a), "nil")
			step("A unlocks a third time: not held", func(r redissonClient) string { return r.unlock(a, "r3") }, "nil")
			step("B, woken, locks", func(r redissonClient) string { return r.lock(b, 30000) }, "nil")
			held("B locks", b, "1")
			step("A is refused", func(r redissonClient) string { return r.lock(a, 30000) }, "pttl")
			step("forceUnlock", func(r redissonClient) string { return r.forceUnlock() }, "1")
			step("forceUnlock again", func(r redissonClient) string { return r.forceUnlock() }, "0")
			eventually(t, "gone from every master", func() bool { return count(e.onMastersType(key), "none") == 3 })
			// One message per release: the unlock's and forceUnlock's.
			for name, s := range map[string]*redis.PubSub{"through the proxy": subP, "on one Redis": subOne} {
				ch := s.Channel()
				for i := 0; i < 2; i++ {
					select {
					case m := <-ch:
						if m.Payload != "0" {
							t.Fatalf("%s: message %q, want Redisson's UNLOCK_MESSAGE 0", name, m.Payload)
						}
					case <-time.After(2 * time.Second):
						t.Fatalf("%s: %d unlock messages, want 2", name, i)
					}
				}
				select {
				case m := <-ch:
					t.Fatalf("%s: a third message %v", name, m)
				case <-time.After(200 * time.Millisecond):
				}
			}
		})
	}
}

const wrongTypeErr = "WRONGTYPE Operation against a key holding the wrong kind of value"

// onMastersType returns the type of key on each master.
func (e *env) onMastersType(key string) []string {
	out := make([]string, len(e.masters))
	for i, m := range e.masters {
		c := m.Client()
		out[i], _ = c.Type(context.Background(), key).Result()
		c.Close()
	}
	return out
}

// The quorum rules of a Redisson lock whose copies differ between masters:
// a holder on a minority does not keep others out; a refused reentry gives
// back only the hold it took, where it took it, and leaves the other
// holder's hash alone; a split answers a TTL and leaves nothing behind.
func TestRedissonQuorumRules(t *testing.T) {
	e := newEnv(t, 3, nil)
	ctx := context.Background()
	seed := func(key, holder string, holds int64, idx ...int) {
		t.Helper()
		for _, i := range idx {
			c := e.masters[i].Client()
			c.HSet(ctx, key, holder, holds)
			c.PExpire(ctx, key, 20*time.Second)
			c.Close()
		}
	}
	holds := func(key, holder string) []string {
		out := make([]string, len(e.masters))
		for i, m := range e.masters {
			c := m.Client()
			out[i], _ = c.HGet(ctx, key, holder).Result()
			c.Close()
		}
		return out
	}
	lock := func(key, holder string) (any, error) {
		return e.do("EVAL", redistest.RedissonAcquireGe319, 1, key, 30000, holder)
	}

	const a, b, c = "6f3e1a52-0c0b-4b35-9e1c-3d5a3e0b1f11:1", "0d9c2c4e-7a41-4f7e-8f8a-2b3c4d5e6f70:57", "9a8b7c6d-5e4f-4a3b-8c2d-1e0f9a8b7c6d:3"
	// B on one master only: A is granted on the other two.
	k1 := e.key("minority")
	seed(k1, b, 1, 0)
	if v, err := lock(k1, a); err != redis.Nil {
		t.Fatalf("A with B on a minority: %v %v, want nil (granted)", v, err)
	}
	if got := holds(k1, a); count(got, "1") != 2 {
		t.Fatalf("A's holds: %v", got)
	}
	mustEqual(t, "B's renewal on a minority", replyOf(e.do("EVAL", redistest.RedissonRenewLe343, 1, k1, 30000, b)), "0")

	// A once on master 0, B on the others: A's reentry is refused with B's
	// TTL, and master 0 gives back the hold it took, not A's first one.
	k2 := e.key("reentry")
	seed(k2, a, 1, 0)
	seed(k2, b, 3, 1, 2)
	v, err := lock(k2, a)
	if p, ok := v.(int64); err != nil || !ok || p <= 15000 || p > 20000 {
		t.Fatalf("A's refused reentry: %v %v, want B's PTTL", v, err)
	}
	eventually(t, "the reentry given back", func() bool { return count(holds(k2, a), "1") == 1 })
	mustEqual(t, "B's hash", fmt.Sprint(holds(k2, b)), "[ 3 3]")
	mustEqual(t, "HGET B's holds through the proxy", replyOf(e.do("HGET", k2, b)), "3")
	mustEqual(t, "A's unlock: not held", replyOf(e.do("EVAL", redistest.RedissonUnlock311, 2, k2, "ch", 0, 30000, a)), "nil")

	// B on master 0, C on master 1: no quorum for A, whose copy on master
	// 2 is taken back.
	k3 := e.key("split")
	seed(k3, b, 1, 0)
	seed(k3, c, 1, 1)
	if v, err := lock(k3, a); err != nil || v.(int64) <= 0 {
		t.Fatalf("A in a split: %v %v, want a TTL", v, err)
	}
	eventually(t, "A's copy taken back", func() bool { return count(holds(k3, a), "") == 3 })
	mustEqual(t, "EXISTS of a split lock", replyOf(e.do("EXISTS", k3)), "0")

	// Counts that differ: a quorum still holds after one unlock when the
	// quorum-th largest count is still positive.
	k4 := e.key("counts")
	seed(k4, a, 2, 0, 1)
	seed(k4, a, 1, 2)
	mustEqual(t, "HGET of differing counts", replyOf(e.do("HGET", k4, a)), "2")
	mustEqual(t, "first unlock", replyOf(e.do("EVAL", redistest.RedissonUnlock311, 2, k4, "ch", 0, 30000, a)), "0")
	mustEqual(t, "second unlock", replyOf(e.do("EVAL", redistest.RedissonUnlock311, 2, k4, "ch", 0, 30000, a)), "1")
	eventually(t, "released everywhere", func() bool { return count(e.onMastersType(k4), "none") == 3 })

	// Two masters down: NOQUORUM, never "not held" or a TTL.
	k5 := e.key("noquorum")
	e.masters[1].Kill()
	e.masters[2].Kill()
	if _, err := lock(k5, a); err == nil || !strings.HasPrefix(err.Error(), "NOQUORUM") {
		t.Fatalf("lock with two masters down: %v", err)
	}
	if _, err := e.do("EVAL", redistest.RedissonUnlock311, 2, k1, "ch", 0, 30000, a); err == nil || !strings.HasPrefix(err.Error(), "NOQUORUM") {
		t.Fatalf("unlock with two masters down: %v", err)
	}
}

// Redisson's fair and read/write locks are refused by name.
func TestRedissonUnsupportedLocks(t *testing.T) {
	e := newEnv(t, 3, nil)
	key := e.key("k")
	_, err := e.do("EVAL", "return 1", 3, key, "redisson_lock_queue:{"+key+"}", "redisson_lock_timeout:{"+key+"}", 30000, "A", 1)
	if err == nil || !strings.Contains(err.Error(), "fair lock (RFairLock) is not supported") {
		t.Fatalf("fair lock: %v", err)
	}
	_, err = e.do("EVAL", "local mode = redis.call('hget', KEYS[1], 'mode'); return mode", 1, key, 30000, "A")
	if err == nil || !strings.Contains(err.Error(), "read/write lock (RReadWriteLock) is not supported") {
		t.Fatalf("read/write lock: %v", err)
	}
}
