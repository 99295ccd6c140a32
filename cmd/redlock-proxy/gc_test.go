package main

import (
	"fmt"
	"os"
	"runtime"
	"runtime/debug"
	"runtime/metrics"
	"syscall"
	"testing"
	"time"

	"github.com/redlock-proxy/redlock-proxy/internal/redistest"
)

const mib = 1 << 20

func TestGCPercent(t *testing.T) {
	for _, c := range []struct {
		name                 string
		headroom, live, scan uint64
		want                 int
	}{
		{"off", 0, 1 * mib, 2 * mib, 100},
		{"nothing scanned yet", 16 * mib, 0, 0, 100},
		// GOGC 1067 would give the heap room for 16 MB past live, but
		// raise Go's least goal to 42 MB: 425 keeps that at 17 MB.
		{"small heap: the least goal binds", 16 * mib, 1 * mib, 3 * mib / 2, 425},
		{"medium heap: room for the headroom", 16 * mib, 8 * mib, 10 * mib, 160},
		{"large heap: Go's default", 16 * mib, 40 * mib, 100 * mib, 100},
	} {
		if got := gcPercent(c.headroom, c.live, c.scan); got != c.want {
			t.Errorf("%s: gcPercent(%d, %d, %d) = %d, want %d", c.name, c.headroom, c.live, c.scan, got, c.want)
		}
	}
}

// The tuner gives this process's own heap the headroom: the runtime's heap
// goal ends up at about live + headroom, not at Go's default.
func TestGCTunerSetsTheHeapGoal(t *testing.T) {
	if gcTunerOff() != "" {
		t.Skip(gcTunerOff())
	}
	t.Cleanup(func() { debug.SetGCPercent(100) })
	read := func() (goal, live uint64) {
		s := []metrics.Sample{{Name: "/gc/heap/goal:bytes"}, {Name: "/gc/heap/live:bytes"}}
		metrics.Read(s)
		return s[0].Value.Uint64(), s[1].Value.Uint64()
	}
	const headroom = 24 * mib
	g := newGCTuner(headroom)
	runtime.GC()
	p := g.tune()
	goal, live := read()
	if p <= 100 || goal < live+headroom*9/10 || goal > live+headroom*12/10 {
		t.Fatalf("headroom %d MiB: GOGC %d, heap goal %.1f MiB with %.1f MiB live; want about live + headroom", headroom/mib, p, float64(goal)/mib, float64(live)/mib)
	}
	g.headroom.Store(0)
	runtime.GC()
	p = g.tune()
	goal, live = read()
	if p != 100 || goal >= live+headroom/2 {
		t.Fatalf("headroom 0: GOGC %d, heap goal %.1f MiB with %.1f MiB live; want Go's default", p, float64(goal)/mib, float64(live)/mib)
	}
}

// proxy.gc_headroom applies at start and on SIGHUP; GOGC in the
// environment is kept instead.
func TestGCHeadroomAppliedAndReloaded(t *testing.T) {
	masters := redistest.StartN(t, 3)
	metricsAddr := fmt.Sprintf("127.0.0.1:%d", redistest.FreePort(t))
	body := func(listen, headroom string) string {
		return fmt.Sprintf("[proxy]\nlisten = %q\n%s[redlock]\nmasters = [%s]\nrestart_guard = false\n[metrics]\nlisten = %q\n[log]\nlevel = \"error\"\n",
			listen, headroom, redistest.Quote(redistest.Addrs(masters)), metricsAddr)
	}
	gogc := func() string {
		t.Helper()
		return metricValue(t, metricsAddr, "redlock_proxy_gc_percent")
	}
	waitFor := func(what string, ok func(string) bool) {
		t.Helper()
		deadline := time.Now().Add(5 * time.Second)
		for v := gogc(); !ok(v); v = gogc() {
			if time.Now().After(deadline) {
				t.Fatalf("%s: GOGC %s", what, v)
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
	above100 := func(v string) bool { var n int; fmt.Sscan(v, &n); return n > 100 }

	// The default, 16 MB: a fresh proxy's heap is a few MB at most.
	p := redistest.StartProxy(t, binary, func(l string) string { return body(l, "") }, redistest.WithEnv("GOGC="))
	waitFor("default headroom", above100)
	if err := os.WriteFile(p.Config, []byte(body(p.Addr, "gc_headroom = 0\n")), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Kill(p.Pid(), syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	waitFor("after SIGHUP with gc_headroom = 0", func(v string) bool { return v == "100" })
	p.Kill()

	redistest.StartProxy(t, binary, func(l string) string { return body(l, "gc_headroom = \"64mb\"\n") }, redistest.WithEnv("GOGC=150"))
	time.Sleep(1500 * time.Millisecond) // the tuner would have run by now
	waitFor("GOGC=150 in the environment", func(v string) bool { return v == "150" })
}
