package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/redlock-proxy/redlock-proxy/internal/redistest"
)

// The status page, rendered by headless Chromium from the real binary in
// front of real masters of a new deployment (-init-masters): two durable
// masters that vote, one fresh master that does not persist its writes,
// held back by the restart guard, then one durable master killed.
// REDLOCK_PROXY_SCREENSHOT=dir also saves screenshots of both states there.
// With one master guarded, the two others must both answer every lock
// operation: the node timeout is long enough for a loaded machine (the
// default 100 ms was not, seen in CI with the race-built suites running
// beside it).
func TestStatusPageInChromium(t *testing.T) {
	redistest.RequireChromium(t)
	durable := []string{"--appendonly", "yes", "--appendfsync", "always"}
	masters := []*redistest.Server{redistest.Start(t, durable...), redistest.Start(t, durable...), redistest.Start(t)}
	port, mport := redistest.FreePort(t), redistest.FreePort(t)
	cfg := writeConfig(t, fmt.Sprintf(`
[proxy]
listen = "127.0.0.1:%d"
[redlock]
masters = ["%s"]
restart_guard_window = "60s"
node_timeout = "500ms"
[metrics]
listen = "127.0.0.1:%d"
[log]
format = "json"
`, port, strings.Join(redistest.Addrs(masters), `", "`), mport))
	if out, err := exec.Command(binary, "-config", cfg, "-init-masters").CombinedOutput(); err != nil {
		t.Fatalf("-init-masters: %v\n%s", err, out)
	}
	startBinary(t, cfg)
	base := fmt.Sprintf("http://127.0.0.1:%d", mport)
	waitHTTP(t, base+"/readyz", 200)

	c := redis.NewClient(&redis.Options{Addr: fmt.Sprintf("127.0.0.1:%d", port), MaxRetries: -1})
	defer c.Close()
	ctx := context.Background()
	for i := 0; i < 20; i++ {
		if ok, err := c.SetNX(ctx, fmt.Sprintf("status:%d", i), "tok", 10*time.Second).Result(); !ok || err != nil {
			t.Fatalf("acquire %d: %v %v", i, ok, err)
		}
	}
	if ok, _ := c.SetNX(ctx, "status:0", "other", 10*time.Second).Result(); ok {
		t.Fatal("a held lock was granted again")
	}
	for i := 0; i < 5; i++ {
		if n, err := c.Eval(ctx, extendScript, []string{fmt.Sprintf("status:%d", i)}, "tok", 10000).Int(); n != 1 || err != nil {
			t.Fatalf("extend %d: %v %v", i, n, err)
		}
	}
	for i := 0; i < 10; i++ {
		if n, err := c.Eval(ctx, unlockScript, []string{fmt.Sprintf("status:%d", i)}, "tok").Int(); n != 1 || err != nil {
			t.Fatalf("release %d: %v %v", i, n, err)
		}
	}

	// Traffic goes on while the page is read, so that the rates over the
	// last seconds stay above zero however long Chromium takes to start.
	tctx, stop := context.WithCancel(ctx)
	t.Cleanup(stop)
	go traffic(tctx, fmt.Sprintf("127.0.0.1:%d", port))

	dom := redistest.Chromium(t, base+"/", "--dump-dom")
	screenshot(t, base, "status-up.png")
	rows := masterRows(t, dom)
	for i, want := range []string{"up", "up", "guarded"} {
		if got := rows[masters[i].Addr]; !strings.Contains(got, `data-state="`+want+`"`) {
			t.Errorf("master %d (%s): want state %s, row: %s", i, masters[i].Addr, want, got)
		}
	}
	if r := rows[masters[0].Addr]; !strings.Contains(r, ">yes") {
		t.Errorf("durable master not shown durable: %s", r)
	}
	if r := rows[masters[2].Addr]; !regexp.MustCompile(`<td class="num">(1m0s|[1-5]?[0-9]s)</td>`).MatchString(r) {
		t.Errorf("guarded master shows no guard time left: %s", r)
	}
	for _, k := range []string{"acquire/granted", "acquire/held_elsewhere", "release/done", "extend/done", "acquire"} {
		if v := rateIn(t, dom, k); v <= 0 {
			t.Errorf("rate %s = %v, want > 0", k, v)
		}
	}
	if !regexp.MustCompile(`id="clients">[1-9]`).MatchString(dom) {
		t.Error("page shows no client connection")
	}
	for _, want := range []string{`id="ready">ready<`, `id="voters">2<`, `id="quorum">2<`, "version " + versionOf(t)} {
		if !strings.Contains(dom, want) {
			t.Errorf("page lacks %q", want)
		}
	}

	// A master goes away: calls to it fail and the page shows it down.
	masters[1].Kill()
	deadline := time.Now().Add(10 * time.Second)
	for statusOf(t, base, masters[1].Addr) != "down" {
		if time.Now().After(deadline) {
			t.Fatal("status.json never showed the killed master down")
		}
		_ = c.SetNX(ctx, "status:down", "tok", time.Second).Err()
		time.Sleep(50 * time.Millisecond)
	}
	// This time the page refreshes itself (its script fetches it again)
	// before the DOM is read.
	dom = redistest.Chromium(t, base+"/", "--dump-dom", "--virtual-time-budget=5000")
	screenshot(t, base, "status-down.png")
	if !regexp.MustCompile(`<body data-refreshes="[1-9]`).MatchString(dom) {
		t.Error("the page did not refresh itself")
	}
	rows = masterRows(t, dom)
	if r := rows[masters[1].Addr]; !strings.Contains(r, `data-state="down"`) || !regexp.MustCompile(`<td class="err">[^<]+</td>`).MatchString(r) {
		t.Errorf("killed master: want down with its error, row: %s", r)
	}
	if r := rows[masters[0].Addr]; !strings.Contains(r, `data-state="up"`) {
		t.Errorf("master 0 no longer up: %s", r)
	}
	if !strings.Contains(dom, `id="ready">NOT READY<`) || !strings.Contains(dom, `id="voters">1<`) {
		t.Error("page does not say the lock service lost its quorum")
	}
	if v := rateIn(t, dom, "acquire/no_quorum"); v <= 0 {
		t.Errorf("rate acquire/no_quorum = %v, want > 0", v)
	}
}

