package proxy_test

import (
	"context"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/redlock-proxy/redlock-proxy/internal/redistest"
	"github.com/redlock-proxy/redlock-proxy/proxy"
	"github.com/redlock-proxy/redlock-proxy/redlock/engine"
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
	s, _ := fields(t, v)["token"].(string)
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

// A proxy that shuts down closes its clients' connections without releasing
// their leases: a client may act on its lease for a third of lease_ttl
// after its last reply, and learns of the close only when it next uses the
// connection. The lock, no longer renewed, expires by its TTL.
func TestLockCmdLeaseOnShutdownExpires(t *testing.T) {
	e := newEnv(t, 3, func(c *proxy.Config) { c.Proxy.LeaseTTL = proxy.Duration{Duration: 1500 * time.Millisecond} })
	key := e.key("k")
	if _, _, _, ok := grantReader(t)(e.do("LOCK.ACQUIRE", key, "LEASE")); !ok {
		t.Fatal("LEASE not granted")
	}
	eventually(t, "held on every master", func() bool { return count(e.onMasters(key), "") == 0 })
	_ = e.srv.Close()
	closed := time.Now()
	if vals := e.onMasters(key); count(vals, "") > 1 {
		t.Fatalf("the lease was released at shutdown, under a client that may still act on it: %q", vals)
	}
	eventually(t, "expired", func() bool { return count(e.onMasters(key), "") == 3 })
	if d := time.Since(closed); d > 1600*time.Millisecond {
		t.Fatalf("gone %v after the shutdown: it was renewed", d)
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

// leaseHolder is a client holding a lease on one connection, and checking
// that it still holds it the only way the proxy tells it: its connection
// is still open. It PINGs every 20 ms, and stops at the first PING that
// fails or that needed a new connection.
type leaseHolder struct {
	c        *redis.Client
	dials    atomic.Int32
	lastOK   atomic.Int64 // when the last PING on the lease's connection was answered, ns since start
	closedAt atomic.Int64 // when the connection was found closed, ns since start; 0: open
	start    time.Time
	done     chan struct{}
}

// holdLease acquires key LEASE on a connection of its own and starts
// watching it; stop ends the watch.
func holdLease(t *testing.T, e *env, key string) (*leaseHolder, string) {
	t.Helper()
	h := &leaseHolder{start: time.Now(), done: make(chan struct{})}
	h.c = redis.NewClient(&redis.Options{Addr: e.addr, MaxRetries: -1, PoolSize: 1, Protocol: 2,
		OnConnect: func(context.Context, *redis.Conn) error { h.dials.Add(1); return nil }})
	t.Cleanup(func() { h.c.Close() })
	tok, _, _, ok := grantReader(t)(h.c.Do(context.Background(), "LOCK.ACQUIRE", key, "LEASE").Result())
	if !ok {
		t.Fatal("LEASE not granted")
	}
	go func() {
		defer close(h.done)
		for {
			err := h.c.Ping(context.Background()).Err()
			now := int64(time.Since(h.start))
			if err != nil || h.dials.Load() > 1 {
				h.closedAt.Store(now)
				return
			}
			h.lastOK.Store(now)
			time.Sleep(20 * time.Millisecond)
		}
	}()
	return h, tok
}

// acquireUntil tries LOCK.ACQUIRE key for another token every 50 ms until
// it is granted or d has passed; it returns when it was granted (0: never),
// in ns since since.
func acquireUntil(t *testing.T, e *env, key string, d time.Duration, since time.Time) int64 {
	t.Helper()
	c := e.client()
	defer c.Close()
	for deadline := time.Now().Add(d); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		v, err := c.Do(context.Background(), "LOCK.ACQUIRE", key, 5000).Result()
		if err == nil && v != nil {
			return int64(time.Since(since))
		}
	}
	return 0
}

// A lease that cannot be renewed in time is lost, and its client learns it
// by its connection closing, before anyone else can be granted the lock.
// Two of three masters stall for 2.5 s (lease TTL 1.5 s): with the guard,
// the holder's connection is closed before the lock is granted to another
// client; without it, the holder's connection stays open (its PINGs are
// answered) while another client is granted its lock.
func TestLeaseLapseClosesConnection(t *testing.T) {
	for _, guard := range []bool{true, false} {
		name := map[bool]string{true: "on", false: "off_grants_the_lock_twice"}[guard]
		t.Run(name, func(t *testing.T) {
			var relays []*redistest.Relay
			e := newEnv(t, 3, func(c *proxy.Config) {
				c.Proxy.LeaseTTL = proxy.Duration{Duration: 1500 * time.Millisecond}
				for i, m := range c.Redlock.Masters {
					r := redistest.NewRelay(t, m)
					relays = append(relays, r)
					c.Redlock.Masters[i] = r.Addr()
				}
				if !guard {
					c.GuardsOff = []string{"lease-lapse"}
				}
			})
			key := e.key("k")
			a, _ := holdLease(t, e, key)
			time.Sleep(700 * time.Millisecond) // renewed once
			for _, r := range relays[1:] {
				r.Delay.Store(int64(5 * time.Second))
			}
			go func() {
				time.Sleep(2500 * time.Millisecond)
				for _, r := range relays[1:] {
					r.Delay.Store(0)
					r.Reset()
				}
			}()
			granted := acquireUntil(t, e, key, 6*time.Second, a.start)
			if granted == 0 {
				t.Fatal("the lock was never granted to the second client")
			}
			time.Sleep(200 * time.Millisecond)
			lastOK, closed := time.Duration(a.lastOK.Load()), time.Duration(a.closedAt.Load())
			t.Logf("holder's last answered PING %v, connection closed %v, other client granted %v", lastOK, closed, time.Duration(granted))
			switch {
			case guard && (closed == 0 || lastOK >= time.Duration(granted)):
				t.Fatal("the holder's connection was still answered after the lock was granted to another client")
			case !guard && lastOK < time.Duration(granted):
				t.Fatal("with the guard off the holder's connection should stay open past the second grant")
			}
		})
	}
}

// RESET releases the connection's leases, as closing it does: they are
// not renewed for a client that no longer knows of them.
func TestResetReleasesLeases(t *testing.T) {
	e := newEnv(t, 3, func(c *proxy.Config) { c.Proxy.LeaseTTL = proxy.Duration{Duration: 3 * time.Second} })
	key := e.key("k")
	a := e.client()
	defer a.Close()
	conn := a.Conn()
	defer conn.Close()
	tok, _, _, ok := grantReader(t)(conn.Do(context.Background(), "LOCK.ACQUIRE", key, "LEASE").Result())
	if !ok {
		t.Fatal("LEASE not granted")
	}
	mustEqual(t, "RESET", must(conn.Do(context.Background(), "RESET").Result()), any("RESET"))
	reset := time.Now()
	eventually(t, "released by RESET", func() bool { return holder(t, e, key) == "" && leases(t, e.c) == "0" })
	if d := time.Since(reset); d > time.Second {
		t.Fatalf("released %v after RESET (TTL 3 s): it expired rather than being released", d)
	}
	if h := holder(t, e, key); h == tok {
		t.Fatal("still held by the lease")
	}
}

// A renewal whose outcome cannot be known (one master renewed, one restarted
// empty and guarded, one timed out) is NOQUORUM: the lease tries again and
// goes on, and nobody else is granted its lock. With "not held needs a
// quorum" off (and the lapse guard, which would close the connection on
// such a "not held"), the renewal reads as "not held", renewals stop, and
// the lock is granted to another client while its holder's connection is
// still open.
func TestLeaseRenewsThroughNoQuorum(t *testing.T) {
	for _, guard := range []bool{true, false} {
		name := map[bool]string{true: "on", false: "off_grants_the_lock_twice"}[guard]
		t.Run(name, func(t *testing.T) {
			e, relays := newGuardedEnv(t, 3, time.Second, func(c *proxy.Config) {
				c.Proxy.LeaseTTL = proxy.Duration{Duration: 3 * time.Second} // renewed every 1 s, lost 2 s after the last renewal
				if !guard {
					c.GuardsOff = []string{string(engine.GuardNotHeldNeedsQuorum), "lease-lapse"}
				}
			})
			key := e.key("k")
			a, tok := holdLease(t, e, key)
			time.Sleep(700 * time.Millisecond)
			e.masters[1].Restart() // guarded, and without the lease's copy
			relays[2].Delay.Store(int64(2 * time.Second))
			time.Sleep(800 * time.Millisecond) // the renewal at 1 s: NOQUORUM
			relays[2].Delay.Store(0)
			relays[2].Reset()
			granted := acquireUntil(t, e, key, 4*time.Second, a.start)
			time.Sleep(200 * time.Millisecond) // the holder's next PING
			lastOK, closed := time.Duration(a.lastOK.Load()), time.Duration(a.closedAt.Load())
			t.Logf("other client granted %v; holder's last answered PING %v, closed %v; masters %q", time.Duration(granted), lastOK, closed, e.onMasters(key))
			if guard {
				if granted != 0 || closed != 0 {
					t.Fatalf("the lease was lost through a renewal whose outcome was not known")
				}
				if count(e.onMasters(key), tok) < 2 {
					t.Fatalf("the lease's lock is on %q, not on a quorum", e.onMasters(key))
				}
				return
			}
			if granted == 0 || lastOK < time.Duration(granted) {
				t.Fatalf("with the guards off another client should be granted the lock while its holder's connection is open")
			}
		})
	}
}
