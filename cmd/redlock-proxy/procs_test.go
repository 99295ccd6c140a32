package main

import (
	"fmt"
	"io"
	"net/http"
	"os"
	"runtime"
	"syscall"
	"testing"
	"time"

	"github.com/redlock-proxy/redlock-proxy/internal/redistest"
)

// proxy.procs sets the threads running Go code (GOMAXPROCS), at start and
// on SIGHUP; 0 gives Go's own choice back.
func TestProcsAppliedAndReloaded(t *testing.T) {
	masters := redistest.StartN(t, 3)
	metrics := fmt.Sprintf("127.0.0.1:%d", redistest.FreePort(t))
	body := func(listen string, procs int) string {
		return fmt.Sprintf("[proxy]\nlisten = %q\nprocs = %d\n[redlock]\nmasters = [%s]\nrestart_guard = false\n[metrics]\nlisten = %q\n[log]\nlevel = \"error\"\n",
			listen, procs, redistest.Quote(redistest.Addrs(masters)), metrics)
	}
	p := redistest.StartProxy(t, binary, func(listen string) string { return body(listen, 1) })
	procs := func() string {
		t.Helper()
		return metricValue(t, metrics, "redlock_proxy_procs")
	}
	if got := procs(); got != "1" {
		t.Fatalf("procs = 1 in the file: GOMAXPROCS %s", got)
	}
	reload := func(n int, want string) {
		t.Helper()
		if err := os.WriteFile(p.Config, []byte(body(p.Addr, n)), 0o644); err != nil {
			t.Fatal(err)
		}
		if err := syscall.Kill(p.Pid(), syscall.SIGHUP); err != nil {
			t.Fatal(err)
		}
		deadline := time.Now().Add(5 * time.Second)
		for procs() != want {
			if time.Now().After(deadline) {
				t.Fatalf("after SIGHUP with procs = %d: GOMAXPROCS %s, want %s", n, procs(), want)
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	reload(3, "3")
	// 0: Go's default, the same for the proxy as for this test process
	// (neither has a GOMAXPROCS variable).
	if os.Getenv("GOMAXPROCS") == "" {
		reload(0, fmt.Sprint(runtime.GOMAXPROCS(0)))
	}
}

// metricValue reads one unlabelled metric from the proxy's /metrics at addr.
func metricValue(t *testing.T, addr, name string) string {
	t.Helper()
	resp, err := http.Get("http://" + addr + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	v, ok := redistest.MetricValue(string(b), name)
	if !ok {
		t.Fatalf("/metrics has no %s", name)
	}
	return v
}
