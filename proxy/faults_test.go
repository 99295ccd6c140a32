package proxy_test

import (
	"strings"
	"testing"
	"time"

	"github.com/redlock-proxy/redlock-proxy/proxy"
)

// A stalled master (SIGSTOP) does not hold up a grant the others can make:
// with a 3 s node timeout, the grant comes long before the timeout.
func TestStalledMasterDoesNotDelayGrant(t *testing.T) {
	e := newEnv(t, 3, func(c *proxy.Config) {
		c.Redlock.NodeTimeout = proxy.Duration{Duration: 3 * time.Second}
	})
	must(e.do("PING"))
	e.masters[2].Stop()
	defer e.masters[2].Cont()
	start := time.Now()
	mustEqual(t, "acquire with a stalled master", must(e.do("SET", e.key("k"), "t", "NX", "PX", 10000)), any("OK"))
	if d := time.Since(start); d >= 1500*time.Millisecond {
		t.Fatalf("the grant waited %s for the stalled master (node timeout 3s)", d)
	}
}

// A master that keeps timing out is marked down, so that calls stop waiting
// on it, and is taken back once it answers again.
func TestStalledMasterMarkedDown(t *testing.T) {
	e := newEnv(t, 3, func(c *proxy.Config) {
		c.Redlock.NodeTimeout = proxy.Duration{Duration: 300 * time.Millisecond}
	})
	e.masters[1].Stop()
	defer e.masters[1].Cont()
	for i := 0; i < 5; i++ {
		key := e.key(string(rune('a' + i)))
		mustEqual(t, "acquire with a stalled master", must(e.do("SET", key, "t", "NX", "PX", 10000)), any("OK"))
		must(e.do("GET", key))
	}
	eventually(t, "stalled master marked down", func() bool {
		return strings.Contains(must(e.do("INFO", "redlock")).(string), "master1:state=down")
	})
	start := time.Now()
	for i := 0; i < 5; i++ {
		must(e.do("GET", e.key("a")))
	}
	if d := time.Since(start); d >= 1500*time.Millisecond {
		t.Fatalf("5 reads with the master marked down took %s (5 × the 300 ms timeout): calls still wait on it", d)
	}
	e.masters[1].Cont()
	eventually(t, "master back up", func() bool {
		return strings.Contains(must(e.do("INFO", "redlock")).(string), "master1:state=up")
	})
}

// With two of three masters stalled, lock commands are refused with a clear
// error, quickly once they are marked down.
func TestTwoStalledMastersRefuseQuickly(t *testing.T) {
	e := newEnv(t, 3, nil)
	e.masters[0].Stop()
	e.masters[2].Stop()
	defer e.masters[0].Cont()
	defer e.masters[2].Cont()
	var last time.Duration
	for i := 0; i < 6; i++ {
		start := time.Now()
		_, err := e.do("SET", e.key("k"), "t", "NX", "PX", 10000)
		last = time.Since(start)
		if err == nil || !strings.HasPrefix(err.Error(), "NOQUORUM") {
			t.Fatalf("attempt %d: %v, want NOQUORUM", i, err)
		}
	}
	// Marked down, the masters are no longer waited for: far under the
	// 200 ms node timeout (a generous bound; the refusal takes microseconds).
	if last >= 150*time.Millisecond {
		t.Fatalf("refusal with both masters marked down took %s", last)
	}
}
