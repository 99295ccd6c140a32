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

// leases reads INFO's lock_leases.
func leases(t *testing.T, c *redis.Client) string {
	t.Helper()
	s, _ := c.Info(context.Background(), "clients").Result()
	for _, l := range strings.Split(s, "\r\n") {
		if v, ok := strings.CutPrefix(l, "lock_leases:"); ok {
			return v
		}
	}
	return ""
}

// holder reads LOCK.INFO's quorum token ("" for none).
func holder(t *testing.T, e *env, key string) string {
	t.Helper()
	v, err := e.do("LOCK.INFO", key)
	if err != nil && strings.HasPrefix(err.Error(), "NOQUORUM") {
		return "<" + err.Error() + ">" // not known yet: a master does not answer
	}
	if err != nil {
		t.Fatal(err)
	}
	s, _ := v.([]any)[1].(string)
	return s
}

// A lease outlives its TTL while the connection is open, and is released
// as soon as the connection closes, long before it would expire.
func TestLockCmdLeaseBoundToConnection(t *testing.T) {
	e := newEnv(t, 3, func(c *proxy.Config) { c.Proxy.LeaseTTL = proxy.Duration{Duration: 3 * time.Second} })
	key := e.key("k")
	a := e.client()
	tok, _, v, ok := grantReader(t)(a.Do(context.Background(), "LOCK.ACQUIRE", key, "LEASE").Result())
	if !ok || v <= 0 || v > 3000 {
		t.Fatalf("LEASE: %v, validity %d", ok, v)
	}
	time.Sleep(4 * time.Second) // beyond the lease TTL: renewed meanwhile
	if h := holder(t, e, key); h != tok {
		t.Fatalf("after 4 s the holder is %q, want the lease %q", h, tok)
	}
	a.Close()
	closed := time.Now()
	eventually(t, "released on close", func() bool { return holder(t, e, key) == "" })
	if d := time.Since(closed); d > time.Second {
		t.Fatalf("released %v after the close: it expired rather than being released", d)
	}
	eventually(t, "no lease left", func() bool { return leases(t, e.c) == "0" })
}

// LOCK.RELEASE of a lease ends its renewals; a later holder is left alone.
func TestLockCmdLeaseRelease(t *testing.T) {
	e := newEnv(t, 3, func(c *proxy.Config) { c.Proxy.LeaseTTL = proxy.Duration{Duration: 300 * time.Millisecond} })
	key := e.key("k")
	tok, _, _, _ := grantReader(t)(e.do("LOCK.ACQUIRE", key, "LEASE"))
	mustEqual(t, "leases", leases(t, e.c), "1")
	n, _ := e.do("LOCK.RELEASE", key, tok)
	mustEqual(t, "LOCK.RELEASE", n, any(int64(1)))
	eventually(t, "no lease left", func() bool { return leases(t, e.c) == "0" })
	other, _, _, ok := grantReader(t)(e.do("LOCK.ACQUIRE", key, 800))
	if !ok {
		t.Fatal("not granted after the lease's release")
	}
	time.Sleep(300 * time.Millisecond)
	mustEqual(t, "holder", holder(t, e, key), other)
}

// A proxy that dies renews nothing: the lease expires by its TTL.
func TestLockCmdLeaseExpiresWhenProxyDies(t *testing.T) {
	ms := redistest.StartN(t, 3)
	time.Sleep(1100 * time.Millisecond) // the masters outlive the 1 s guard window
	c, kill := startBinaryKill(t, redistest.Addrs(ms), `lease_ttl = "1s"`)
	tok, _, _, ok := grantReader(t)(c.Do(context.Background(), "LOCK.ACQUIRE", "leased", "LEASE").Result())
	if !ok {
		t.Fatal("LEASE not granted")
	}
	time.Sleep(1500 * time.Millisecond) // renewed past its first TTL
	kill()
	held := 0
	for _, m := range ms {
		mc := m.Client()
		if v, _ := mc.Get(context.Background(), "leased").Result(); v == tok {
			held++
		}
		mc.Close()
	}
	if held < 2 {
		t.Fatalf("held on %d masters right after the proxy died, want a quorum", held)
	}
	deadline := time.Now().Add(3 * time.Second)
	for _, m := range ms {
		mc := m.Client()
		for mc.Exists(context.Background(), "leased").Val() != 0 {
			if time.Now().After(deadline) {
				t.Fatalf("%s still holds the lease 3 s after the proxy died", m)
			}
			time.Sleep(20 * time.Millisecond)
		}
		mc.Close()
	}
}

// A proxy that shuts down releases its clients' leases before it goes.
func TestLockCmdLeaseReleasedOnShutdown(t *testing.T) {
	e := newEnv(t, 3, nil)
	key := e.key("k")
	if _, _, _, ok := grantReader(t)(e.do("LOCK.ACQUIRE", key, "LEASE")); !ok {
		t.Fatal("LEASE not granted")
	}
	eventually(t, "held on every master", func() bool { return count(e.onMasters(key), "") == 0 })
	_ = e.srv.Close()
	if vals := e.onMasters(key); count(vals, "") < 2 {
		t.Fatalf("after shutdown the lease is still held: %q", vals)
	}
}

// A lease's release on close that fails (two of three masters stalled past
// the node timeout, its commands to them lost) is tried again once they
// answer, and the key is free long before its TTL. Released once only, the
// lock stays held on those two masters, a quorum, until it expires, with
// nobody holding it.
func TestLockCmdLeaseReleaseRetried(t *testing.T) {
	for _, retry := range []bool{true, false} {
		name := "retried"
		if !retry {
			name = "once_shows_the_key_left_locked"
		}
		t.Run(name, func(t *testing.T) {
			var relays []*redistest.Relay
			e := newEnv(t, 3, func(c *proxy.Config) {
				c.Proxy.LeaseTTL = proxy.Duration{Duration: 9 * time.Second}
				for i, m := range c.Redlock.Masters {
					r := redistest.NewRelay(t, m)
					relays = append(relays, r)
					c.Redlock.Masters[i] = r.Addr()
				}
			})
			proxy.SetLeaseRetry(e.srv, retry)
			key := e.key("k")
			a := e.client()
			tok, _, _, ok := grantReader(t)(a.Do(context.Background(), "LOCK.ACQUIRE", key, "LEASE").Result())
			if !ok {
				t.Fatal("LEASE not granted")
			}
			for _, r := range relays[1:] {
				r.Delay.Store(int64(time.Second)) // past the node timeout (200 ms)
			}
			a.Close()
			closed := time.Now()
			time.Sleep(400 * time.Millisecond) // the release failed
			for _, r := range relays[1:] {
				r.Reset() // what they held back is lost
				r.Delay.Store(0)
			}
			on := e.onMasters(key)
			if on[1] != tok || on[2] != tok {
				t.Fatalf("after the failed release the stalled masters hold %q: the test shows nothing", on)
			}
			for time.Since(closed) < 3*time.Second && holder(t, e, key) != "" {
				time.Sleep(50 * time.Millisecond)
			}
			h := holder(t, e, key)
			switch {
			case retry && h != "":
				t.Fatalf("3 s after the close the lease's lock is still held by %q (TTL 9 s)", h)
			case !retry && h != tok:
				t.Fatalf("released once, the lock should stay held by the lease's token; holder %q", h)
			case !retry:
				t.Logf("released once: still held 3 s after the close, on %q", e.onMasters(key))
			}
		})
	}
}
