package engine

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/redlock-proxy/redlock-proxy/internal/redistest"
)

func fenceClient(t *testing.T, addrs []string, opts ...Option) *Client {
	t.Helper()
	c, err := New(addrs, append([]Option{WithNodeTimeout(200 * time.Millisecond), WithRetry(2, 20*time.Millisecond),
		WithMarkDown(0, 0)}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// grantOnce acquires key with a fresh token, retrying refusals for up to
// five seconds (a restarted master's pooled connections fail once), and
// releases it. It returns the fencing number.
func grantOnce(t *testing.T, c *Client, key string) int64 {
	t.Helper()
	ctx := context.Background()
	deadline := time.Now().Add(5 * time.Second)
	for {
		tok := newAttemptID()
		r, err := c.AcquireFenced(ctx, key, tok, 5*time.Second, false)
		if err == nil {
			if _, err := c.ReleaseFenced(ctx, key, tok); err != nil {
				t.Fatal(err)
			}
			return r.Grant.Fence
		}
		if time.Now().After(deadline) {
			t.Fatalf("not granted within 5s: %v", err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// Two clients (two proxies) alternate grants of one key; one master is
// restarted empty, so its counter starts again from 0. The number answered
// must keep growing. With the number taken from a single master instead of
// the largest counter, it goes backwards: the negative control.
func TestFenceMonotonicAcrossClientsAndRestart(t *testing.T) {
	for _, single := range []bool{false, true} {
		t.Run(map[bool]string{false: "quorum_max", true: "single_master_goes_backwards"}[single], func(t *testing.T) {
			ms := redistest.StartN(t, 3)
			guard := WithRestartGuard(300 * time.Millisecond)
			a := fenceClient(t, redistest.Addrs(ms), guard)
			b := fenceClient(t, redistest.Addrs(ms), guard)
			a.opts.fenceSingle, b.opts.fenceSingle = single, single
			time.Sleep(400 * time.Millisecond) // fresh masters are younger than the guard window
			var seen []int64
			for i := 0; i < 6; i++ {
				seen = append(seen, grantOnce(t, []*Client{a, b}[i%2], "k"))
			}
			ms[0].Restart()
			time.Sleep(400 * time.Millisecond) // the guard window passes: master 0 votes again
			for i := 0; i < 6; i++ {
				seen = append(seen, grantOnce(t, []*Client{a, b}[i%2], "k"))
			}
			backwards := 0
			for i := 1; i < len(seen); i++ {
				if seen[i] <= seen[i-1] {
					backwards++
				}
			}
			t.Logf("numbers: %v", seen)
			if single && backwards == 0 {
				t.Fatal("the single-master number did not go backwards: the control shows nothing")
			}
			if !single && backwards > 0 {
				t.Fatalf("fencing numbers went backwards: %v", seen)
			}
		})
	}
}

// A master whose counter is behind (here deleted by hand) catches up: the
// grant raises every counter it reaches to the number it answered.
func TestFenceCounterCatchesUp(t *testing.T) {
	ms := redistest.StartN(t, 3)
	c := fenceClient(t, redistest.Addrs(ms), WithRestartGuard(0))
	for i := 0; i < 3; i++ {
		grantOnce(t, c, "k")
	}
	ctx := context.Background()
	m0 := ms[0].Client()
	defer m0.Close()
	m0.Del(ctx, FenceKeys("k")[1])
	f := grantOnce(t, c, "k")
	if f != 4 {
		t.Fatalf("fence %d, want 4", f)
	}
	deadline := time.Now().Add(2 * time.Second)
	for v, _ := m0.Get(ctx, FenceKeys("k")[1]).Int64(); v != 4; v, _ = m0.Get(ctx, FenceKeys("k")[1]).Int64() {
		if time.Now().After(deadline) {
			t.Fatalf("master 0's counter is %d, want 4", v)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func TestFenceHeldExtendInfo(t *testing.T) {
	ms := redistest.StartN(t, 3)
	c := fenceClient(t, redistest.Addrs(ms), WithRestartGuard(0))
	ctx := context.Background()
	r, err := c.AcquireFenced(ctx, "k", "t1", 2*time.Second, false)
	if err != nil || r.Grant.Fence != 1 || r.Grant.Holds != 1 || r.Grant.Validity <= 0 {
		t.Fatalf("acquire: %+v %v", r.Grant, err)
	}
	r2, err := c.AcquireFenced(ctx, "k", "t2", 2*time.Second, false)
	if !errors.Is(err, ErrHeld) || r2.Grant != nil || r2.RetryIn <= 0 || r2.RetryIn > 2*time.Second {
		t.Fatalf("second acquire: %+v %v, want held with a retry hint", r2, err)
	}
	// Not reentrant: the holder's own token is refused too.
	if _, err := c.AcquireFenced(ctx, "k", "t1", 2*time.Second, false); !errors.Is(err, ErrHeld) {
		t.Fatalf("same token, not reentrant: %v", err)
	}
	v, ok, err := c.ExtendFenced(ctx, "k", "t1", 10*time.Second)
	if err != nil || !ok || v < 9*time.Second {
		t.Fatalf("extend: %v %v %v", v, ok, err)
	}
	if _, ok, _ := c.ExtendFenced(ctx, "k", "t2", 10*time.Second); ok {
		t.Fatal("extended with another token")
	}
	info, err := c.InfoFenced(ctx, "k")
	if err != nil || info.Token == nil || *info.Token != "t1" || info.Fence != 1 || info.Holds != 1 || info.Validity < 9*time.Second {
		t.Fatalf("info: %+v %v", info, err)
	}
	for i, m := range info.Masters {
		if m.Token == nil || *m.Token != "t1" || m.Fence != 1 || m.Counter < 1 {
			t.Fatalf("master %d: %+v", i, m)
		}
	}
	if rel, err := c.ReleaseFenced(ctx, "k", "t2"); err != nil || rel.Released {
		t.Fatalf("release by another token: %+v %v", rel, err)
	}
	if rel, err := c.ReleaseFenced(ctx, "k", "t1"); err != nil || !rel.Released || !rel.Freed {
		t.Fatalf("release: %+v %v", rel, err)
	}
	info, _ = c.InfoFenced(ctx, "k")
	if info.Token != nil || info.Validity != -2 {
		t.Fatalf("info after release: %+v", info)
	}
}

// A grant refused on a quorum leaves nothing behind on the minority that
// took it: the attempt is undone there.
func TestFenceRefusedLeavesNothing(t *testing.T) {
	ms := redistest.StartN(t, 3)
	c := fenceClient(t, redistest.Addrs(ms), WithRestartGuard(0))
	ctx := context.Background()
	for _, i := range []int{1, 2} {
		m := ms[i].Client()
		m.Set(ctx, "k", "other", 5*time.Second)
		m.Close()
	}
	if _, err := c.AcquireFenced(ctx, "k", "t1", 5*time.Second, false); !errors.Is(err, ErrHeld) {
		t.Fatalf("acquire: %v, want held", err)
	}
	m0 := ms[0].Client()
	defer m0.Close()
	if n, _ := m0.Exists(ctx, "k", FenceKeys("k")[2]).Result(); n != 0 {
		t.Fatalf("master 0 keeps %d keys of the refused attempt", n)
	}
}

// A refusal by a holder says when its copies expire, even in their last
// millisecond, when Redis's PTTL answers 0: a waiter (LOCK.ACQUIRE … WAIT)
// that took 0 for "no expiry known" slept until its next poll. The holder
// takes the key for 3 ms and a second token tries without pause until it
// gets it, so that tries land in that last millisecond.
func TestFenceRefusalInLastMillisecondSaysWhen(t *testing.T) {
	ms := redistest.StartN(t, 3)
	c := fenceClient(t, redistest.Addrs(ms), WithRestartGuard(0))
	ctx := context.Background()
	refusals := 0
	for round := 0; round < 40; round++ {
		key := fmt.Sprintf("k%d", round)
		if _, err := c.AcquireFenced(ctx, key, "holder", 3*time.Millisecond, false); err != nil {
			continue // the machine was too slow for 3 ms: try another round
		}
		for deadline := time.Now().Add(time.Second); ; {
			r, err := c.AcquireFenced(ctx, key, "waiter", time.Second, false)
			if err == nil {
				break
			}
			if errors.Is(err, ErrHeld) {
				refusals++
				if r.RetryIn <= 0 {
					t.Fatalf("round %d: refused as held with no time to retry in (%v)", round, err)
				}
			}
			if time.Now().After(deadline) {
				t.Fatalf("round %d: not granted within 1 s of a 3 ms hold: %v", round, err)
			}
		}
	}
	if refusals == 0 {
		t.Fatal("no try was refused: the test saw nothing")
	}
	t.Logf("%d refusals", refusals)
}

func TestFenceReentrant(t *testing.T) {
	ms := redistest.StartN(t, 3)
	c := fenceClient(t, redistest.Addrs(ms), WithRestartGuard(0))
	ctx := context.Background()
	g1, err := c.AcquireFenced(ctx, "k", "t1", 5*time.Second, true)
	if err != nil {
		t.Fatal(err)
	}
	g2, err := c.AcquireFenced(ctx, "k", "t1", 5*time.Second, true)
	if err != nil || g2.Grant.Fence != g1.Grant.Fence || g2.Grant.Holds != 2 {
		t.Fatalf("reentry: %+v %v, want fence %d with 2 holds", g2.Grant, err, g1.Grant.Fence)
	}
	if _, err := c.AcquireFenced(ctx, "k", "t2", 5*time.Second, true); !errors.Is(err, ErrHeld) {
		t.Fatalf("another token, reentrant: %v", err)
	}
	rel, err := c.ReleaseFenced(ctx, "k", "t1")
	if err != nil || !rel.Released || rel.Freed {
		t.Fatalf("first release: %+v %v, want one hold given back", rel, err)
	}
	if _, err := c.AcquireFenced(ctx, "k", "t2", 5*time.Second, false); !errors.Is(err, ErrHeld) {
		t.Fatalf("acquire while one hold is left: %v", err)
	}
	rel, err = c.ReleaseFenced(ctx, "k", "t1")
	if err != nil || !rel.Freed {
		t.Fatalf("second release: %+v %v, want freed", rel, err)
	}
	g3, err := c.AcquireFenced(ctx, "k", "t2", 5*time.Second, false)
	if err != nil || g3.Grant.Fence <= g1.Grant.Fence {
		t.Fatalf("after the last release: %+v %v", g3.Grant, err)
	}
	// The TTL bounds every hold: a reentrant lock expires like any other.
	if _, err := c.AcquireFenced(ctx, "r", "t1", 300*time.Millisecond, true); err != nil {
		t.Fatal(err)
	}
	if _, err := c.AcquireFenced(ctx, "r", "t1", 300*time.Millisecond, true); err != nil {
		t.Fatal(err)
	}
	time.Sleep(400 * time.Millisecond)
	if _, err := c.AcquireFenced(ctx, "r", "t2", time.Second, false); err != nil {
		t.Fatalf("after expiry: %v", err)
	}
}

// A lock taken with SET NX has no number; a reentrant acquire of it gets a
// new one, larger than every earlier grant's.
func TestFenceReentryOfPlainLock(t *testing.T) {
	ms := redistest.StartN(t, 3)
	c := fenceClient(t, redistest.Addrs(ms), WithRestartGuard(0))
	ctx := context.Background()
	f := grantOnce(t, c, "k")
	if _, err := c.Acquire(ctx, "k", "t1", 5*time.Second); err != nil {
		t.Fatal(err)
	}
	r, err := c.AcquireFenced(ctx, "k", "t1", 5*time.Second, true)
	if err != nil || r.Grant.Fence <= f || r.Grant.Holds != 2 {
		t.Fatalf("reentry of a SET NX lock: %+v %v, want a number above %d", r.Grant, err, f)
	}
}

// The write-back of step 2 is what makes a later quorum see the number:
// master 0 is ahead (masters 1 and 2 lost their counters long ago), a
// grant answers master 0's number, then master 0 goes away. With the
// write-back, masters 1 and 2 were raised to that number and the next
// grant is larger; without it, the number goes backwards.
func TestFenceWriteBack(t *testing.T) {
	for _, commit := range []bool{true, false} {
		t.Run(map[bool]string{true: "write_back", false: "no_write_back_goes_backwards"}[commit], func(t *testing.T) {
			ms := redistest.StartN(t, 3)
			c := fenceClient(t, redistest.Addrs(ms), WithRestartGuard(0))
			c.opts.noWriteBack = !commit
			ctx := context.Background()
			for i, n := range []int{9, 2, 2} {
				m := ms[i].Client()
				m.Set(ctx, FenceKeys("k")[1], n, 0)
				m.Close()
			}
			f1 := grantOnce(t, c, "k") // answered once a quorum has the number
			ms[0].Kill()
			f2 := grantOnce(t, c, "k")
			t.Logf("numbers: %d, then %d without master 0", f1, f2)
			if commit && f2 <= f1 {
				t.Fatalf("fencing number went backwards: %d after %d", f2, f1)
			}
			if !commit && f2 > f1 {
				t.Fatal("without the write-back the number still grew: the control shows nothing")
			}
		})
	}
}

// The same token tried twice: the first attempt's undo reaches one master
// late, after the second attempt took it there. The undo names its attempt,
// so it leaves the second attempt's lock alone. Undone by token instead (as
// the plain release script would), it deletes that copy, and the granted
// lock is left on fewer than a quorum.
func TestFenceLateUndoOfEarlierAttempt(t *testing.T) {
	delayedRollbackCases(t, "by_attempt", "by_token_shows_the_hazard", func(t *testing.T, ms []*redistest.Server, c *Client, relay *redistest.Relay, byAttempt bool) {
		c.opts.undoByToken = !byAttempt
		ctx := context.Background()
		for _, m := range ms {
			mc := m.Client()
			for _, s := range []*script{fenceAcquireScript, fenceCommitScript, fenceUndoScript, fenceReleaseScript, readScript} {
				mc.ScriptLoad(ctx, s.src)
			}
			mc.Close()
		}
		for i := 0; i < 4; i++ { // idle pooled connections to every master
			go c.Read(ctx, "warm")
		}
		time.Sleep(100 * time.Millisecond)
		m1 := ms[1].Client()
		defer m1.Close()
		m1.Set(ctx, "k", "other", 10*time.Second) // another holder on one master

		relay.Delay.Store(int64(400 * time.Millisecond))
		if _, err := c.AcquireFenced(ctx, "k", "tok", 5*time.Second, false); !errors.Is(err, ErrNotAcquired) {
			t.Fatalf("first attempt: %v, want not acquired", err)
		}
		time.Sleep(50 * time.Millisecond) // its SET and undo are now held in the relay
		relay.Delay.Store(0)
		r, err := c.AcquireFenced(ctx, "k", "tok", 5*time.Second, false)
		if err != nil {
			t.Fatalf("second attempt: %v", err)
		}
		time.Sleep(700 * time.Millisecond) // the delayed SET and undo land
		held := holding(ctx, []*redistest.Server{ms[0], ms[2]}, "k", "tok")
		t.Logf("granted with fence %d; now held on %d of the 2 masters that granted it", r.Grant.Fence, held)
		if byAttempt && held < c.Quorum() {
			t.Fatal("a late undo of the first attempt deleted the second attempt's lock")
		}
		if !byAttempt && held >= c.Quorum() {
			t.Fatal("the late undo did not land after the second attempt: the test shows nothing")
		}
	})
}

// A fenced lock released by the plain unlock script leaves its state behind
// (until its TTL). A later SET NX lock of another token, re-entered with
// LOCK.ACQUIRE … REENTRANT, must not inherit the earlier grant's number.
func TestFenceStaleStateNotInherited(t *testing.T) {
	ms := redistest.StartN(t, 3)
	c := fenceClient(t, redistest.Addrs(ms), WithRestartGuard(0))
	ctx := context.Background()
	g1, err := c.AcquireFenced(ctx, "k", "t1", 5*time.Second, false)
	if err != nil {
		t.Fatal(err)
	}
	if r, err := c.Release(ctx, "k", "t1"); err != nil || !r.Released(c.Quorum()) {
		t.Fatalf("plain release: %+v %v", r, err)
	}
	if _, err := c.Acquire(ctx, "k", "t2", 5*time.Second); err != nil {
		t.Fatal(err)
	}
	g2, err := c.AcquireFenced(ctx, "k", "t2", 5*time.Second, true)
	if err != nil || g2.Grant.Fence <= g1.Grant.Fence || g2.Grant.Holds != 2 {
		t.Fatalf("reentry of t2: %+v %v, want a number above t1's %d and 2 holds", g2.Grant, err, g1.Grant.Fence)
	}
}
