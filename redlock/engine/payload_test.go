package engine

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/redlock-proxy/redlock-proxy/internal/redistest"
)

// Long values and long commands stay off the shared pipelines
// (GuardBigPayloads): see batch.go and conn.go.

// slowLinks starts n masters, each behind a relay that forwards at most 32
// KB every 5 ms (about 6.5 MB/s): a value of 4 MB takes longer to come
// than the node timeout of these tests (400 ms, so that a machine shared
// with other work does not fail lock commands on its own).
func slowLinks(t *testing.T, n int) (ms []*redistest.Server, addrs []string) {
	ms = redistest.StartN(t, n)
	for _, m := range ms {
		r := redistest.NewRelay(t, m.Addr)
		r.Delay.Store(int64(5 * time.Millisecond))
		addrs = append(addrs, r.Addr())
	}
	return ms, addrs
}

// seedAll sets key to v on every master directly.
func seedAll(t *testing.T, ms []*redistest.Server, key, v string) {
	t.Helper()
	for _, m := range ms {
		c := m.Client()
		if err := c.Set(context.Background(), key, v, 0).Err(); err != nil {
			t.Fatal(err)
		}
		c.Close()
	}
}

// acquireLoop acquires and releases a key of its own in each of n
// goroutines until stop, and returns how many operations ran and failed.
func acquireLoop(c *Client, n int, stop <-chan struct{}) (ops, fails *atomic.Int64, errs chan error, wait func()) {
	ops, fails, errs = new(atomic.Int64), new(atomic.Int64), make(chan error, 5)
	var wg sync.WaitGroup
	for i := 0; i < n; i++ {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			ctx := context.Background()
			for j := 0; ; j++ {
				select {
				case <-stop:
					return
				default:
				}
				k, v := fmt.Sprint("own", i), fmt.Sprint(j)
				_, err := c.Acquire(ctx, k, v, 10*time.Second)
				if err == nil {
					var r ReleaseResult
					r, err = c.Release(ctx, k, v)
					if err == nil && !r.Released(c.Quorum()) {
						err = fmt.Errorf("release not done: %+v", r)
					}
				}
				ops.Add(1)
				if err != nil {
					fails.Add(1)
					select {
					case errs <- err:
					default:
					}
				}
			}
		}(i)
	}
	return ops, fails, errs, wg.Wait
}

// A reply with a long string on a shared pipeline (SET NX GET finding a 4
// MB value written on the masters directly, over half a second on these
// links) hands the pipeline to a new worker: the commands queued behind it
// go on at once, the reply itself is not failed while it arrives, the
// value is hashed and dropped (beyond WithMaxValue), and no master counts
// as failing. With GuardBigPayloads off the same replies fail the others'
// commands.
func TestLongReplyHandsThePipelineOver(t *testing.T) {
	for _, off := range []bool{false, true} {
		t.Run(fmt.Sprintf("guard_off=%v", off), func(t *testing.T) {
			ms, addrs := slowLinks(t, 3)
			opts := []Option{WithRestartGuard(0), WithNodeTimeout(400 * time.Millisecond), WithMaxValue(64 << 10), WithRetry(0, 0)}
			if off {
				opts = append(opts, WithGuardsOff(GuardBigPayloads))
			}
			c, err := New(addrs, opts...)
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			seedAll(t, ms, "big", strings.Repeat("b", 4<<20))
			stop := make(chan struct{})
			ops, fails, errs, wait := acquireLoop(c, 4, stop)
			var held, other int
			for i := 0; i < 4; i++ {
				r, err := c.AcquireGet(context.Background(), "big", "tok", time.Second)
				switch {
				case errors.Is(err, ErrHeld) && r.PrevTooLarge != nil && r.PrevTooLarge.Len == 4<<20:
					held++
				default:
					other++
					t.Logf("acquire over the long value: %+v %v", r, err)
				}
			}
			close(stop)
			wait()
			var handoffs int64
			downs := 0
			for _, s := range c.Status() {
				handoffs += s.Handoffs
				downs += s.MarkedDown
			}
			t.Logf("%d acquires over the 4 MB value refused as held, %d otherwise; %d other operations, %d failed; %d handoffs; marked down %d times",
				held, other, ops.Load(), fails.Load(), handoffs, downs)
			if off {
				if fails.Load() == 0 {
					t.Fatal("with the guard off no other operation failed: the control shows nothing")
				}
				return
			}
			if fails.Load() != 0 {
				t.Errorf("%d of %d other operations failed: %v", fails.Load(), ops.Load(), <-errs)
			}
			if held != 4 || handoffs == 0 || downs != 0 {
				t.Errorf("held %d of 4, handoffs %d, marked down %d", held, handoffs, downs)
			}
		})
	}
}

// A command longer than the shared pipeline carries (a 2 MB value written
// to every master) goes on connections of its own, and takes as long as
// its bytes take, while the other operations go on.
func TestLongCommandRunsAlone(t *testing.T) {
	_, addrs := slowLinks(t, 3)
	c, err := New(addrs, WithRestartGuard(0), WithNodeTimeout(400*time.Millisecond), WithRetry(0, 0))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	stop := make(chan struct{})
	ops, fails, errs, wait := acquireLoop(c, 4, stop)
	v := strings.Repeat("w", 2<<20)
	for i := 0; i < 3; i++ {
		for _, r := range c.Broadcast(context.Background(), "long", nil, "set", "long", v) {
			if r.Err != nil || r.Val != "OK" {
				t.Fatalf("SET of 2 MB on %s: %v %v", r.Addr, r.Val, r.Err)
			}
		}
	}
	close(stop)
	wait()
	var alone int64
	for _, s := range c.Status() {
		alone += s.AloneCommands
	}
	if fails.Load() != 0 || alone < 9 {
		t.Fatalf("%d of %d other operations failed (%v); %d commands alone", fails.Load(), ops.Load(), <-errs, alone)
	}
}

