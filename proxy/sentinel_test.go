package proxy_test

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/redlock-proxy/redlock-proxy/internal/redistest"
	"github.com/redlock-proxy/redlock-proxy/proxy"
)

func TestSentinelMasterConfig(t *testing.T) {
	cfg := func(backend string, masters ...string) proxy.Config {
		c := proxy.DefaultConfig()
		c.Proxy.Backend = backend
		c.Redlock.Masters = masters
		return c
	}
	group := "sentinel://10.0.0.1:26379,10.0.0.2:26379/locks-a"
	for _, c := range []proxy.Config{
		cfg("127.0.0.1:6379", group, "10.0.0.3:6379", "10.0.0.4:6379"),
		cfg("", "10.0.0.3:6379", group, "sentinel://u:p@10.0.0.5:26379/locks-b"),
		// The backend a Sentinel group (backend.Sentinel): its own, or
		// the first voter's.
		cfg(group, "10.0.0.3:6379"),
		cfg("", group, "10.0.0.3:6379", "10.0.0.4:6379"),
	} {
		if err := c.Validate(); err != nil {
			t.Errorf("%v: %v", c.Redlock.Masters, err)
		}
	}
	for _, tc := range []struct {
		cfg  proxy.Config
		want string
	}{
		{cfg("sentinel://10.0.0.1:26379", "10.0.0.3:6379"), "proxy.backend: \"sentinel://10.0.0.1:26379\" is not sentinel://"},
		{cfg("sentinel://u:hidden@10.0.0.1/x", "10.0.0.3:6379"), "proxy.backend: "},
		{cfg("b:1", "sentinel://10.0.0.1:26379"), "name is missing"},
		{cfg("b:1", "sentinel://10.0.0.1/x"), "not host:port"},
		{cfg("b:1", "sentinel:///x"), "no sentinel is given"},
		{cfg("b:1", "sentinel://u@h:1/x"), "need a password"},
		{cfg("b:1", "redis://h:1"), "neither host:port nor sentinel://"},
		{cfg("b:1", "sentinel://u:hidden@h:1/x", "sentinel://u:hidden@h:1/x"), "listed twice"},
	} {
		err := tc.cfg.Validate()
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%v: %v, want an error saying %q", tc.cfg.Redlock.Masters, err, tc.want)
		}
		if err != nil && strings.Contains(err.Error(), "hidden") {
			t.Errorf("the error shows a sentinel's password: %v", err)
		}
	}
	for in, want := range map[string][]string{
		"a:1,b:2":                    {"a:1", "b:2"},
		"sentinel://s1:1,s2:2/g,b:2": {"sentinel://s1:1,s2:2/g", "b:2"},
		"a:1,sentinel://s1:1/g,sentinel://u:p@s2:2,s3:3/h": {"a:1", "sentinel://s1:1/g", "sentinel://u:p@s2:2,s3:3/h"},
	} {
		if got := proxy.SplitMasters(in); !slices.Equal(got, want) {
			t.Errorf("SplitMasters(%q) = %q, want %q", in, got, want)
		}
	}
}

