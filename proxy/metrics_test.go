package proxy_test

import (
	"encoding/json"
	"io"
	"net/http"
	"os"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redlock-proxy/redlock-proxy/internal/redistest"
	"github.com/redlock-proxy/redlock-proxy/proxy"
)

func httpGet(t *testing.T, url string) (int, string) {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

func TestMetricsAndHealth(t *testing.T) {
	own := ownBackend(t)
	e := newEnv(t, 3, func(c *proxy.Config) { c.Metrics.Listen, c.Proxy.Backend = "127.0.0.1:0", own })
	base := "http://" + e.srv.MetricsAddr().String()
	key := e.key("k")
	must(e.do("SET", key, "t", "NX", "PX", 10000))
	must(e.do("SET", key, "u", "NX", "PX", 10000))
	must(e.do("EVAL", unlockSpellings[0], 1, key, "t"))
	must(e.do("INCR", e.key("n")))
	code, body := httpGet(t, base+"/metrics")
	mustEqual(t, "/metrics status", code, 200)
	for _, want := range []string{
		`redlock_proxy_acquires_total{outcome="granted"} 1`,
		`redlock_proxy_acquires_total{outcome="held_elsewhere"} 1`,
		`redlock_proxy_releases_total{outcome="done"} 1`,
		`redlock_proxy_passthrough_commands_total 1`,
		`redlock_proxy_master_up{master="` + e.masters[0].Addr + `"} 1`,
		`redlock_proxy_master_restart_guarded{master="` + e.masters[2].Addr + `"} 0`,
		`redlock_proxy_master_rollback_failures_total{master="` + e.masters[1].Addr + `"} 0`,
		`redlock_proxy_operation_duration_seconds_count{op="acquire"} 2`,
		`redlock_proxy_voters 3`,
	} {
		if !strings.Contains(body, want) {
			t.Errorf("/metrics lacks %s", want)
		}
	}
	// Each master took the two acquires and the release (with the undo of
	// the refused acquire, if any), in at most as many pipelines.
	for _, m := range e.masters {
		cmds := metricOf(t, body, `redlock_proxy_master_commands_total{master="`+m.Addr+`"}`)
		pipes := metricOf(t, body, `redlock_proxy_master_pipelines_total{master="`+m.Addr+`"}`)
		if cmds < 3 || pipes < 1 || pipes > cmds {
			t.Errorf("master %s: %v commands in %v pipelines", m.Addr, cmds, pipes)
		}
	}
	code, _ = httpGet(t, base+"/healthz")
	mustEqual(t, "/healthz", code, 200)
	code, _ = httpGet(t, base+"/readyz")
	mustEqual(t, "/readyz with every master up", code, 200)

	e.masters[0].Kill()
	e.masters[1].Kill()
	for i := 0; i < 4; i++ {
		_, _ = e.do("SET", e.key("x"), "t", "NX", "PX", 1000)
	}
	code, _ = httpGet(t, base+"/readyz")
	mustEqual(t, "/readyz with two of three masters down", code, 503)
	code, _ = httpGet(t, base+"/healthz")
	mustEqual(t, "/healthz still alive", code, 200)
	_, body = httpGet(t, base+"/metrics")
	if !strings.Contains(body, `redlock_proxy_acquires_total{outcome="no_quorum"}`) {
		t.Error("/metrics does not count acquires refused for want of a quorum")
	}
}

// Every metric the Grafana dashboard queries is one the proxy exports, with
// plain masters or with a voter given as a Sentinel group.
func TestGrafanaDashboardUsesExportedMetrics(t *testing.T) {
	raw, err := os.ReadFile("../deploy/grafana/redlock-proxy.json")
	if err != nil {
		t.Fatal(err)
	}
	var d struct {
		Panels []struct {
			Title   string
			Targets []struct{ Expr string }
		}
	}
	if err := json.Unmarshal(raw, &d); err != nil {
		t.Fatalf("dashboard is not JSON: %v", err)
	}
	e := newEnv(t, 3, func(c *proxy.Config) { c.Metrics.Listen = "127.0.0.1:0" })
	must(e.do("SET", e.key("k"), "t", "NX", "PX", 1000))
	must(e.do("EVAL", unlockSpellings[0], 1, e.key("k"), "t"))
	must(e.do("EVAL", extendScript, 1, e.key("k"), "t", 1000))
	_, body := httpGet(t, "http://"+e.srv.MetricsAddr().String()+"/metrics")
	// The series of a voter given as a Sentinel group, from a second proxy
	// whose first voter is one.
	g := redistest.StartSentinels(t, "dash")
	backend := redistest.Start(t)
	es := newEnv(t, 3, func(c *proxy.Config) {
		c.Metrics.Listen = "127.0.0.1:0"
		c.Redlock.Masters[0] = g.URL()
		c.Proxy.Backend = backend.Addr
	})
	var sentinelBody string
	within(t, 20*time.Second, "/metrics shows the Sentinel group", func() bool {
		_, sentinelBody = httpGet(t, "http://"+es.srv.MetricsAddr().String()+"/metrics")
		return strings.Contains(sentinelBody, "redlock_proxy_master_sentinel_primary{")
	})
	name := regexp.MustCompile(`redlock_proxy_[A-Za-z0-9_]+`)
	exported := func(m string) bool { // a series of exactly that name
		for _, b := range []string{body, sentinelBody} {
			for _, after := range []string{"{", " "} {
				if strings.Contains(b, "\n"+m+after) || strings.HasPrefix(b, m+after) {
					return true
				}
			}
		}
		return false
	}
	used := 0
	for _, p := range d.Panels {
		for _, q := range p.Targets {
			for _, m := range name.FindAllString(q.Expr, -1) {
				used++
				if !exported(m) {
					t.Errorf("panel %q queries %s, which /metrics does not export", p.Title, m)
				}
			}
		}
	}
	if used < 10 {
		t.Fatalf("only %d metric references found in the dashboard", used)
	}
}

// metricOf reads the value of one series from a /metrics body.
func metricOf(t *testing.T, body, series string) float64 {
	t.Helper()
	v, ok := redistest.MetricValue(body, series)
	if !ok {
		t.Fatalf("/metrics lacks %s", series)
	}
	f, err := strconv.ParseFloat(v, 64)
	if err != nil {
		t.Fatalf("%s %s: %v", series, v, err)
	}
	return f
}
