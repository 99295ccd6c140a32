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

// waiters reads INFO's lock_waiters.
func waiters(t *testing.T, c *redis.Client) int {
	t.Helper()
	s, err := c.Info(context.Background(), "clients").Result()
	if err != nil {
		t.Fatal(err)
	}
	var n int
	for _, l := range strings.Split(s, "\r\n") {
		if v, ok := strings.CutPrefix(l, "lock_waiters:"); ok {
			fmt.Sscan(v, &n)
		}
	}
	return n
}

// slowPoll makes the poll fallback too slow to pass for a prompt wake.
func slowPoll(c *proxy.Config) { c.Proxy.LockWaitPoll = proxy.Duration{Duration: 5 * time.Second} }

// Waiters at one proxy are served in the order they came, each woken by the
// previous holder's release, long before the 5 s poll would have.
func TestLockCmdWaitFIFO(t *testing.T) {
	e := newEnv(t, 3, slowPoll)
	key := e.key("k")
	gr := grantReader(t)
	if _, _, _, ok := gr(e.do("LOCK.ACQUIRE", key, 30000, "TOKEN", "holder")); !ok {
		t.Fatal("holder not granted")
	}
	type got struct {
		who  int
		wait time.Duration // from the previous release to this grant
		err  error
	}
	const n = 4
	order := make(chan got, n)
	released := make(chan time.Time, n+1)
	for i := 0; i < n; i++ {
		c := e.client()
		defer c.Close()
		go func(i int) {
			tok := fmt.Sprintf("w%d", i)
			v, err := c.Do(context.Background(), "LOCK.ACQUIRE", key, 30000, "TOKEN", tok, "WAIT", 20000).Result()
			at := time.Now()
			if err != nil {
				order <- got{who: i, err: err}
				return
			}
			if a := v.([]any); a[0] != tok {
				order <- got{who: i, err: fmt.Errorf("reply %v", a)}
				return
			}
			order <- got{who: i, wait: at.Sub(<-released)}
			time.Sleep(20 * time.Millisecond)
			released <- time.Now()
			c.Do(context.Background(), "LOCK.RELEASE", key, tok)
		}(i)
		// The next waiter starts once this one is queued.
		eventually(t, "waiter queued", func() bool { return waiters(t, e.c) == i+1 })
	}
	released <- time.Now()
	if v, _ := e.do("LOCK.RELEASE", key, "holder"); v != int64(1) {
		t.Fatalf("holder's release: %v", v)
	}
	for i := 0; i < n; i++ {
		g := <-order
		if g.err != nil {
			t.Fatalf("waiter %d: %v", g.who, g.err)
		}
		if g.who != i {
			t.Fatalf("grant %d went to waiter %d: not first come, first served", i, g.who)
		}
		if g.wait > time.Second {
			t.Fatalf("waiter %d granted %v after the release; the wake did not work", i, g.wait)
		}
	}
}

// A lock left to expire is taken by a waiter when its TTL runs out, not at
// the next poll.
func TestLockCmdWaitExpiry(t *testing.T) {
	e := newEnv(t, 3, slowPoll)
	key := e.key("k")
	gr := grantReader(t)
	gr(e.do("LOCK.ACQUIRE", key, 800, "TOKEN", "holder"))
	start := time.Now()
	tok, _, _, ok := gr(e.do("LOCK.ACQUIRE", key, 10000, "WAIT", 10000))
	if d := time.Since(start); !ok || tok == "holder" || d > 2*time.Second {
		t.Fatalf("granted %v after %v; the expiry should have woken the waiter within about 0.8 s", ok, d)
	}
}

// WAIT gives up after its time with the null reply, and queues nothing.
func TestLockCmdWaitTimeout(t *testing.T) {
	e := newEnv(t, 3, nil)
	key := e.key("k")
	gr := grantReader(t)
	gr(e.do("LOCK.ACQUIRE", key, 30000))
	start := time.Now()
	_, err := e.do("LOCK.ACQUIRE", key, 1000, "WAIT", 300)
	if d := time.Since(start); err != redis.Nil || d < 300*time.Millisecond || d > 3*time.Second {
		t.Fatalf("WAIT 300: %v after %v", err, d)
	}
	if n := waiters(t, e.c); n != 0 {
		t.Fatalf("%d waiters left", n)
	}
	for _, c := range []struct{ wait, want string }{{"-1", "ERR timeout is negative"}, {"x", "ERR timeout is not an integer or out of range"}} {
		if _, err := e.do("LOCK.ACQUIRE", key, 1000, "WAIT", c.wait); err == nil || err.Error() != c.want {
			t.Fatalf("WAIT %s: %v, want %s", c.wait, err, c.want)
		}
	}
}

