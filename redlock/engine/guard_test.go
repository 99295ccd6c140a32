package engine

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/redlock-proxy/redlock-proxy/internal/redistest"
)

// keyGuardClient is a Client of three masters that are never dialled, with
// the guard window w: enough to drive noteTTL, settle and the masters'
// losses by hand.
func keyGuardClient(w time.Duration) *Client {
	c := &Client{quorum: 2, opts: options{guardWindow: w, maxLockTTL: time.Hour, keyTTLs: newKeyTTLs()}}
	for i := range 3 {
		c.nodes = append(c.nodes, &node{idx: i, addr: "m" + string(rune('0'+i)), opts: &c.opts})
	}
	return c
}

func guardedOn(n *node, at time.Time, keys ...string) bool {
	_, g := n.guardFor(at, keys)
	return g
}

// A master that lost its data votes on no key for the window, and beyond
// it on no key whose TTL, longer than the window, this client wrote before
// the loss and may be alive on a quorum: only those keys, only until they
// expire.
func TestKeyGuard(t *testing.T) {
	c := keyGuardClient(10 * time.Second)
	now := time.Now()
	c.noteTTL([]string{"long"}, 30*time.Second, true, 0).settle(0)     // granted everywhere
	c.noteTTL([]string{"short"}, 5*time.Second, true, 0).settle(0)     // within the window: nothing to remember
	c.noteTTL([]string{"refused"}, 40*time.Second, true, 0).settle(2)  // two of three refused: never on a quorum
	c.noteTTL([]string{"unknown"}, 40*time.Second, false, 0).settle(1) // one refused, two did not answer: may be on a quorum
	c.noteTTL([]string{"a", "b"}, 20*time.Second, false, 0).settle(0)  // a multi-key extend
	inFlight := c.noteTTL([]string{"late"}, 50*time.Second, true, 0)   // still in flight at the loss
	if n := c.opts.keyTTLs.size(); n != 5 {
		t.Fatalf("%d keys remembered, want 5 (long, unknown, a, b, late)", n)
	}
	n0, n1 := c.nodes[0], c.nodes[1]
	obs(n0, "a", time.Hour, false, now)
	obs(n0, "b", 0, false, now) // restarted empty, just now
	inFlight.settle(3)          // refused after the loss: the master guards it all the same
	for _, k := range []string{"long", "short", "refused", "unknown", "other"} {
		if !guardedOn(n0, now.Add(9*time.Second), k) {
			t.Errorf("%s: votes within the window", k)
		}
	}
	after := now.Add(11 * time.Second)
	for k, want := range map[string]bool{"long": true, "short": false, "refused": false, "unknown": true, "a": true, "b": true, "late": true, "other": false} {
		if got := guardedOn(n0, after, k); got != want {
			t.Errorf("%s after the window: guarded %v, want %v", k, got, want)
		}
	}
	if !guardedOn(n0, after, "other", "long") {
		t.Error("a multi-key step must not count the vote of a master guarded on one of its keys")
	}
	if g, _ := n0.guardFor(after, []string{"long"}); g.key != "long" || g.until.Sub(now) < 29*time.Second {
		t.Errorf("guard on long: %+v", g)
	}
	if guardedOn(n0, now.Add(31*time.Second), "long") || !guardedOn(n0, now.Add(49*time.Second), "late") {
		t.Error("a key's guard must end when its TTL does, and not before")
	}
	if guardedOn(n1, now, "long") {
		t.Error("a master that lost nothing is guarded")
	}
	n0.mu.Lock()
	keys := n0.guardedKeys(after)
	n0.mu.Unlock()
	if keys != 5 {
		t.Errorf("guarded keys %d, want 5", keys)
	}
	// Entries go when their TTLs run out, on the client and on the master.
	c.opts.keyTTLs.sweep(now.Add(60 * time.Second))
	n0.sweepKeyGuard(now.Add(60 * time.Second))
	if n := c.opts.keyTTLs.size(); n != 0 {
		t.Errorf("%d keys remembered after every TTL ran out", n)
	}
	if len(n0.keyGuard) != 0 {
		t.Errorf("master still guards %d keys after every TTL ran out", len(n0.keyGuard))
	}
}

