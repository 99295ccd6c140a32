package quorum

import (
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redlock-proxy/redlock-proxy/internal/redistest"
	"github.com/redlock-proxy/redlock-proxy/proxy/wire"
	"github.com/redlock-proxy/redlock-proxy/redlock/engine"
)

// countedOps is what an Op counted in its Metrics, one entry a call:
// "acquire", "acquire refused", "acquire failed", "extend true",
// "release false"….
type countedOps struct {
	mu  sync.Mutex
	got []string
}

func (m *countedOps) add(s string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.got = append(m.got, s)
}

func (m *countedOps) Acquire(err error, _ time.Duration) {
	switch {
	case err == nil:
		m.add("acquire")
	case errors.Is(err, engine.ErrNotAcquired):
		m.add("acquire refused")
	default:
		m.add("acquire failed")
	}
}

func (m *countedOps) Extend(ok bool, _ error, _ time.Duration) {
	if ok {
		m.add("extend true")
	} else {
		m.add("extend false")
	}
}

func (m *countedOps) Release(ok bool, _ error, _ time.Duration) {
	if ok {
		m.add("release true")
	} else {
		m.add("release false")
	}
}

// take returns what was counted since the last take.
func (m *countedOps) take() string {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := strings.Join(m.got, ", ")
	m.got = nil
	return out
}

// opOnMasters is an Op on three new masters (a quorum of 2), and what it
// counts.
func opOnMasters(t *testing.T) (Op, *countedOps) {
	t.Helper()
	ms := redistest.StartN(t, 3)
	e, err := engine.New(redistest.Addrs(ms), engine.WithRestartGuard(0))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { e.Close() })
	m := &countedOps{}
	return Op{Eng: e, Timeout: 10 * time.Second, Metrics: m}, m
}

// The native LOCK.* commands' calls on the quorum, on real masters: what
// each returns, the reply it makes, and what it counts: an acquire, a
// reentry granted, a release and an extend are counted once each, as the
// client asked for them; a reentry refused (the waiter's acquires that
// follow are counted), an undone grant, a lease's release and a read are
// not.
func TestFencedOps(t *testing.T) {
	o, m := opOnMasters(t)
	const ttl = 10 * time.Second
	check := func(step, counted, wantCounted string) {
		t.Helper()
		if counted != wantCounted {
			t.Errorf("%s: counted %q, want %q", step, counted, wantCounted)
		}
	}

	r, err := o.AcquireFenced(LockAcquire{Key: "k", TTL: ttl, Token: "t"})
	if err != nil || r.Grant == nil || r.Grant.Fence != 1 || r.Grant.Holds != 1 {
		t.Fatalf("acquire: %+v %v", r.Grant, err)
	}
	if got := reply(func(c wire.BufConn) { WriteGrant(c, r.Grant, err) }); !strings.HasPrefix(got, "*3\r\n$1\r\nt\r\n:1\r\n:") {
		t.Errorf("acquire's reply: %q", got)
	}
	check("acquire", m.take(), "acquire")

	r, err = o.AcquireFenced(LockAcquire{Key: "k", TTL: ttl, Token: "u"})
	if !errors.Is(err, engine.ErrNotAcquired) || r.Grant != nil || r.RetryIn <= 0 {
		t.Fatalf("acquire of a held key: %+v %v", r, err)
	}
	if got := reply(func(c wire.BufConn) { WriteGrant(c, r.Grant, err) }); got != "*-1\r\n" {
		t.Errorf("refused acquire's reply: %q", got)
	}
	check("acquire of a held key", m.take(), "acquire refused")

	g, err := o.ReenterFenced(LockAcquire{Key: "k", TTL: ttl, Token: "u", Reentrant: true})
	if g != nil {
		t.Fatalf("another token's reentry: %+v %v", g, err)
	}
	check("another token's reentry", m.take(), "")
	g, err = o.ReenterFenced(LockAcquire{Key: "k", TTL: ttl, Token: "t", Reentrant: true})
	if err != nil || g == nil || g.Fence != 1 || g.Holds != 2 {
		t.Fatalf("reentry: %+v %v", g, err)
	}
	check("reentry", m.take(), "acquire")

	v, ok, err := o.ExtendFenced("k", "t", 2*ttl)
	if err != nil || !ok || v <= ttl {
		t.Fatalf("extend: %v %v %v", v, ok, err)
	}
	check("extend", m.take(), "extend true")
	v, ok, err = o.ExtendFenced("k", "u", 2*ttl)
	if got := reply(func(c wire.BufConn) { WriteLockExtended(c, v, ok, err) }); got != ":0\r\n" {
		t.Errorf("another token's extend: %q", got)
	}
	check("another token's extend", m.take(), "extend false")

	info, err := o.InfoFenced("k")
	if err != nil || info.Token == nil || *info.Token != "t" || info.Fence != 1 || info.Holds != 2 || len(info.Masters) != 3 {
		t.Fatalf("info: %+v %v", info, err)
	}
	check("info", m.take(), "")

	rel, err := o.UndoGrant("k", g)
	if err != nil || !rel.Released || rel.Freed {
		t.Fatalf("undo of the reentry: %+v %v; want one hold given back, one left", rel, err)
	}
	check("undo", m.take(), "")

	rel, err = o.ReleaseFenced("k", "u")
	if got := reply(func(c wire.BufConn) { WriteLockReleased(c, rel.Released, err) }); got != ":0\r\n" || rel.Freed {
		t.Errorf("another token's release: %q %+v", got, rel)
	}
	check("another token's release", m.take(), "release false")
	rel, err = o.ReleaseFenced("k", "t")
	if got := reply(func(c wire.BufConn) { WriteLockReleased(c, rel.Released, err) }); got != ":1\r\n" || !rel.Freed {
		t.Errorf("release of the last hold: %q %+v", got, rel)
	}
	check("release", m.take(), "release true")

	for range 2 {
		if _, err := o.AcquireFenced(LockAcquire{Key: "l", TTL: ttl, Token: "t", Reentrant: true}); err != nil {
			t.Fatal(err)
		}
	}
	m.take()
	rel, err = o.ReleaseFencedAll("l", "t")
	if err != nil || !rel.Released || !rel.Freed {
		t.Fatalf("a lease's release of two holds: %+v %v", rel, err)
	}
	check("a lease's release", m.take(), "")
}

