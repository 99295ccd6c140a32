package load

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/redlock-proxy/redlock-proxy/internal/redistest"
)

// memKB reads VmRSS and VmHWM (the peak) of the proxy process, in kB.
func (p *proxyProc) memKB(t *testing.T) (rss, hwm int64) {
	f, err := os.Open(fmt.Sprintf("/proc/%d/status", p.Pid()))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		for _, field := range []struct {
			name string
			v    *int64
		}{{"VmRSS:", &rss}, {"VmHWM:", &hwm}} {
			if v, ok := strings.CutPrefix(sc.Text(), field.name); ok {
				*field.v, _ = strconv.ParseInt(strings.Fields(v)[0], 10, 64)
			}
		}
	}
	return rss, hwm
}

var markedDownRE = regexp.MustCompile(`master\d+:[^\r]*,marked_down=(\d+),`)

// A 25 MB value on a lock key, written on the masters directly, is read
// through the proxy binary by a client in a loop, across slow links to
// the masters, while four others
// acquire and release keys of their own: none of their operations fails
// (at most 1%, which a loaded machine's stalls can fail on their own), no
// master is marked down, and the proxy's resident memory is reported
// (and bounded): with the default proxy.max_lock_value the value never
// leaves the masters; with the bound raised to 64 MB the read holds one
// copy of it, not one per master (and the reply being written). The same run with the engine's guard
// off (a test-only switch) is the control: the other clients' operations
// fail.
func TestLongValueReadMemory(t *testing.T) {
	if testing.Short() {
		t.Skip("long-value runs skipped in -short mode")
	}
	for _, tc := range []struct {
		name, extra string
		env         []string
		served      bool
		control     bool
		maxPeakMB   int64
	}{
		{name: "default bound", maxPeakMB: 64},
		{name: "bound 64mb", extra: `max_lock_value = "64mb"`, served: true, maxPeakMB: 200},
		{name: "bound 64mb, guard off", extra: `max_lock_value = "64mb"`, served: true, control: true,
			env: []string{"REDLOCK_PROXY_UNSAFE_GUARDS_OFF=big-payloads"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			// Each master behind a link of about 16 MB/s (32 KB every 2
			// ms): a 25 MB value takes over a second and a half to arrive,
			// whatever else runs on the machine.
			masters := redistest.StartN(t, 3)
			var links []string
			for _, m := range masters {
				r := redistest.NewRelay(t, m.Addr)
				r.Delay.Store(int64(2 * time.Millisecond))
				links = append(links, r.Addr())
			}
			bin := binary
			if len(tc.env) > 0 {
				bin = redistest.UnsafeProxy(t) // the guards-off switch is a test build's
			}
			p := &proxyProc{redistest.StartProxy(t, bin, func(listen string) string {
				return fmt.Sprintf("[proxy]\nlisten = %q\n%s\n[redlock]\nmasters = [%s]\nnode_timeout = \"500ms\"\nrestart_guard = false\n[log]\nlevel = \"error\"\nformat = \"json\"\n",
					listen, tc.extra, redistest.Quote(links))
			}, redistest.WithEnv(tc.env...))}
			big := strings.Repeat("v", 25<<20)
			for _, m := range masters {
				c := m.Client()
				if err := c.Set(context.Background(), "big", big, 0).Err(); err != nil {
					t.Fatal(err)
				}
				c.Close()
			}
			rss0, hwm0 := p.memKB(t)
			stop := make(chan struct{})
			var wg sync.WaitGroup
			var ops, fails, reads, served atomic.Int64
			var lastErr atomic.Value
			for i := 0; i < 4; i++ {
				wg.Add(1)
				go func(i int) {
					defer wg.Done()
					c := p.client()
					defer c.Close()
					ctx := context.Background()
					for j := 0; ; j++ {
						select {
						case <-stop:
							return
						default:
						}
						k, tok := fmt.Sprintf("lock:%d:%d", i, j), strconv.Itoa(j) // a key each: a failed release does not hold up the next acquire
						ok, err := c.SetNX(ctx, k, tok, 5*time.Second).Result()
						ops.Add(1)
						if err != nil || !ok {
							fails.Add(1)
							lastErr.Store(fmt.Sprint("acquire: ", ok, err))
							continue
						}
						n, err := c.Eval(ctx, unlock, []string{k}, tok).Int()
						ops.Add(1)
						if err != nil || n != 1 {
							fails.Add(1)
							lastErr.Store(fmt.Sprint("release: ", n, err))
						}
					}
				}(i)
			}
			var readErr atomic.Value
			for i := 0; i < 1; i++ {
				wg.Add(1)
				go func() {
					defer wg.Done()
					// A read takes seconds over these links.
					c := p.Client(func(o *redis.Options) { o.ReadTimeout = 30 * time.Second })
					defer c.Close()
					for {
						select {
						case <-stop:
							return
						default:
						}
						v, err := c.Get(context.Background(), "big").Result()
						reads.Add(1)
						if err == nil && v == big {
							served.Add(1)
						} else if err != nil {
							readErr.Store(err.Error())
							time.Sleep(10 * time.Millisecond)
						}
					}
				}()
			}
			var peakRSS, peakHeap int64
			ic := p.client()
			defer ic.Close()
			for end := time.Now().Add(8 * time.Second); time.Now().Before(end); time.Sleep(50 * time.Millisecond) {
				rss, _ := p.memKB(t)
				peakRSS = max(peakRSS, rss)
				for _, l := range strings.Split(ic.Info(context.Background(), "memory").Val(), "\r\n") {
					if v, ok := strings.CutPrefix(l, "used_memory:"); ok {
						n, _ := strconv.ParseInt(v, 10, 64)
						peakHeap = max(peakHeap, n)
					}
				}
			}
			close(stop)
			wg.Wait()
			_, hwm := p.memKB(t)
			info := p.Client().Info(context.Background(), "redlock").Val()
			downs := 0
			for _, m := range markedDownRE.FindAllStringSubmatch(info, -1) {
				d, _ := strconv.Atoi(m[1])
				downs += d
			}
			t.Logf("%s: RSS %.1f MB before (peak so far %.1f MB); sampled peak during %.1f MB (Go heap %.1f MB), VmHWM after %.1f MB; "+
				"%d lock operations, %d failed (last: %v); %d reads of 25 MB, %d served (last error: %v); masters marked down %d times",
				tc.name, float64(rss0)/1024, float64(hwm0)/1024, float64(peakRSS)/1024, float64(peakHeap)/(1<<20), float64(hwm)/1024,
				ops.Load(), fails.Load(), lastErr.Load(), reads.Load(), served.Load(), readErr.Load(), downs)
			// A loaded machine can fail a few operations at the node
			// timeout whatever the reads do (4 of 2081 in one CI run, no
			// master marked down); the reads starving the lock pipeline
			// fail many (39 of 99 in the control's run beside it).
			starved := fails.Load()*100 > ops.Load()
			if tc.control {
				if !starved {
					t.Fatalf("with the guard off %d of %d lock operations failed, no more than 1%%: the control shows nothing", fails.Load(), ops.Load())
				}
				return
			}
			if starved || downs != 0 {
				t.Errorf("%d of %d lock operations failed (last: %v); masters marked down %d times", fails.Load(), ops.Load(), lastErr.Load(), downs)
			}
			if tc.served != (served.Load() > 0) || tc.served && served.Load() != reads.Load() {
				t.Errorf("%d of %d reads served (last error: %v)", served.Load(), reads.Load(), readErr.Load())
			}
			if hwm/1024 > tc.maxPeakMB {
				t.Errorf("the proxy's peak RSS was %d MB, more than %d MB", hwm/1024, tc.maxPeakMB)
			}
		})
	}
}

