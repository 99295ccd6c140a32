package proxy_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/redlock-proxy/redlock-proxy/internal/redistest"
	"github.com/redlock-proxy/redlock-proxy/proxy"
	"github.com/redlock-proxy/redlock-proxy/redlock/engine"
)

func TestMain(m *testing.M) {
	code := m.Run()
	if binCleanup != nil {
		binCleanup()
	}
	os.Exit(code)
}

var (
	binOnce    sync.Once
	binPath    string
	binErr     error
	binCleanup func()
)

// proxyBinary builds the proxy binary once, for the tests that run it as a
// process.
func proxyBinary(t *testing.T) string {
	t.Helper()
	binOnce.Do(func() { binPath, binCleanup, binErr = redistest.BuildProxy("../cmd/redlock-proxy") })
	if binErr != nil {
		t.Fatal(binErr)
	}
	return binPath
}

// startBinary runs the proxy binary in front of masters and returns a
// client of it.
func startBinary(t *testing.T, masters []string, extra string) *redis.Client {
	t.Helper()
	c, _ := startBinaryKill(t, masters, extra)
	return c
}

// startBinaryKill is startBinary that also returns a function that kills
// the process (SIGKILL).
func startBinaryKill(t *testing.T, masters []string, extra string) (*redis.Client, func()) {
	t.Helper()
	addr := fmt.Sprintf("127.0.0.1:%d", redistest.FreePort(t))
	cfg := filepath.Join(t.TempDir(), "config.toml")
	body := fmt.Sprintf("[proxy]\nlisten = %q\n%s\n[redlock]\nmasters = [\"%s\"]\nnode_timeout = \"200ms\"\nrestart_guard_window = \"1s\"\n[log]\nlevel = \"error\"\nformat = \"json\"\n",
		addr, extra, strings.Join(masters, `", "`))
	if err := os.WriteFile(cfg, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(proxyBinary(t), "-config", cfg)
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	var once sync.Once
	kill := func() { once.Do(func() { _ = cmd.Process.Kill(); _, _ = cmd.Process.Wait() }) }
	t.Cleanup(kill)
	c := redis.NewClient(&redis.Options{Addr: addr, MaxRetries: -1, Protocol: 2, ReadTimeout: 10 * time.Second})
	t.Cleanup(func() { c.Close() })
	for deadline := time.Now().Add(5 * time.Second); c.Ping(context.Background()).Err() != nil; {
		if time.Now().After(deadline) {
			t.Fatal("proxy did not start")
		}
		time.Sleep(10 * time.Millisecond)
	}
	return c, kill
}

// grantReader returns a reader of LOCK.ACQUIRE replies: token, fence,
// validity; ok false for the null reply.
func grantReader(t *testing.T) func(v any, err error) (tok string, fence, validity int64, ok bool) {
	return func(v any, err error) (string, int64, int64, bool) {
		t.Helper()
		return grantReply(t, v, err)
	}
}

func grantReply(t *testing.T, v any, err error) (tok string, fence, validity int64, ok bool) {
	t.Helper()
	if err == redis.Nil {
		return "", 0, 0, false
	}
	if err != nil {
		t.Fatalf("LOCK.ACQUIRE: %v", err)
	}
	a, isArr := v.([]any)
	if !isArr || len(a) != 3 {
		t.Fatalf("LOCK.ACQUIRE reply %#v", v)
	}
	return a[0].(string), a[1].(int64), a[2].(int64), true
}

func TestLockCmdBasics(t *testing.T) {
	e := newEnv(t, 3, nil)
	gr := grantReader(t)
	key := e.key("k")
	tok, f1, v, ok := gr(e.do("LOCK.ACQUIRE", key, 10000, "TOKEN", "t1"))
	if !ok || tok != "t1" || f1 != 1 || v <= 0 || v > 10000 {
		t.Fatalf("first grant: %q %d %d %v", tok, f1, v, ok)
	}
	if _, _, _, ok := gr(e.do("LOCK.ACQUIRE", key, 10000)); ok {
		t.Fatal("granted while held")
	}
	// A fenced lock is an ordinary lock key: GET answers its token.
	got, _ := e.do("GET", key)
	mustEqual(t, "GET", got, any("t1"))
	n, err := e.do("LOCK.EXTEND", key, "t1", 20000)
	if err != nil || n.(int64) < 19000 || n.(int64) > 20000 {
		t.Fatalf("LOCK.EXTEND: %v %v", n, err)
	}
	n, _ = e.do("LOCK.EXTEND", key, "t2", 20000)
	mustEqual(t, "LOCK.EXTEND by another token", n, any(int64(0)))
	n, _ = e.do("LOCK.RELEASE", key, "t2")
	mustEqual(t, "LOCK.RELEASE by another token", n, any(int64(0)))
	n, _ = e.do("LOCK.RELEASE", key, "t1")
	mustEqual(t, "LOCK.RELEASE", n, any(int64(1)))
	n, _ = e.do("LOCK.RELEASE", key, "t1")
	mustEqual(t, "LOCK.RELEASE again", n, any(int64(0)))
	// A generated token: 32 hex digits, and the next number.
	tok, f2, _, ok := gr(e.do("LOCK.ACQUIRE", key, 10000))
	if !ok || len(tok) != 32 || f2 != f1+1 {
		t.Fatalf("generated token %q, fence %d (previous %d)", tok, f2, f1)
	}
}

func TestLockCmdInfo(t *testing.T) {
	e := newEnv(t, 3, nil)
	gr := grantReader(t)
	key := e.key("k")
	gr(e.do("LOCK.ACQUIRE", key, 10000, "TOKEN", "t1"))
	eventually(t, "every master holds it", func() bool { return count(e.onMasters(key), "t1") == 3 })
	v, err := e.do("LOCK.INFO", key)
	if err != nil {
		t.Fatal(err)
	}
	a := fields(t, v)
	if len(a) != 5 || a["token"] != "t1" || a["fence"] != int64(1) || a["holds"] != int64(1) {
		t.Fatalf("LOCK.INFO: %#v", a)
	}
	if p := a["validity"].(int64); p <= 9000 || p > 10000 {
		t.Fatalf("validity %d", p)
	}
	ms := a["masters"].([]any)
	for i, m := range ms {
		f := fields(t, m)
		want := map[string]any{"master": int64(i), "token": "t1", "pttl": f["pttl"], "fence": int64(1), "holds": int64(1), "counter": int64(1), "voting": int64(1)}
		if fmt.Sprint(f) != fmt.Sprint(want) {
			t.Fatalf("master %d: %v, want %v", i, f, want)
		}
	}
	e.do("LOCK.RELEASE", key, "t1")
	v, _ = e.do("LOCK.INFO", key)
	a = fields(t, v)
	if a["token"] != nil || a["validity"] != int64(-2) {
		t.Fatalf("LOCK.INFO of a free key: %#v", a)
	}
	// Per master, an absent key's pttl is -2 and one without expiry -1,
	// as PTTL answers (not those codes read as milliseconds).
	e.seed(key, "t2", 0, 1)
	v, _ = e.do("LOCK.INFO", key)
	ms = fields(t, v)["masters"].([]any)
	if p0, p1 := fields(t, ms[0])["pttl"], fields(t, ms[1])["pttl"]; p0 != int64(-2) || p1 != int64(-1) {
		t.Fatalf("per-master pttl of an absent key %v, of a key without expiry %v; want -2, -1", p0, p1)
	}
}

func TestLockCmdArgErrors(t *testing.T) {
	e := newEnv(t, 3, func(c *proxy.Config) { c.Proxy.LockKeys = []string{"lock:*", "redlock-proxy:*"} })
	cases := []struct {
		args []any
		want string
	}{
		{[]any{"LOCK.ACQUIRE", "lock:a"}, "ERR wrong number of arguments for 'lock.acquire' command"},
		{[]any{"LOCK.ACQUIRE", "lock:a", "ten"}, "ERR value is not an integer or out of range"},
		{[]any{"LOCK.ACQUIRE", "lock:a", "0"}, "ERR invalid expire time in 'lock.acquire' command"},
		{[]any{"LOCK.ACQUIRE", "lock:a", "-5"}, "ERR invalid expire time in 'lock.acquire' command"},
		{[]any{"LOCK.ACQUIRE", "lock:a", "99999999999999999999"}, "ERR value is not an integer or out of range"},
		{[]any{"LOCK.ACQUIRE", "lock:a", "1000", "TOKEN"}, "ERR syntax error"},
		{[]any{"LOCK.ACQUIRE", "lock:a", "1000", "TOKEN", "a", "TOKEN", "b"}, "ERR syntax error"},
		{[]any{"LOCK.ACQUIRE", "lock:a", "1000", "TOKEN", ""}, "ERR redlock-proxy: TOKEN must not be empty"},
		{[]any{"LOCK.ACQUIRE", "lock:a", "1000", "NX"}, "ERR syntax error"},
		{[]any{"LOCK.ACQUIRE", "lock:a", "1000", "REENTRANT"}, "ERR redlock-proxy: REENTRANT needs TOKEN (the holder's own token)"},
		{[]any{"LOCK.ACQUIRE", "other", "1000"}, "ERR redlock-proxy: 'other' is not a lock key (proxy.lock_keys)"},
		{[]any{"LOCK.ACQUIRE", "redlock-proxy:fence:lock:a", "1000"}, "ERR redlock-proxy: keys beginning with 'redlock-proxy:' are reserved for the proxy's own records"},
		{[]any{"LOCK.RELEASE", "lock:a"}, "ERR wrong number of arguments for 'lock.release' command"},
		{[]any{"LOCK.RELEASE", "other", "t"}, "ERR redlock-proxy: 'other' is not a lock key (proxy.lock_keys)"},
		{[]any{"LOCK.EXTEND", "lock:a", "t"}, "ERR wrong number of arguments for 'lock.extend' command"},
		{[]any{"LOCK.EXTEND", "lock:a", "t", "x"}, "ERR value is not an integer or out of range"},
		{[]any{"LOCK.EXTEND", "lock:a", "t", "0"}, "ERR invalid expire time in 'lock.extend' command"},
		{[]any{"LOCK.INFO"}, "ERR wrong number of arguments for 'lock.info' command"},
		{[]any{"LOCK.INFO", "lock:a", "b"}, "ERR wrong number of arguments for 'lock.info' command"},
	}
	for _, c := range cases {
		_, err := e.do(c.args...)
		if err == nil || err.Error() != c.want {
			t.Errorf("%v: %v, want %q", c.args, err, c.want)
		}
	}
	for i, m := range e.masters {
		if n := userKeys(t, m); n != 0 {
			t.Errorf("master %d holds %d keys after refused commands", i, n)
		}
	}
}

func TestLockCmdReentrant(t *testing.T) {
	e := newEnv(t, 3, nil)
	gr := grantReader(t)
	key := e.key("k")
	_, f1, _, ok := gr(e.do("LOCK.ACQUIRE", key, 10000, "REENTRANT", "TOKEN", "t1"))
	_, f2, _, ok2 := gr(e.do("LOCK.ACQUIRE", key, 10000, "TOKEN", "t1", "REENTRANT"))
	if !ok || !ok2 || f1 != f2 {
		t.Fatalf("reentry: %v %v, fences %d %d", ok, ok2, f1, f2)
	}
	v, _ := e.do("LOCK.INFO", key)
	mustEqual(t, "holds", fields(t, v)["holds"], any(int64(2)))
	n, _ := e.do("LOCK.RELEASE", key, "t1")
	mustEqual(t, "first release", n, any(int64(1)))
	if _, _, _, ok := gr(e.do("LOCK.ACQUIRE", key, 10000, "TOKEN", "t2")); ok {
		t.Fatal("granted to another token while one hold is left")
	}
	e.do("LOCK.RELEASE", key, "t1")
	if _, f3, _, ok := gr(e.do("LOCK.ACQUIRE", key, 10000, "TOKEN", "t2")); !ok || f3 <= f2 {
		t.Fatalf("after the last release: %v, fence %d", ok, f3)
	}
}

func TestLockCmdNoQuorum(t *testing.T) {
	e := newEnv(t, 3, nil)
	e.masters[1].Kill()
	e.masters[2].Kill()
	for _, args := range [][]any{{"LOCK.ACQUIRE", e.key("k"), 1000}, {"LOCK.RELEASE", e.key("k"), "t"}, {"LOCK.EXTEND", e.key("k"), "t", 1000}, {"LOCK.INFO", e.key("k")}} {
		_, err := e.do(args...)
		if err == nil || !strings.HasPrefix(err.Error(), "NOQUORUM ") {
			t.Errorf("%v: %v, want NOQUORUM", args[0], err)
		}
	}
}

// Clients of two proxy processes compete for one key while one master is
// restarted empty; every grant's fencing number must exceed that of every
// grant answered before it was asked for. (Grants whose request and reply
// overlap in time may come in either order and are not compared.)
func TestFenceTwoProxiesMonotonic(t *testing.T) {
	ms := redistest.StartN(t, 3)
	time.Sleep(1100 * time.Millisecond) // the masters outlive the 1 s guard window
	proxies := []*redis.Client{startBinary(t, redistest.Addrs(ms), ""), startBinary(t, redistest.Addrs(ms), "")}
	type grant struct {
		sent, recv time.Time
		fence      int64
		phase      int
	}
	var mu sync.Mutex
	var grants []grant
	var phase int // 0 before the restart, 1 guarded, 2 after the guard
	refused := [3]map[string]int{{}, {}, {}}
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for w := 0; w < 8; w++ {
		wg.Add(1)
		go func(c *redis.Client) {
			defer wg.Done()
			ctx := context.Background()
			for {
				select {
				case <-stop:
					return
				default:
				}
				sent := time.Now()
				// The TTL equals the guard window, so the guard is not
				// stretched by longer grants.
				v, err := c.Do(ctx, "LOCK.ACQUIRE", "fenced", 1000).Result()
				recv := time.Now()
				mu.Lock()
				p := phase
				if err != nil {
					refused[p][err.Error()]++
				} else {
					grants = append(grants, grant{sent, recv, v.([]any)[1].(int64), p})
				}
				mu.Unlock()
				if err != nil {
					if !errors.Is(err, redis.Nil) && !strings.HasPrefix(err.Error(), "NOQUORUM") {
						t.Errorf("acquire: %v", err)
						return
					}
					time.Sleep(5 * time.Millisecond)
					continue
				}
				// A lock held on a bare quorum that includes the master that
				// restarts cannot be told released while it is guarded.
				if err := c.Do(ctx, "LOCK.RELEASE", "fenced", v.([]any)[0]).Err(); err != nil && !strings.HasPrefix(err.Error(), "NOQUORUM") {
					t.Errorf("release: %v", err)
					return
				}
			}
		}(proxies[w%2])
	}
	// Each phase lasts until it has seen grants (at most 20 s), and the
	// guarded one at least the guard window.
	run := func(p int, least time.Duration) {
		mu.Lock()
		phase = p
		mu.Unlock()
		start := time.Now()
		for {
			time.Sleep(100 * time.Millisecond)
			mu.Lock()
			n := 0
			for _, g := range grants {
				if g.phase == p {
					n++
				}
			}
			mu.Unlock()
			if n >= 50 && time.Since(start) >= least {
				return
			}
			if time.Since(start) > 20*time.Second {
				t.Errorf("phase %d: %d grants in 20 s", p, n)
				return
			}
		}
	}
	run(0, 0)
	ms[0].Restart()
	run(1, 1200*time.Millisecond)
	run(2, 0)
	close(stop)
	wg.Wait()
	// Sorted by request time, each grant must exceed every grant answered
	// before its request.
	byRecv := append([]grant(nil), grants...)
	sort.Slice(byRecv, func(i, j int) bool { return byRecv[i].recv.Before(byRecv[j].recv) })
	sort.Slice(grants, func(i, j int) bool { return grants[i].sent.Before(grants[j].sent) })
	seen := map[int64]bool{}
	per := [3]int{}
	var before int64 // the largest number answered before the current request
	k := 0
	for _, g := range grants {
		for ; k < len(byRecv) && byRecv[k].recv.Before(g.sent); k++ {
			before = max(before, byRecv[k].fence)
		}
		if g.fence <= before {
			t.Fatalf("a grant asked for after number %d was answered got %d", before, g.fence)
		}
		if seen[g.fence] {
			t.Fatalf("number %d granted twice", g.fence)
		}
		seen[g.fence] = true
		per[g.phase]++
	}
	t.Logf("%d grants (before the restart, guarded, after): %v; largest %d; refusals %v", len(grants), per, before, refused)
	// The restarted master caught up with the numbers.
	mc := ms[0].Client()
	defer mc.Close()
	eventually(t, "the restarted master's counter caught up", func() bool {
		n, _ := mc.Get(context.Background(), engine.FenceKeys("fenced")[1]).Int64()
		return n >= before
	})
}

// A key of another type, or a fencing counter that is not a number, gets
// the masters' own error, not NOQUORUM, and locks nothing.
func TestLockCmdMasterErrors(t *testing.T) {
	e := newEnv(t, 3, nil)
	key := e.key("k")
	for i, m := range e.masters {
		mc := m.Client()
		mc.Set(context.Background(), engine.FenceKeys(key)[1], "garbage", 0)
		if i < 2 {
			mc.HSet(context.Background(), e.key("h"), "f", "v")
		}
		mc.Close()
	}
	_, err := e.do("LOCK.ACQUIRE", key, 1000)
	mustEqual(t, "garbage counter", fmt.Sprint(err), "ERR redlock-proxy: the fencing counter of this key is not a number")
	_, err = e.do("LOCK.ACQUIRE", e.key("h"), 1000)
	if err == nil || !strings.HasPrefix(err.Error(), "WRONGTYPE") {
		t.Fatalf("a hash on two masters: %v, want WRONGTYPE", err)
	}
	v, err := e.do("LOCK.INFO", e.key("h"))
	if err == nil || !strings.HasPrefix(err.Error(), "WRONGTYPE") {
		t.Fatalf("LOCK.INFO: %v %v", v, err)
	}
	if n := count(e.onMasters(key), ""); n != 3 {
		t.Fatalf("%d masters hold the refused lock", 3-n)
	}
	mustEqual(t, "the free master's copy of the refused lock", e.onMasters(e.key("h"))[2], "")
}

// fields reads a reply of field-value pairs: a flat array of them in RESP2,
// a map in RESP3.
func fields(t *testing.T, v any) map[string]any {
	t.Helper()
	out := map[string]any{}
	switch x := v.(type) {
	case []any:
		if len(x)%2 != 0 {
			t.Fatalf("not field-value pairs: %#v", v)
		}
		for i := 0; i < len(x); i += 2 {
			out[fmt.Sprint(x[i])] = x[i+1]
		}
	case map[any]any:
		for k, val := range x {
			out[fmt.Sprint(k)] = val
		}
	default:
		t.Fatalf("not field-value pairs: %#v", v)
	}
	return out
}