// A release through another proxy is noticed by the poll fallback.
func TestLockCmdWaitOtherProxy(t *testing.T) {
	e := newEnv(t, 3, func(c *proxy.Config) { c.Proxy.LockWaitPoll = proxy.Duration{Duration: 300 * time.Millisecond} })
	key := e.key("k")
	gr := grantReader(t)
	cfg := proxy.DefaultConfig()
	cfg.Proxy.Listen = "127.0.0.1:0"
	cfg.Redlock.Masters = redistest.Addrs(e.masters)
	cfg.Redlock.RestartGuard = false
	other, err := proxy.New(cfg, zerolog.Nop())
	if err != nil {
		t.Fatal(err)
	}
	a, err := other.Listen()
	if err != nil {
		t.Fatal(err)
	}
	go other.Serve()
	defer other.Close()
	oc := redis.NewClient(&redis.Options{Addr: a.String(), MaxRetries: -1})
	defer oc.Close()
	if _, _, _, ok := gr(oc.Do(context.Background(), "LOCK.ACQUIRE", key, 30000, "TOKEN", "holder").Result()); !ok {
		t.Fatal("holder not granted")
	}
	done := make(chan error, 1)
	go func() {
		_, err := e.do("LOCK.ACQUIRE", key, 10000, "WAIT", 20000)
		done <- err
	}()
	eventually(t, "waiter queued", func() bool { return waiters(t, e.c) == 1 })
	oc.Do(context.Background(), "LOCK.RELEASE", key, "holder")
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(3 * time.Second):
		t.Fatal("the waiter did not notice a release through another proxy")
	}
}

// A waiter whose client has closed its connection gives up its place: the
// release wakes it, it sees the client gone and takes no lock, and the next
// waiter is granted at once. (Otherwise the departed client would be
// granted a lock nobody holds, and the next waiter would wait out its TTL:
// with both the check in the wait loop and the release of a lock granted to
// a departed client turned off, this test fails that way.)
func TestLockCmdWaitClientGone(t *testing.T) {
	e := newEnv(t, 3, slowPoll)
	key := e.key("k")
	gr := grantReader(t)
	if _, _, _, ok := gr(e.do("LOCK.ACQUIRE", key, 30000, "TOKEN", "holder")); !ok {
		t.Fatal("holder not granted")
	}
	ghost := e.dial()
	cmd := fmt.Sprintf("*7\r\n$12\r\nLOCK.ACQUIRE\r\n$%d\r\n%s\r\n$5\r\n30000\r\n$5\r\nTOKEN\r\n$5\r\nghost\r\n$4\r\nWAIT\r\n$5\r\n20000\r\n", len(key), key)
	if _, err := ghost.Write([]byte(cmd)); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the ghost queued", func() bool { return waiters(t, e.c) == 1 })
	ghost.Close()

	next := e.client()
	defer next.Close()
	got := make(chan any, 1)
	go func() {
		v, err := next.Do(context.Background(), "LOCK.ACQUIRE", key, 30000, "TOKEN", "next", "WAIT", 4000).Result()
		if err != nil {
			got <- err
			return
		}
		got <- v
	}()
	eventually(t, "the next waiter queued", func() bool { return waiters(t, e.c) == 2 })
	released := time.Now()
	if v, _ := e.do("LOCK.RELEASE", key, "holder"); v != int64(1) {
		t.Fatalf("holder's release: %v", v)
	}
	v := <-got
	a, ok := v.([]any)
	if !ok || len(a) != 3 || a[0] != "next" {
		t.Fatalf("the waiter behind a departed client: %v (after %v)", v, time.Since(released))
	}
	if d := time.Since(released); d > 2*time.Second {
		t.Fatalf("granted %v after the release: not woken by it", d)
	}
	if vals := e.onMasters(key); count(vals, "ghost") > 0 {
		t.Fatalf("a lock for the departed client: %v", vals)
	}
}

// A REENTRANT WAIT by the token that holds the key is granted at once,
// ahead of the clients waiting for it: they wait for that token's holds
// to end anyway, and a nested blocking lock would otherwise wait for
// itself until its WAIT ran out.
func TestLockCmdReentrantWaitByHolder(t *testing.T) {
	e := newEnv(t, 3, slowPoll)
	key := e.key("k")
	gr := grantReader(t)
	if _, _, _, ok := gr(e.do("LOCK.ACQUIRE", key, 30000, "TOKEN", "t")); !ok {
		t.Fatal("holder not granted")
	}
	w := e.client()
	defer w.Close()
	waited := make(chan error, 1)
	go func() {
		_, err := w.Do(context.Background(), "LOCK.ACQUIRE", key, 30000, "TOKEN", "w", "WAIT", 20000).Result()
		waited <- err
	}()
	eventually(t, "the other client waits", func() bool { return waiters(t, e.c) == 1 })
	start := time.Now()
	_, _, _, ok := gr(e.do("LOCK.ACQUIRE", key, 30000, "TOKEN", "t", "REENTRANT", "WAIT", 1000))
	if !ok {
		t.Fatal("the holder's nested REENTRANT WAIT was not granted: it queued behind the waiter for the lock it holds")
	}
	if d := time.Since(start); d > 500*time.Millisecond {
		t.Fatalf("the nested acquire took %v", d)
	}
	info := fields(t, must(e.do("LOCK.INFO", key)))
	mustEqual(t, "holds", info["holds"], any(int64(2)))
	// The waiter is served once both holds are given back.
	mustEqual(t, "first release", must(e.do("LOCK.RELEASE", key, "t")), any(int64(1)))
	mustEqual(t, "the waiter still waits", waiters(t, e.c), 1)
	mustEqual(t, "second release", must(e.do("LOCK.RELEASE", key, "t")), any(int64(1)))
	select {
	case err := <-waited:
		if err != nil {
			t.Fatalf("waiter: %v", err)
		}
	case <-time.After(3 * time.Second):
		t.Fatal("the waiter was not granted the lock after the last hold was given back")
	}
}
