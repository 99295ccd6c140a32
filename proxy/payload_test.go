package proxy_test

import (
	"context"
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/redlock-proxy/redlock-proxy/internal/redistest"
	"github.com/redlock-proxy/redlock-proxy/proxy"
	"github.com/redlock-proxy/redlock-proxy/redlock/engine"
)

// What a lock operation may carry is bounded (proxy.max_lock_value, 64 KB
// by default), and one long value on a lock key does not hold up anyone
// else's lock operations on the pipelines they share (payload.go,
// engine/batch.go).

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
	// Pipelined among others, the refusal keeps its place.
	pipe := e.c.Pipeline()
	a := pipe.SetNX(context.Background(), "lock:"+e.key("a"), "t", time.Minute)
	b := pipe.SetNX(context.Background(), "lock:"+e.key("b"), over, time.Minute)
	c := pipe.SetNX(context.Background(), "lock:"+e.key("c"), "t", time.Minute)
	_, _ = pipe.Exec(context.Background())
	if !a.Val() || b.Err() == nil || !strings.Contains(b.Err().Error(), "exceeds proxy.max_lock_value") || !c.Val() {
		t.Fatalf("pipelined: %v %v, %v, %v %v", a.Val(), a.Err(), b.Err(), c.Val(), c.Err())
	}
	for _, x := range []string{"a", "c"} {
		if _, err := e.do("DEL", "lock:"+e.key(x)); err != nil {
			t.Fatal(err)
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
	eventually(t, "the token on every master", func() bool { return count(e.onMasters(k), exact) == 3 })
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
	eventually(t, "every master holds the 1 MB token", func() bool { return count(e.onMasters(k), over) == 3 })
}

// lockers acquire and release keys of their own in a loop, each on its own
// connection, as an application's lock clients do, and count what fails.
type lockers struct {
	ops, fails atomic.Int64
	mu         sync.Mutex
	errs       []string
	stop       chan struct{}
	wg         sync.WaitGroup
}

func startLockers(e *env, n int) *lockers {
	l := &lockers{stop: make(chan struct{})}
	for i := 0; i < n; i++ {
		l.wg.Add(1)
		go func(i int) {
			defer l.wg.Done()
			c := e.client()
			defer c.Close()
			ctx := context.Background()
			for j := 0; ; j++ {
				select {
				case <-l.stop:
					return
				default:
				}
				k, tok := e.key(fmt.Sprintf("locker%d", i)), fmt.Sprintf("%d-%d", i, j)
				ok, err := c.SetNX(ctx, k, tok, 5*time.Second).Result()
				l.note(err, !ok, "acquire", ok)
				if err != nil || !ok {
					continue
				}
				n, err := c.Eval(ctx, unlockScript, []string{k}, tok).Int()
				l.note(err, n != 1, "release", n)
			}
		}(i)
	}
	return l
}

func (l *lockers) note(err error, wrong bool, what string, got any) {
	l.ops.Add(1)
	if err == nil && !wrong {
		return
	}
	l.fails.Add(1)
	l.mu.Lock()
	if len(l.errs) < 5 {
		l.errs = append(l.errs, fmt.Sprintf("%s: %v %v", what, got, err))
	}
	l.mu.Unlock()
}

func (l *lockers) halt() {
	close(l.stop)
	l.wg.Wait()
}

var markedDownRE = regexp.MustCompile(`master\d+:[^\r]*,marked_down=(\d+),`)

// markedDown sums how many times the proxy marked a master down.
func (e *env) markedDown() int {
	n := 0
	for _, m := range markedDownRE.FindAllStringSubmatch(must(e.do("INFO", "redlock")).(string), -1) {
		d, _ := strconv.Atoi(m[1])
		n += d
	}
	return n
}

// slowLinkEnv is newEnv with each master behind a relay that forwards at
// most 32 KB every 2 ms, about 16 MB/s (a link of 130 Mbit/s): a 25 MB
// value takes more than a second and a half to arrive, far beyond the
// node timeout, whatever the machine's load; a lock command takes a few
// milliseconds more. The node timeout is 500 ms, so that the two CPUs this
// test shares between three masters, the proxy and its clients (and other
// work) do not fail lock commands on their own.
func slowLinkEnv(t *testing.T, mutate func(*proxy.Config)) *env {
	return newEnv(t, 3, func(c *proxy.Config) {
		c.Redlock.NodeTimeout = proxy.Duration{Duration: 500 * time.Millisecond}
		for i, m := range c.Redlock.Masters {
			r := redistest.NewRelay(t, m)
			r.Delay.Store(int64(2 * time.Millisecond))
			c.Redlock.Masters[i] = r.Addr()
		}
		if mutate != nil {
			mutate(c)
		}
	})
}

// longReadRun seeds a 25 MB value on a lock key directly on the masters,
// reads it through the quorum in a loop while four other clients acquire
// and release keys of their own, and returns the lockers' counts and what
// the reader got.
func longReadRun(t *testing.T, e *env, d time.Duration) (l *lockers, reads, served int64, readErr string) {
	big := strings.Repeat("v", 25<<20)
	e.seed(e.key("big"), big, 0, 0, 1, 2)
	l = startLockers(e, 4)
	var nr, ns atomic.Int64
	var last atomic.Value
	stop, done := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(done)
		c := e.client()
		defer c.Close()
		for {
			select {
			case <-stop:
				return
			default:
			}
			v, err := c.Get(context.Background(), e.key("big")).Result()
			nr.Add(1)
			switch {
			case err != nil:
				last.Store(err.Error())
				time.Sleep(10 * time.Millisecond)
			case v == big:
				ns.Add(1)
			default:
				last.Store(fmt.Sprintf("a value of %d bytes", len(v)))
			}
		}
	}()
	time.Sleep(d)
	close(stop)
	<-done
	l.halt()
	readErr, _ = last.Load().(string)
	return l, nr.Load(), ns.Load(), readErr
}