// TestSentinelVoterThroughFailover runs the proxy binary in front of a
// voter given as a Sentinel group and two plain masters: locks taken
// before a failover are released after it, new ones land on the promoted
// primary, and INFO, /status.json, /metrics and /readyz show the group.
func TestSentinelVoterThroughFailover(t *testing.T) {
	g := redistest.StartSentinels(t, "locks-p")
	plain := redistest.StartN(t, 2)
	backend := redistest.Start(t)
	metrics := fmt.Sprintf("127.0.0.1:%d", redistest.FreePort(t))
	masters := append([]string{g.URL()}, redistest.Addrs(plain)...)
	p := redistest.StartProxy(t, proxyBinary(t), func(listen string) string {
		return fmt.Sprintf("[proxy]\nlisten = %q\nbackend = %q\n[redlock]\nmasters = [%s]\nrestart_guard = false\nnode_timeout = \"200ms\"\n[metrics]\nlisten = %q\n[log]\nlevel = \"warn\"\n",
			listen, backend.Addr, redistest.Quote(masters), metrics)
	})
	c := p.Client()
	defer c.Close()
	ctx := context.Background()
	unlock := `if redis.call("get",KEYS[1]) == ARGV[1] then return redis.call("del",KEYS[1]) else return 0 end`
	on := func(s *redistest.Server, key string) bool {
		rc := s.Client()
		defer rc.Close()
		v, _ := rc.Get(ctx, key).Result()
		return v == "tok"
	}
	// A lock the sentinel group's voter took, on its primary.
	lockOnPrimary := func(prefix string, primary *redistest.Server) string {
		t.Helper()
		var key string
		i := 0
		within(t, 20*time.Second, "a lock on the primary "+primary.Addr, func() bool {
			i++
			key = fmt.Sprintf("%s-%d", prefix, i)
			ok, err := c.SetNX(ctx, key, "tok", 30*time.Second).Result()
			return err == nil && ok && on(primary, key)
		})
		return key
	}
	before := lockOnPrimary("before", g.Servers[0])
	old, next := g.Failover()
	within(t, 20*time.Second, "INFO shows the switch", func() bool {
		info, _ := c.Info(ctx, "redlock").Result()
		return strings.Contains(info, "sentinel_group=locks-p,primary="+next.Addr+",") && strings.Contains(info, "primary_switches=1")
	})
	after := lockOnPrimary("after", next)
	if on(old, after) && !on(next, after) {
		t.Fatalf("lock %s went to the old primary", after)
	}
	for _, k := range []string{before, after} {
		n, err := c.Eval(ctx, unlock, []string{k}, "tok").Int()
		if err != nil || n != 1 {
			t.Fatalf("unlock %s after the failover = %d, %v", k, n, err)
		}
		if on(next, k) {
			t.Fatalf("unlock %s left it on the new primary", k)
		}
	}
	if ok, err := c.SetNX(ctx, after, "other", 30*time.Second).Result(); err != nil || !ok {
		t.Fatalf("SET NX PX of a released lock = %v, %v", ok, err)
	}

	var st struct {
		Masters []struct {
			Addr     string `json:"addr"`
			Sentinel *struct {
				Group     string `json:"group"`
				Primary   string `json:"primary"`
				Reachable bool   `json:"sentinels_reachable"`
				Switches  int    `json:"primary_switches"`
			} `json:"sentinel"`
		} `json:"masters"`
	}
	_, body := httpGet(t, "http://"+metrics+"/status.json")
	if err := json.Unmarshal([]byte(body), &st); err != nil {
		t.Fatal(err)
	}
	if m := st.Masters[0]; m.Addr != g.URL() || m.Sentinel == nil || m.Sentinel.Group != "locks-p" || m.Sentinel.Primary != next.Addr || !m.Sentinel.Reachable || m.Sentinel.Switches != 1 {
		t.Fatalf("status.json: %s", body)
	}
	if st.Masters[1].Sentinel != nil {
		t.Fatalf("a plain master has a Sentinel group in status.json: %s", body)
	}
	_, body = httpGet(t, "http://"+metrics+"/metrics")
	for _, want := range []string{
		fmt.Sprintf(`redlock_proxy_master_primary_switches_total{master=%q} 1`, g.URL()),
		fmt.Sprintf(`redlock_proxy_master_sentinel_primary{group="locks-p",master=%q,primary=%q} 1`, g.URL(), next.Addr),
	} {
		if !strings.Contains(body, want) {
			t.Fatalf("/metrics lacks %s", want)
		}
	}

	// Sentinels gone: the voter keeps its primary and votes; /readyz
	// stays ready and says so.
	for _, s := range g.Sentinels {
		s.Kill()
	}
	within(t, 20*time.Second, "/readyz tells the sentinels are unreachable", func() bool {
		code, body := httpGet(t, "http://"+metrics+"/readyz")
		return code == 200 && strings.Contains(body, "no sentinel of group locks-p answers") && strings.Contains(body, next.Addr)
	})
	lockOnPrimary("without-sentinels", next)
	info, _ := c.Info(ctx, "redlock").Result()
	if !strings.Contains(info, "sentinels_reachable=0") {
		t.Fatalf("INFO does not say the sentinels are unreachable:\n%s", info)
	}
}

// within polls cond until it holds, failing the test after d: a failover
// takes seconds, longer on a loaded machine.
func within(t *testing.T, d time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not true after %s", what, d)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