// The single-key acquire (SET … NX, an acquire script of one key), on
// real masters: granted, then refused with the value a quorum holds, which
// SET … NX GET answers; each counted once.
func TestAcquireOp(t *testing.T) {
	o, m := opOnMasters(t)
	answer := func(r engine.AcquireResult, err error, get bool) string {
		return reply(func(c wire.BufConn) {
			WriteAcquired(c, r, err, get, 0, func(ok bool) {
				if ok {
					c.WriteString("OK")
				} else {
					c.WriteNull()
				}
			})
		})
	}
	r, err := o.Acquire("k", "t", 10*time.Second)
	if got := answer(r, err, false); got != "+OK\r\n" {
		t.Errorf("acquire: %q (%v)", got, err)
	}
	if got := m.take(); got != "acquire" {
		t.Errorf("acquire counted %q", got)
	}
	r, err = o.Acquire("k", "u", 10*time.Second)
	if !errors.Is(err, engine.ErrNotAcquired) || r.Prev == nil || *r.Prev != "t" {
		t.Fatalf("acquire of a held key: %+v %v", r, err)
	}
	if got := answer(r, err, false); got != "$-1\r\n" {
		t.Errorf("refused acquire: %q", got)
	}
	if got := answer(r, err, true); got != "$1\r\nt\r\n" {
		t.Errorf("refused acquire with GET: %q", got)
	}
	if got := m.take(); got != "acquire refused" {
		t.Errorf("refused acquire counted %q", got)
	}
}

// ZREM of a semaphore's permits, on real masters: how many of the members
// a quorum held, answered as a count, counted as one release.
func TestReleasePermitsOp(t *testing.T) {
	o, m := opOnMasters(t)
	for _, id := range []string{"a", "b"} {
		if _, err := o.Eng.AcquirePermit(t.Context(), "semaphore:s", id, 2, 10*time.Second); err != nil {
			t.Fatal(err)
		}
	}
	n, err := o.ReleasePermits("semaphore:s", "a", "x")
	if got := reply(func(c wire.BufConn) { WriteReleaseCount(c, n, err) }); got != ":1\r\n" {
		t.Errorf("ZREM of a holder and a stranger: %q", got)
	}
	if got := m.take(); got != "release true" {
		t.Errorf("counted %q", got)
	}
	n, err = o.ReleasePermits("semaphore:s", "x")
	if got := reply(func(c wire.BufConn) { WriteReleaseCount(c, n, err) }); got != ":0\r\n" {
		t.Errorf("ZREM of a stranger: %q", got)
	}
	if got := m.take(); got != "release false" {
		t.Errorf("counted %q", got)
	}
}

// Mixed mode's end of a lock whose mirror shows it ended, on real
// masters: by its token only, reported when a quorum held it, and never
// counted as a release (no client asked for one).
func TestEndLockOp(t *testing.T) {
	o, m := opOnMasters(t)
	if _, err := o.Acquire("k", "t", 10*time.Second); err != nil {
		t.Fatal(err)
	}
	m.take()
	if ok, err := o.EndLock("k", "u"); ok || err != nil {
		t.Errorf("another token's end: %v %v", ok, err)
	}
	if k, err := o.Read([]byte("k")); err != nil || !k.Exists || k.Value != "t" {
		t.Errorf("after another token's end: %+v %v; want t still holding", k, err)
	}
	if ok, err := o.EndLock("k", "t"); !ok || err != nil {
		t.Errorf("end: %v %v", ok, err)
	}
	if k, err := o.Read([]byte("k")); err != nil || k.Exists {
		t.Errorf("after the end: %+v %v; want absent", k, err)
	}
	if got := m.take(); got != "" {
		t.Errorf("counted %q", got)
	}
}
