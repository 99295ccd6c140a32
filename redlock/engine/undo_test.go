package engine

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redlock-proxy/redlock-proxy/internal/redistest"
)

// A refused acquire's rollback that fails without reaching a master (its
// connection cannot be opened within the node timeout, as with a master
// stalled on its disk) is tried again until it lands. Without the retries
// the master's part of the refused acquire holds the key, for nobody, until
// it expires.
func TestFailedRollbackIsRetried(t *testing.T) {
	kinds := []struct {
		name    string
		acquire func(ctx context.Context, c *Client) (bool, error)
	}{
		{"set_nx", func(ctx context.Context, c *Client) (bool, error) {
			l, err := c.Acquire(ctx, "k", "tok", 10*time.Second)
			return l != nil, err
		}},
		{"fenced", func(ctx context.Context, c *Client) (bool, error) {
			r, err := c.AcquireFenced(ctx, "k", "tok", 10*time.Second, false)
			return r.Grant != nil, err
		}},
	}
	for _, kind := range kinds {
		for _, retry := range []bool{true, false} {
			name := kind.name + "/retried"
			if !retry {
				name = kind.name + "/no_retry_shows_the_key_left_held"
			}
			t.Run(name, func(t *testing.T) {
				failedRollback(t, kind.acquire, retry, false)
			})
		}
		// The master then answers the retries BUSY (a script runs past its
		// busy threshold) for a second: they go on until it answers.
		t.Run(kind.name+"/retried_through_busy", func(t *testing.T) {
			failedRollback(t, kind.acquire, true, true)
		})
	}
}