// With the TTL stretch off, only acquires' TTLs are remembered.
func TestKeyGuardStretchOff(t *testing.T) {
	c := keyGuardClient(time.Second)
	WithGuardsOff(GuardTTLStretch)(&c.opts)
	c.noteTTL([]string{"acquired"}, time.Minute, true, 0).settle(0)
	c.noteTTL([]string{"extended"}, time.Minute, false, 0).settle(0)
	now := time.Now()
	obs(c.nodes[0], "a", time.Hour, false, now)
	obs(c.nodes[0], "b", 0, false, now)
	if !guardedOn(c.nodes[0], now.Add(2*time.Second), "acquired") || guardedOn(c.nodes[0], now.Add(2*time.Second), "extended") {
		t.Error("with the stretch off, an acquire's TTL guards its key and an extend's does not")
	}
}

// The window is what an earlier restart, not a stretch, decides: a master
// that restarted long before this client saw it is guarded only on the
// keys whose TTLs outlive its window.
func TestKeyGuardOldRestart(t *testing.T) {
	c := keyGuardClient(10 * time.Second)
	c.noteTTL([]string{"k"}, time.Minute, true, 0).settle(0)
	now := time.Now()
	n := c.nodes[0]
	obs(n, "a", time.Hour, false, now)
	obs(n, "b", 20*time.Second, false, now) // started 20 s ago: its window has passed
	if guardedOn(n, now, "other") || !guardedOn(n, now, "k") {
		t.Error("after its window, a restarted master must vote on every key but those with longer TTLs")
	}
}

func TestFormatTTL(t *testing.T) {
	for d, want := range map[time.Duration]string{
		time.Hour: "1h", 90 * time.Second: "1m30s", 2*time.Hour + 30*time.Minute: "2h30m", 1500 * time.Millisecond: "1.5s",
		1<<63 - 1: "106751 days", 30 * time.Second: "30s", time.Minute: "1m",
	} {
		if got := FormatTTL(d); got != want {
			t.Errorf("FormatTTL(%d) = %q, want %q", d, got, want)
		}
	}
}

// guardClient starts three masters and a client with the restart guard
// window w and the longest lock TTL max, and waits until every master
// votes (they are younger than the window at first).
func guardClient(t *testing.T, w, max time.Duration, guardsOff ...Guard) ([]*redistest.Server, *Client) {
	t.Helper()
	ms := redistest.StartN(t, 3)
	c, err := New(redistest.Addrs(ms), WithRestartGuard(w), WithMaxLockTTL(max), WithNodeTimeout(200*time.Millisecond),
		WithRetry(0, 0), WithGuardsOff(guardsOff...))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	waitFor(t, w+3*time.Second, "every master votes", func() bool {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		c.Probe(ctx)
		return c.VotersAvailable() == 3
	})
	return ms, c
}

// lockKeys lists the keys on a master that are not the client's own
// records.
func lockKeys(t *testing.T, m *redistest.Server) []string {
	t.Helper()
	rc := m.Client()
	defer rc.Close()
	keys, err := rc.Keys(context.Background(), "*").Result()
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, k := range keys {
		if !strings.HasPrefix(k, FenceStatePrefix) {
			out = append(out, k)
		}
	}
	return out
}

