// Package load holds the load tests: ten thousand concurrent clients, and a
// soak of a million operations with faults, after which the proxy must hold
// no more goroutines or memory than before.
package load

import (
	"bufio"
	"context"
	"fmt"
	"net"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/redlock-proxy/redlock-proxy/internal/redistest"
)

var binary string

func TestMain(m *testing.M) { redistest.MainWithProxy(m, "../cmd/redlock-proxy", &binary) }

// proxyProc is the proxy binary under load.
type proxyProc struct{ *redistest.Proxy }

// startProxy runs the binary with a raised file limit in front of masters.
func startProxy(t *testing.T, masters []string, extra string) *proxyProc {
	return &proxyProc{redistest.StartProxy(t, binary, func(listen string) string {
		return fmt.Sprintf("[proxy]\nlisten = %q\n%s\n[redlock]\nmasters = [%s]\nrestart_guard = false\n[log]\nlevel = \"error\"\nformat = \"json\"\n",
			listen, extra, redistest.Quote(masters))
	}, redistest.WithFileLimit(65536))}
}

func (p *proxyProc) client() *redis.Client {
	return p.Client(func(o *redis.Options) { o.PoolSize, o.ReadTimeout = 64, 3*time.Second })
}

// info reads one numeric field of the proxy's INFO.
func (p *proxyProc) info(t *testing.T, field string) int64 {
	t.Helper()
	c := p.client()
	defer c.Close()
	s, err := c.Info(context.Background(), "everything").Result()
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(s, "\r\n") {
		if v, ok := strings.CutPrefix(line, field+":"); ok {
			n, _ := strconv.ParseInt(v, 10, 64)
			return n
		}
	}
	t.Fatalf("INFO has no %s", field)
	return 0
}

// rssKB is the proxy process's resident set, from /proc.
func (p *proxyProc) rssKB(t *testing.T) int64 {
	f, err := os.Open(fmt.Sprintf("/proc/%d/status", p.Pid()))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), "VmRSS:"); ok {
			n, _ := strconv.ParseInt(strings.Fields(v)[0], 10, 64)
			return n
		}
	}
	return 0
}

func raiseFileLimit(t *testing.T, n uint64) {
	var r syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &r); err != nil {
		t.Fatal(err)
	}
	if r.Cur < n {
		r.Cur = min(n, r.Max)
		if err := syscall.Setrlimit(syscall.RLIMIT_NOFILE, &r); err != nil {
			t.Fatal(err)
		}
	}
	if r.Cur < n {
		t.Skipf("file limit %d is below %d", r.Cur, n)
	}
}