func failedRollback(t *testing.T, acquire func(context.Context, *Client) (bool, error), retry, busy bool) {
	ms := redistest.StartN(t, 2)
	ms = append(ms, redistest.Start(t, "--busy-reply-threshold", "50"))
	relay := redistest.NewRelay(t, ms[2].Addr)
	var logMu sync.Mutex
	var logs []string
	c, err := New([]string{ms[0].Addr, ms[1].Addr, relay.Addr()},
		WithNodeTimeout(100*time.Millisecond), WithRetry(0, 0), WithRestartGuard(0), WithMarkDown(0, 0),
		WithLogf(func(format string, args ...any) {
			logMu.Lock()
			defer logMu.Unlock()
			logs = append(logs, format)
		}))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.opts.noUndoRetry = !retry
	ctx := context.Background()
	// Every master knows the scripts, so that the delayed vote below runs,
	// and every pipeline's connection is open.
	for _, m := range ms {
		mc := m.Client()
		for _, s := range []*script{releaseScript, fenceAcquireScript, fenceUndoScript} {
			if err := mc.ScriptLoad(ctx, s.src).Err(); err != nil {
				t.Fatal(err)
			}
		}
		mc.Close()
	}
	pctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	if n := c.Probe(pctx); n != 3 {
		t.Fatalf("Probe reached %d masters", n)
	}
	m1, m2 := ms[1].Client(), ms[2].Client()
	defer m1.Close()
	defer m2.Close()
	m1.Set(ctx, "k", "other", 10*time.Second) // held elsewhere: tok is refused

	// The third master's vote reaches it late (300 ms, the node timeout is
	// 100); the rollback then needs a new connection, whose handshake is
	// as late: it fails, sending nothing.
	relay.Delay.Store(int64(300 * time.Millisecond))
	granted, err := acquire(ctx, c)
	if granted || !errors.Is(err, ErrNotAcquired) {
		t.Fatalf("acquire: granted %v, %v; want refused", granted, err)
	}
	time.Sleep(500 * time.Millisecond)
	if v, _ := m2.Get(ctx, "k").Result(); v != "tok" {
		t.Fatalf("the late vote should have landed on the third master, which holds %q: the test shows nothing", v)
	}
	if busy {
		bc, kc := ms[2].Client(), ms[2].Client()
		defer bc.Close()
		defer kc.Close()
		go bc.Eval(ctx, "while true do end", nil)
		time.Sleep(100 * time.Millisecond)
		if err := kc.Ping(ctx).Err(); err == nil || !strings.HasPrefix(err.Error(), "BUSY") {
			t.Fatalf("the third master should answer BUSY: %v", err)
		}
		time.AfterFunc(time.Second, func() { kc.ScriptKill(ctx) })
	}
	relay.Delay.Store(0) // the master answers in time again

	deadline := time.Now().Add(3 * time.Second)
	var v string
	for {
		v, _ = m2.Get(ctx, "k").Result()
		if v != "tok" || time.Now().After(deadline) {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	failures := c.Status()[2].RollbackFailures
	if failures == 0 {
		t.Error("no failed rollback counted")
	}
	if !retry {
		if v != "tok" {
			t.Fatalf("without retries the third master should still hold tok, holds %q", v)
		}
		pttl, _ := m2.PTTL(ctx, "k").Result()
		t.Logf("without retries the refused acquire's part stays on the third master for %v more", pttl.Round(time.Millisecond))
		return
	}
	if v == "tok" {
		t.Fatalf("the rollback was not retried: the third master still holds tok after 3 s (%d failures)", failures)
	}
	if v != "" {
		t.Fatalf("third master holds %q", v)
	}
	// The try that removed the key may be one that timed out: the one
	// after it lands and logs.
	for end := time.Now().Add(3 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		logMu.Lock()
		ok := containsLog(logs, "failed (%v); trying again") && containsLog(logs, "done at try")
		got := append([]string(nil), logs...)
		logMu.Unlock()
		if ok {
			break
		}
		if time.Now().After(end) {
			t.Fatalf("the retries were not logged: %q", got)
		}
	}
	t.Logf("rollback landed after %d failed tries", failures)
}

func containsLog(logs []string, s string) bool {
	for _, l := range logs {
		if strings.Contains(l, s) {
			return true
		}
	}
	return false
}

// Rollback log lines about one master are limited to one a second of each
// kind; the next one says how many were left out.
func TestRollbackLogLinesLimited(t *testing.T) {
	var lines []string
	o := &options{logf: func(format string, args ...any) { lines = append(lines, fmt.Sprintf(format, args...)) }}
	n := &node{addr: "m", opts: o}
	for i := 0; i < 100; i++ {
		n.undoLog(undoFailing, "rollback %d failing", i)
		n.undoLog(undoDone, "rollback %d done", i)
	}
	if len(lines) != 2 || lines[0] != "rollback 0 failing" || lines[1] != "rollback 0 done" {
		t.Fatalf("100 of each kind within a second logged %q, want the first of each", lines)
	}
	n.undoLogs[undoFailing].last = time.Now().Add(-time.Second)
	n.undoLog(undoFailing, "rollback %d failing", 100)
	n.undoLog(undoDone, "rollback %d done", 100)
	if len(lines) != 3 || lines[2] != "rollback 100 failing (and 99 more like it since the last such line)" {
		t.Fatalf("a second later: %q", lines[2:])
	}
}

// Close lets the rollback of an acquire that was not granted land: the
// acquire is refused by masters 0 and 1 (the key is another's there)
// before master 2, 200 ms away, has answered; its vote, and the rollback
// that vote calls for, come after the acquire returned, and Close right
// after it waits for them. Closing at once (no_drain_shows_the_key_left),
// master 2 holds the key for the refused token when Close returns, as it
// would until the key expires in a process that exits then.
func TestCloseLetsRollbacksLand(t *testing.T) {
	for _, drain := range []bool{true, false} {
		name := "drained"
		if !drain {
			name = "no_drain_shows_the_key_left"
		}
		t.Run(name, func(t *testing.T) {
			ms := redistest.StartN(t, 3)
			relay := redistest.NewRelay(t, ms[2].Addr)
			c, err := New([]string{ms[0].Addr, ms[1].Addr, relay.Addr()},
				WithNodeTimeout(time.Second), WithRetry(0, 0), WithRestartGuard(0), WithMarkDown(0, 0))
			if err != nil {
				t.Fatal(err)
			}
			c.opts.noCloseDrain = !drain
			ctx := context.Background()
			pctx, cancel := context.WithTimeout(ctx, 5*time.Second)
			defer cancel()
			if n := c.Probe(pctx); n != 3 {
				t.Fatalf("Probe reached %d masters", n)
			}
			for _, m := range ms[:2] {
				mc := m.Client()
				if err := mc.Set(ctx, "k", "other", time.Minute).Err(); err != nil {
					t.Fatal(err)
				}
				mc.Close()
			}
			relay.Delay.Store(int64(200 * time.Millisecond))
			l, err := c.Acquire(ctx, "k", "tok", time.Minute)
			if l != nil || !errors.Is(err, ErrNotAcquired) {
				t.Fatalf("acquire of a key two masters hold for another: %v, %v; want refused", l, err)
			}
			start := time.Now()
			c.Close()
			closed := time.Since(start)
			m2 := ms[2].Client()
			defer m2.Close()
			get := func() string { v, _ := m2.Get(ctx, "k").Result(); return v }
			if drain {
				if v := get(); v != "" {
					t.Fatalf("after Close (%v), master 2 holds the key for %q: the refused acquire's part was left behind", closed, v)
				}
				t.Logf("Close waited %v; master 2 holds no key", closed)
				return
			}
			var v string
			for i := 0; i < 40 && v == ""; i++ {
				if v = get(); v == "" {
					time.Sleep(10 * time.Millisecond)
				}
			}
			if v != "tok" {
				t.Fatalf("closing at once, master 2 never held the refused token (%q): the test shows nothing", v)
			}
			t.Logf("closing at once (%v), master 2 holds the key for the refused token", closed)
		})
	}
}