// A lock operation that would write a TTL above WithMaxLockTTL is refused
// before anything is sent: no master holds anything after it, and a lock
// held before keeps its TTL.
func TestMaxLockTTLRefusedBeforeAnythingIsSent(t *testing.T) {
	ms, c := guardClient(t, time.Second, time.Hour)
	ctx := context.Background()
	years292 := time.Duration(1<<63 - 1)
	over := time.Hour + time.Millisecond
	ops := map[string]func() error{
		"Acquire 292 years": func() error { _, err := c.Acquire(ctx, "a", "A", years292); return err },
		"Acquire over max":  func() error { _, err := c.Acquire(ctx, "a", "A", over); return err },
		"AcquireAll":        func() error { _, err := c.AcquireAll(ctx, []string{"a", "b"}, "A", over); return err },
		"AcquireFenced":     func() error { _, err := c.AcquireFenced(ctx, "a", "A", over, false); return err },
		"AcquireHash":       func() error { _, err := c.AcquireHash(ctx, "a", "A", over); return err },
		"AcquireRW":         func() error { _, err := c.AcquireRW(ctx, "a", "A", over, false); return err },
		"AcquirePermit":     func() error { _, err := c.AcquirePermit(ctx, "a", "A", 2, over); return err },
		"Extend":            func() error { _, _, err := c.Extend(ctx, "held", "H", over, ExtendSet); return err },
		"Extend add":        func() error { _, _, err := c.Extend(ctx, "held", "H", over, ExtendAdd); return err },
		"Extend add, sum":   func() error { _, _, err := c.Extend(ctx, "held", "H", 40*time.Minute, ExtendAdd); return err },
		"ExtendAll":         func() error { _, _, err := c.ExtendAll(ctx, []string{"held"}, "H", over); return err },
		"Reacquire": func() error {
			_, _, err := c.Reacquire(ctx, []string{"held"}, "H2", over, Holder{Prefix: "H"})
			return err
		},
		"ExtendFenced": func() error { _, _, err := c.ExtendFenced(ctx, "held", "H", years292); return err },
		"ExtendHash":   func() error { _, _, err := c.ExtendHash(ctx, "held", "H", over); return err },
		"ExtendRW":     func() error { _, _, err := c.ExtendRW(ctx, "held", "H", over); return err },
		"ExtendPermit": func() error { _, _, err := c.ExtendPermit(ctx, "held", "H", 1, over); return err },
		"ReleaseHash":  func() error { _, err := c.ReleaseHash(ctx, "held", "H", over, ""); return err },
		"NoteTTL":      func() error { _, err := c.NoteTTL("held", over); return err },
	}
	if _, err := c.Acquire(ctx, "held", "H", 30*time.Minute); err != nil {
		t.Fatal(err)
	}
	for name, op := range ops {
		err := op()
		var te *TTLError
		if !errors.Is(err, ErrTTLTooLong) || !errors.As(err, &te) || te.Max != time.Hour {
			t.Errorf("%s: %v, want a *TTLError", name, err)
		}
	}
	for i, m := range ms {
		if keys := lockKeys(t, m); len(keys) != 1 || keys[0] != "held" {
			t.Errorf("master %d holds %v, want only the lock taken before", i, keys)
		}
		rc := m.Client()
		if p := rc.PTTL(ctx, "held").Val(); p > 30*time.Minute {
			t.Errorf("master %d: the held lock's TTL became %s", i, p)
		}
		rc.Close()
	}
	if n := c.opts.keyTTLs.size(); n != 1 {
		t.Errorf("%d keys remembered, want 1 (the lock taken before)", n)
	}
}

// A write that a quorum refused leaves nothing to cover: an acquire every
// master refused, one two of three refused, an extend of a key that does
// not exist. After two masters restart empty and their window passes, they
// vote on those keys again.
func TestRefusedWritesDoNotGuard(t *testing.T) {
	ms, c := guardClient(t, time.Second, time.Hour)
	ctx := context.Background()
	for i, m := range ms {
		rc := m.Client()
		rc.Set(ctx, "everywhere", "other", time.Hour)
		if i < 2 {
			rc.Set(ctx, "on-two", "other", time.Hour)
		}
		rc.Close()
	}
	if _, err := c.Acquire(ctx, "everywhere", "A", 50*time.Minute); !errors.Is(err, ErrNotAcquired) {
		t.Fatalf("acquire of a key held everywhere: %v", err)
	}
	if _, err := c.Acquire(ctx, "on-two", "A", 50*time.Minute); !errors.Is(err, ErrNotAcquired) {
		t.Fatalf("acquire of a key held on two masters: %v", err)
	}
	if _, ok, err := c.Extend(ctx, "absent", "A", 50*time.Minute, ExtendSet); ok || err != nil {
		t.Fatalf("extend of an absent key: %v %v", ok, err)
	}
	if n := c.opts.keyTTLs.size(); n != 0 {
		t.Fatalf("%d keys remembered after writes a quorum refused", n)
	}
	restarted := time.Now()
	ms[0].Restart()
	ms[1].Restart()
	waitFor(t, 5*time.Second, "the restarts seen and their window passed", func() bool {
		ctx, cancel := context.WithTimeout(ctx, time.Second)
		defer cancel()
		c.Probe(ctx)
		st := c.Status()
		return st[0].Restarts > 0 && st[1].Restarts > 0 && c.VotersAvailable() == 3
	})
	if time.Since(restarted) > 5*time.Second {
		t.Fatal("the guard outlived its window")
	}
	for _, k := range []string{"on-two", "absent"} {
		if _, err := c.Acquire(ctx, k, "B", 5*time.Second); err != nil {
			t.Errorf("%s after the window: %v, want granted", k, err)
		}
	}
	for i, st := range c.Status() {
		if st.GuardedKeys != 0 {
			t.Errorf("master %d guards %d keys", i, st.GuardedKeys)
		}
	}
}

