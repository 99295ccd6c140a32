package proxy_test

import (
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redlock-proxy/redlock-proxy/internal/redistest"
	"github.com/redlock-proxy/redlock-proxy/proxy"
)

// Two proxies in front of the same masters, one of which treats fewer keys
// as lock keys, are two lock services: each sees the other's settings on
// the masters and says so (INFO other_settings, the
// redlock_proxy_other_settings metric, the log). Two that agree see none.
func TestProxiesWithOtherSettingsAreDetected(t *testing.T) {
	e := newEnv(t, 3, func(c *proxy.Config) { c.Redlock.ClockCheck = proxy.Duration{Duration: 100 * time.Millisecond} })
	cfg := proxy.DefaultConfig()
	cfg.Proxy.Listen = "127.0.0.1:0"
	cfg.Redlock.Masters = redistest.Addrs(e.masters)
	cfg.Redlock.RestartGuard = false
	cfg.Redlock.ClockCheck = proxy.Duration{Duration: 100 * time.Millisecond}
	same := &env{t: t, masters: e.masters}
	same.startProxy(cfg)
	time.Sleep(500 * time.Millisecond)
	mustEqual(t, "proxies that agree see no other settings", infoField(t, e, "other_settings"), "0")
	mustEqual(t, "on either side", infoField(t, same, "other_settings"), "0")

	cfg.Proxy.LockKeys = []string{"lock:*"}
	other := &env{t: t, masters: e.masters}
	other.startProxy(cfg)
	eventually(t, "each sees the other", func() bool {
		return infoField(t, e, "other_settings") == "1" && infoField(t, other, "other_settings") == "1"
	})
	if s := infoField(t, e, "other_settings0"); !strings.Contains(s, "lock_keys=lock:*") {
		t.Fatalf("the other proxy's settings: %q", s)
	}
	n, err := strconv.Atoi(infoField(t, other, "other_settings"))
	if err != nil || n != 1 {
		t.Fatalf("other_settings %d %v", n, err)
	}
}