func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); !cond(); {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not true after 10s", what)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// Ten thousand clients connected at once each get an answer, and when they
// leave the proxy is back to its idle goroutine count.
func TestTenThousandClients(t *testing.T) {
	const n = 10000
	raiseFileLimit(t, n+1000)
	masters := redistest.StartN(t, 3)
	// Room above the 10,000 for the INFO clients of the test itself.
	p := startProxy(t, redistest.Addrs(masters), "max_clients = 10100")
	idleGoroutines := p.info(t, "goroutines")
	rssBefore := p.rssKB(t)
	conns := make([]net.Conn, 0, n)
	defer func() {
		for _, c := range conns {
			c.Close()
		}
	}()
	for i := 0; i < n; i++ {
		c, err := net.DialTimeout("tcp", p.Addr, 5*time.Second)
		if err != nil {
			t.Fatalf("connection %d: %v", i, err)
		}
		conns = append(conns, c)
	}
	var failed atomic.Int64
	var wg sync.WaitGroup
	for i := 0; i < len(conns); i += 500 {
		wg.Add(1)
		go func(part []net.Conn) {
			defer wg.Done()
			buf := make([]byte, 16)
			for _, c := range part {
				_ = c.SetDeadline(time.Now().Add(10 * time.Second))
				if _, err := c.Write([]byte("PING\r\n")); err != nil {
					failed.Add(1)
					continue
				}
				if k, err := c.Read(buf); err != nil || string(buf[:k]) != "+PONG\r\n" {
					failed.Add(1)
				}
			}
		}(conns[i:min(i+500, len(conns))])
	}
	wg.Wait()
	if failed.Load() != 0 {
		t.Fatalf("%d of %d clients got no PONG", failed.Load(), n)
	}
	if got := p.info(t, "connected_clients"); got < n {
		t.Fatalf("connected_clients %d, want at least %d", got, n)
	}
	rssHeld := p.rssKB(t)
	t.Logf("RSS: %d KB idle, %d KB with %d clients connected", rssBefore, rssHeld, n)
	for _, c := range conns {
		c.Close()
	}
	conns = nil
	eventually(t, "clients gone", func() bool { return p.info(t, "connected_clients") <= 1 })
	eventually(t, "goroutines back to idle", func() bool { return p.info(t, "goroutines") <= idleGoroutines+5 })
}

const unlock = `if redis.call("get",KEYS[1]) == ARGV[1] then return redis.call("del",KEYS[1]) else return 0 end`

// A million operations, half lock commands and half passthrough, while one
// master is killed and restarted and another stalled; afterwards the proxy
// holds no more goroutines than when idle and its heap has not grown.
func TestSoakMillionOpsWithFaults(t *testing.T) {
	if testing.Short() {
		t.Skip("soak skipped in -short mode")
	}
	masters := redistest.StartN(t, 3)
	p := startProxy(t, redistest.Addrs(masters), `lock_keys = ["lock:*"]`)
	idleGoroutines := p.info(t, "goroutines")
	const clients, perClient = 50, 20000
	var done, errs atomic.Int64
	var wg sync.WaitGroup
	stop := make(chan struct{})
	faultsDone := make(chan struct{})
	go func() { // faults
		defer close(faultsDone)
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			case <-time.After(2 * time.Second):
			}
			switch i % 2 {
			case 0:
				masters[1].Restart()
			case 1:
				masters[2].Stop()
				time.Sleep(300 * time.Millisecond)
				masters[2].Cont()
			}
		}
	}()
	start := time.Now()
	for w := 0; w < clients; w++ {
		wg.Add(1)
		go func(w int) {
			defer wg.Done()
			c := p.client()
			defer c.Close()
			ctx := context.Background()
			for i := 0; i < perClient; i += 4 {
				key := fmt.Sprintf("lock:%d:%d", w, i%64)
				ok, err := c.SetNX(ctx, key, "t", 5*time.Second).Result()
				if err == nil && ok {
					err = c.Eval(ctx, unlock, []string{key}, "t").Err()
				}
				if err == nil {
					err = c.Set(ctx, fmt.Sprintf("data:%d", w), i, 0).Err()
				}
				if err == nil {
					err = c.Get(ctx, fmt.Sprintf("data:%d", w)).Err()
				}
				if err != nil {
					errs.Add(1)
				}
				done.Add(4)
			}
		}(w)
	}
	wg.Wait()
	close(stop)
	elapsed := time.Since(start)
	<-faultsDone // a restart may be under way
	for _, m := range masters {
		m.Cont()
	}
	t.Logf("%d operations in %s (%.0f ops/s), %d operations with an error (faults)", done.Load(), elapsed.Round(time.Millisecond),
		float64(done.Load())/elapsed.Seconds(), errs.Load())
	if done.Load() < 1000000 {
		t.Fatalf("only %d operations", done.Load())
	}
	eventually(t, "goroutines back to idle", func() bool { return p.info(t, "goroutines") <= idleGoroutines+10 })
	heap := p.info(t, "used_memory")
	t.Logf("goroutines: %d idle before, %d after; heap in use after: %d KB, RSS %d KB",
		idleGoroutines, p.info(t, "goroutines"), heap/1024, p.rssKB(t))
	// A memory bound, not a timing one: a million operations leave no
	// retained state behind (the heap includes garbage not yet collected).
	if heap > 64<<20 {
		t.Fatalf("heap in use after the soak: %d MB", heap>>20)
	}
}