// A 25 MB value on a lock key, written on the masters directly and read
// through the quorum over and over across slow links, fails none of the
// other clients' lock operations, and no master is marked down: with the
// default bound the read is refused without the value leaving the
// masters; with the bound raised it is served, read on connections of its
// own while the lock commands go on on the shared pipelines.
func TestLongValueReadLeavesOthersLocking(t *testing.T) {
	for _, tc := range []struct {
		name  string
		limit proxy.Size
	}{{"refused (default bound)", 64 << 10}, {"served (bound 64 MB)", 64 << 20}} {
		t.Run(tc.name, func(t *testing.T) {
			e := slowLinkEnv(t, func(c *proxy.Config) { c.Proxy.MaxLockValue = tc.limit })
			l, reads, served, readErr := longReadRun(t, e, 5*time.Second)
			t.Logf("%d lock operations, %d failed %v; %d reads of the 25 MB value, %d served; marked down %d times", l.ops.Load(), l.fails.Load(), l.errs, reads, served, e.markedDown())
			if l.fails.Load() != 0 || l.ops.Load() < 100 {
				t.Errorf("lockers: %d of %d operations failed: %v", l.fails.Load(), l.ops.Load(), l.errs)
			}
			if d := e.markedDown(); d != 0 {
				t.Errorf("masters marked down %d times", d)
			}
			switch {
			case tc.limit < 25<<20 && (served != 0 || !strings.Contains(readErr, "is 26214400 bytes, more than proxy.max_lock_value (65536 bytes)")):
				t.Errorf("reads: %d served, last error %q; want the max_lock_value error", served, readErr)
			case tc.limit >= 25<<20 && (served == 0 || served != reads):
				t.Errorf("reads: %d of %d served, last error %q", served, reads, readErr)
			}
		})
	}
}

// The negative control: with the engine's guard off (big values ride the
// shared pipelines, one deadline for a whole batch), the same reads fail
// the other clients' lock operations and get masters marked down.
func TestLongValueReadWithoutGuardFailsOthers(t *testing.T) {
	e := slowLinkEnv(t, func(c *proxy.Config) {
		c.Proxy.MaxLockValue = 64 << 20
		c.GuardsOff = []string{string(engine.GuardBigPayloads)}
	})
	l, reads, served, readErr := longReadRun(t, e, 5*time.Second)
	t.Logf("guard off: %d lock operations, %d failed %v; %d reads, %d served (last error %q); marked down %d times",
		l.ops.Load(), l.fails.Load(), l.errs, reads, served, readErr, e.markedDown())
	if l.fails.Load() == 0 {
		t.Fatalf("with the guard off no lock operation failed (%d): the control shows nothing", l.ops.Load())
	}
}

// An acquire, SET NX GET and GETDEL of a lock key that holds a 25 MB value
// (written on the masters directly, beyond the bound): the acquire is
// refused as for any holder, the value is never brought back (SET NX GET
// and GETDEL answer the bound's error, and GETDEL deletes nothing), and
// the other clients' lock operations go on.
func TestLockCommandsOnLongValue(t *testing.T) {
	e := slowLinkEnv(t, nil)
	k := e.key("big")
	big := strings.Repeat("v", 25<<20)
	e.seed(k, big, 0, 0, 1, 2)
	l := startLockers(e, 4)
	for i := 0; i < 2; i++ {
		if v, err := e.do("SET", k, "tok", "NX", "PX", 10000); err != redis.Nil {
			t.Fatalf("SET NX over a 25 MB value: %v %v; want nil", v, err)
		}
		for _, cmd := range [][]any{{"SET", k, "tok", "NX", "GET", "PX", 10000}, {"GETDEL", k}, {"GETEX", k, "PX", 100}} {
			if _, err := e.do(cmd...); err == nil || !strings.Contains(err.Error(), "is 26214400 bytes, more than proxy.max_lock_value") {
				t.Fatalf("%v over a 25 MB value: %v", cmd[0], err)
			}
		}
	}
	l.halt()
	t.Logf("%d lock operations meanwhile, %d failed %v", l.ops.Load(), l.fails.Load(), l.errs)
	if l.fails.Load() != 0 {
		t.Errorf("lockers: %d of %d operations failed: %v", l.fails.Load(), l.ops.Load(), l.errs)
	}
	for i, m := range e.masters {
		c := m.Client()
		n, err := c.StrLen(context.Background(), k).Result()
		ttl, _ := c.PTTL(context.Background(), k).Result()
		c.Close()
		if err != nil || n != 25<<20 || ttl != -1 {
			t.Errorf("master %d: the 25 MB value is %d bytes, PTTL %v (%v); want it untouched", i, n, ttl, err)
		}
	}
	if d := e.markedDown(); d != 0 {
		t.Errorf("masters marked down %d times", d)
	}
}