// A lock taken for 2 s and extended to 30 s on key A, then two masters
// restart empty (the window is 1 s): 3 s after the grant, a lock on key B
// is granted, and A is refused with NOQUORUM naming the two masters
// guarded on A. With the TTL stretch off, only the acquire's 2 s are
// remembered, and a second holder gets A while its holder keeps it for
// 27 s more.
func TestLongTTLGuardsOnlyItsKey(t *testing.T) {
	for _, stretch := range []bool{true, false} {
		name := map[bool]string{true: "on", false: "off_grants_A_twice"}[stretch]
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			var off []Guard
			if !stretch {
				off = append(off, GuardTTLStretch)
			}
			ms, c := guardClient(t, time.Second, time.Hour, off...)
			ctx := context.Background()
			granted := time.Now()
			if _, err := c.Acquire(ctx, "A", "h1", 2*time.Second); err != nil {
				t.Fatal(err)
			}
			if _, ok, err := c.Extend(ctx, "A", "h1", 30*time.Second, ExtendSet); !ok || err != nil {
				t.Fatalf("extend: %v %v", ok, err)
			}
			ms[0].Restart()
			ms[1].Restart()
			waitFor(t, 5*time.Second, "the restarts seen", func() bool {
				ctx, cancel := context.WithTimeout(ctx, time.Second)
				defer cancel()
				c.Probe(ctx)
				st := c.Status()
				return st[0].Restarts > 0 && st[1].Restarts > 0
			})
			waitFor(t, 5*time.Second, "the window over", func() bool {
				return c.VotersAvailable() == 3 && time.Since(granted) > 3*time.Second
			})
			if _, err := c.Acquire(ctx, "B", "x", 5*time.Second); err != nil {
				t.Fatalf("another key after the window: %v, want granted", err)
			}
			l, err := c.Acquire(ctx, "A", "h2", 5*time.Second)
			t.Logf("A, %s after the grant: %v %v", time.Since(granted).Round(time.Millisecond), l, err)
			if !stretch {
				if l == nil {
					t.Fatalf("with the stretch off a second holder should (unsafely) get A; got %v", err)
				}
				return
			}
			var qe *QuorumError
			if l != nil || !errors.As(err, &qe) {
				t.Fatalf("a second holder of A 3 s into its 30 s: %v %v", l, err)
			}
			if len(qe.Guarded) != 2 || qe.Guarded[0].Index != 0 || qe.Guarded[1].Index != 1 || qe.Guarded[0].Key != "A" ||
				time.Until(qe.Guarded[0].Until) < 20*time.Second {
				t.Errorf("guarded masters: %+v", qe.Guarded)
			}
			if s := err.Error(); !strings.Contains(s, `2 masters are under the restart guard: master0 (`+ms[0].Addr+`) and master1 (`+ms[1].Addr+`) on key "A" for another `) {
				t.Errorf("error text: %s", s)
			}
			if st := c.Status(); st[0].GuardedKeys != 1 || st[0].Guarded || st[2].GuardedKeys != 0 {
				t.Errorf("status: %+v", st)
			}
		})
	}
}