const (
	unlockScript = `if redis.call("get",KEYS[1]) == ARGV[1] then return redis.call("del",KEYS[1]) else return 0 end`
	extendScript = `if redis.call("get", KEYS[1]) == ARGV[1] then return redis.call("pexpire", KEYS[1], ARGV[2]) else return 0 end`
)

// traffic acquires, fails to acquire, extends and releases a lock every
// 50 ms until ctx ends.
func traffic(ctx context.Context, addr string) {
	c := redis.NewClient(&redis.Options{Addr: addr, MaxRetries: -1})
	defer c.Close()
	for i := 0; ctx.Err() == nil; i++ {
		key := fmt.Sprintf("status:traffic:%d", i)
		_ = c.SetNX(ctx, key, "tok", 10*time.Second).Err()
		_ = c.SetNX(ctx, key, "other", 10*time.Second).Err()
		_ = c.Eval(ctx, extendScript, []string{key}, "tok", 10000).Err()
		_ = c.Eval(ctx, unlockScript, []string{key}, "tok").Err()
		select {
		case <-ctx.Done():
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// startBinary runs the proxy with a config file until the test ends.
func startBinary(t *testing.T, cfg string) *exec.Cmd {
	t.Helper()
	cmd := exec.Command(binary, "-config", cfg)
	cmd.Stderr = io.Discard
	if testing.Verbose() {
		cmd.Stderr = os.Stderr
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	return cmd
}

// waitHTTP polls url until it answers with status code.
func waitHTTP(t *testing.T, url string, code int) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		resp, err := http.Get(url)
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == code {
				return
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s did not answer %d (last: %v)", url, code, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// masterRows maps each master's address to its table row in the DOM.
func masterRows(t *testing.T, dom string) map[string]string {
	t.Helper()
	rows := map[string]string{}
	for _, m := range regexp.MustCompile(`(?s)<tr data-master="([^"]+)".*?</tr>`).FindAllStringSubmatch(dom, -1) {
		rows[m[1]] = m[0]
	}
	if len(rows) == 0 {
		t.Fatalf("no master rows in the page:\n%s", dom)
	}
	return rows
}

// rateIn reads the rate shown for "op/outcome" (or "op") in the DOM.
func rateIn(t *testing.T, dom, key string) float64 {
	t.Helper()
	m := regexp.MustCompile(`data-rate="` + regexp.QuoteMeta(key) + `">([0-9.]+)<`).FindStringSubmatch(dom)
	if m == nil {
		t.Fatalf("no rate %s in the page", key)
	}
	v, _ := strconv.ParseFloat(m[1], 64)
	return v
}

// statusOf reads one master's state from /status.json.
func statusOf(t *testing.T, base, addr string) string {
	t.Helper()
	resp, err := http.Get(base + "/status.json")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var st struct {
		Masters []struct{ Addr, State string }
	}
	if err := json.NewDecoder(resp.Body).Decode(&st); err != nil {
		t.Fatal(err)
	}
	for _, m := range st.Masters {
		if m.Addr == addr {
			return m.State
		}
	}
	return ""
}

func versionOf(t *testing.T) string {
	out, err := exec.Command(binary, "-version").Output()
	if err != nil {
		t.Fatal(err)
	}
	return strings.TrimPrefix(strings.TrimSpace(string(out)), "redlock-proxy ")
}

func screenshot(t *testing.T, base, name string) {
	dir := os.Getenv("REDLOCK_PROXY_SCREENSHOT")
	if dir == "" {
		return
	}
	redistest.Chromium(t, base+"/", "--screenshot="+dir+"/"+name, "--window-size=1200,900", "--hide-scrollbars")
}