// The issue's own case: a 100 MB token in SET k <token> NX PX 20000, sent
// through the proxy binary five times while four clients acquire and
// release keys of their own. It is refused (proxy.max_lock_value) without
// anything reaching the masters, and the others' operations go on; the
// proxy's memory is what reading the command takes. The control, with the
// bound and the engine's guard off, sends the token to every master (and
// again to undo the refused acquires).
func TestOversizedTokenMemory(t *testing.T) {
	if testing.Short() {
		t.Skip("long-value runs skipped in -short mode")
	}
	for _, tc := range []struct {
		name    string
		env     []string
		control bool
	}{
		{name: "bound"},
		{name: "bound and guard off", control: true, env: []string{"REDLOCK_PROXY_UNSAFE_GUARDS_OFF=max-lock-value,big-payloads"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			masters := redistest.StartN(t, 3)
			bin := binary
			if len(tc.env) > 0 {
				bin = redistest.UnsafeProxy(t) // the guards-off switch is a test build's
			}
			p := &proxyProc{redistest.StartProxy(t, bin, func(listen string) string {
				return fmt.Sprintf("[proxy]\nlisten = %q\n[redlock]\nmasters = [%s]\nnode_timeout = \"300ms\"\nrestart_guard = false\n[log]\nlevel = \"error\"\nformat = \"json\"\n",
					listen, redistest.Quote(redistest.Addrs(masters)))
			}, redistest.WithEnv(tc.env...))}
			rss0, _ := p.memKB(t)
			stop := make(chan struct{})
			var wg sync.WaitGroup
			var ops, fails atomic.Int64
			var lastErr atomic.Value
			for i := 0; i < 4; i++ {
				wg.Add(1)
				go func(i int) {
					defer wg.Done()
					c := p.client()
					defer c.Close()
					ctx := context.Background()
					for j := 0; ; j++ {
						select {
						case <-stop:
							return
						default:
						}
						k, tok := fmt.Sprintf("lock:%d:%d", i, j), strconv.Itoa(j) // a key each: a failed release does not hold up the next acquire
						ok, err := c.SetNX(ctx, k, tok, 5*time.Second).Result()
						ops.Add(1)
						if err != nil || !ok {
							fails.Add(1)
							lastErr.Store(fmt.Sprint("acquire: ", ok, err))
							continue
						}
						n, err := c.Eval(ctx, unlock, []string{k}, tok).Int()
						ops.Add(1)
						if err != nil || n != 1 {
							fails.Add(1)
							lastErr.Store(fmt.Sprint("release: ", n, err))
						}
					}
				}(i)
			}
			token := strings.Repeat("t", 100<<20)
			c := p.Client(func(o *redis.Options) { o.ReadTimeout, o.WriteTimeout = 60*time.Second, 60*time.Second })
			defer c.Close()
			var replies []string
			start := time.Now()
			for i := 0; i < 5; i++ {
				err := c.SetArgs(context.Background(), "big", token, redis.SetArgs{Mode: "NX", TTL: 20 * time.Second}).Err()
				replies = append(replies, fmt.Sprint(err))
			}
			took := time.Since(start)
			time.Sleep(time.Second) // rollbacks and retries that are still under way
			close(stop)
			wg.Wait()
			_, hwm := p.memKB(t)
			held := 0
			for _, m := range masters {
				mc := m.Client()
				if n, _ := mc.StrLen(context.Background(), "big").Result(); n > 0 {
					held++
				}
				mc.Close()
			}
			t.Logf("%s: 5 SET NX PX 20000 of a 100 MB token in %v, first reply %.90q; RSS %.1f MB before, VmHWM %.1f MB; "+
				"%d other lock operations, %d failed (last: %v); masters holding the token: %d",
				tc.name, took.Round(time.Millisecond), replies[0], float64(rss0)/1024, float64(hwm)/1024, ops.Load(), fails.Load(), lastErr.Load(), held)
			if tc.control {
				if held == 0 && fails.Load() == 0 {
					t.Fatal("with the bound and the guard off the token reached no master and nothing failed: the control shows nothing")
				}
				return
			}
			// Reading five 100 MB commands takes the machine's memory and CPU
			// for a while (the proxy reads a command whole before it parses
			// it): on a shared 2-CPU machine an operation of another client
			// may miss the node timeout meanwhile (3 of 16,619 in one run;
			// 472 of 9,003 in one CI run beside the race-built packages, at
			// the default node timeout of 100 ms, hence 300 ms here), as
			// under any load. What the bound owes is that none of the token
			// reaches a master, and that the others are not failed by it:
			// nearly all succeed (none of 16,852 and of 17,958 in two runs),
			// where without it 16% and 67% failed in the same two runs.
			if !strings.Contains(replies[0], "exceeds proxy.max_lock_value") || held != 0 || fails.Load()*100 > ops.Load() {
				t.Errorf("replies %.90q, masters holding the token %d, %d of %d other operations failed (last: %v)", replies, held, fails.Load(), ops.Load(), lastErr.Load())
			}
		})
	}
}