// Read of a key whose value is longer than the shared pipeline carries:
// beyond WithMaxValue it is not read at all (ValueTooLargeError, and the
// masters send nothing of it); within it, it is read on connections of
// its own, one copy kept, the others compared by hash: the majority's
// value, whichever master the kept copy came from.
func TestReadOfLongValue(t *testing.T) {
	ms := redistest.StartN(t, 3)
	addrs := redistest.Addrs(ms)
	ctx := context.Background()
	x, y := strings.Repeat("x", 1<<20), strings.Repeat("y", 1<<20)

	small, err := New(addrs, WithRestartGuard(0), WithMaxValue(64<<10))
	if err != nil {
		t.Fatal(err)
	}
	defer small.Close()
	seedAll(t, ms, "k", x)
	out := func() (n int64) {
		for _, m := range ms {
			c := m.Client()
			info := c.Info(ctx, "stats").Val()
			c.Close()
			var v int64
			for _, l := range strings.Split(info, "\r\n") {
				if s, ok := strings.CutPrefix(l, "total_net_output_bytes:"); ok {
					fmt.Sscan(s, &v)
				}
			}
			n += v
		}
		return n
	}
	before := out()
	_, err = small.Read(ctx, "k")
	var tl *ValueTooLargeError
	if !errors.As(err, &tl) || tl.Len != 1<<20 || tl.Max != 64<<10 {
		t.Fatalf("read of a 1 MB value with a 64 KB bound: %v", err)
	}
	if sent := out() - before; sent > 64<<10 {
		t.Fatalf("the masters sent %d bytes for a read that was refused", sent)
	}

	big, err := New(addrs, WithRestartGuard(0), WithMaxValue(4<<20))
	if err != nil {
		t.Fatal(err)
	}
	defer big.Close()
	for _, tc := range []struct {
		vals []string // per master; "" absent
		want string   // "" absent
		err  bool     // NOQUORUM
	}{
		{[]string{x, x, x}, x, false},
		{[]string{x, y, y}, y, false}, // the kept copy (master 0's) is not the majority's
		{[]string{y, x, y}, y, false},
		{[]string{x, y, ""}, "", false},
		{[]string{x, "short", "short"}, "short", false},
	} {
		for i, m := range ms {
			c := m.Client()
			if tc.vals[i] == "" {
				c.Del(ctx, "k")
			} else {
				c.Set(ctx, "k", tc.vals[i], time.Minute)
			}
			c.Close()
		}
		k, err := big.Read(ctx, "k")
		if err != nil || k.Exists != (tc.want != "") || k.Value != tc.want || (k.Exists && k.PTTL <= 50*time.Second) {
			t.Errorf("read of %.1q…: %v %.10q %v %v; want %.10q", tc.vals, k.Exists, k.Value, k.PTTL, err, tc.want)
		}
	}
	var alone int64
	for _, s := range big.Status() {
		alone += s.AloneCommands
	}
	if alone == 0 {
		t.Fatal("no long read went on a connection of its own")
	}
}

// GETDEL (BroadcastValue) of a key whose value is longer than WithMaxValue
// changes nothing and answers LargeValue; within it, it runs as GETDEL.
func TestBroadcastValueOfLongValue(t *testing.T) {
	ms := redistest.StartN(t, 3)
	c, err := New(redistest.Addrs(ms), WithRestartGuard(0), WithMaxValue(64<<10))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ctx := context.Background()
	seedAll(t, ms, "k", strings.Repeat("x", 1<<20))
	for _, r := range c.BroadcastValue(ctx, "k", nil, "getdel", "k") {
		if lv, ok := r.Val.(LargeValue); r.Err != nil || !ok || lv.Len != 1<<20 {
			t.Fatalf("GETDEL of a 1 MB value: %v %v", r.Val, r.Err)
		}
	}
	for _, m := range ms {
		mc := m.Client()
		if n, _ := mc.StrLen(ctx, "k").Result(); n != 1<<20 {
			t.Fatalf("%s: GETDEL of a long value changed it: %d bytes left", m.Addr, n)
		}
		mc.Close()
	}
	seedAll(t, ms, "k", "short")
	for _, r := range c.BroadcastValue(ctx, "k", nil, "getdel", "k") {
		if r.Err != nil || r.Val != "short" {
			t.Fatalf("GETDEL of a short value: %v %v", r.Val, r.Err)
		}
	}
	for _, r := range c.BroadcastValue(ctx, "k", nil, "getdel", "k") {
		if r.Err != redis.Nil {
			t.Fatalf("GETDEL of an absent key: %v %v", r.Val, r.Err)
		}
	}
	mc := ms[0].Client()
	mc.HSet(ctx, "h", "f", "v")
	mc.Close()
	for _, r := range c.BroadcastValue(ctx, "h", nil, "getdel", "h") {
		if r.Addr == ms[0].Addr && (r.Err == nil || !strings.HasPrefix(r.Err.Error(), "WRONGTYPE")) {
			t.Fatalf("GETDEL of a hash: %v %v", r.Val, r.Err)
		}
	}
}
