package proxy_test

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/redlock-proxy/redlock-proxy/proxy"
)

// /status.json reports the masters and the operations; / is the page; any
// other path is not found.
func TestStatusJSONAndPage(t *testing.T) {
	e := newEnv(t, 3, func(c *proxy.Config) { c.Metrics.Listen = "127.0.0.1:0" })
	base := "http://" + e.srv.MetricsAddr().String()
	key := e.key("k")
	must(e.do("SET", key, "t", "NX", "PX", 10000))
	must(e.do("EVAL", extendScript, 1, key, "t", 10000))
	must(e.do("EVAL", unlockSpellings[0], 1, key, "t"))
	resp, err := http.Get(base + "/status.json")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var st struct {
		Version string
		Ready   bool
		Quorum  int
		Voters  int
		Masters []struct{ Addr, State string }
		Ops     []struct {
			Op        string
			PerSecond float64 `json:"per_second"`
			Total     int
		} `json:"operations"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&st); err != nil {
		t.Fatal(err)
	}
	if st.Version != proxy.Version || !st.Ready || st.Quorum != 2 || st.Voters != 3 || len(st.Masters) != 3 {
		t.Fatalf("status: %+v", st)
	}
	for i, m := range st.Masters {
		if m.Addr != e.masters[i].Addr || m.State != "up" {
			t.Errorf("master %d: %+v", i, m)
		}
	}
	for i, op := range []string{"acquire", "release", "extend"} {
		if st.Ops[i].Op != op || st.Ops[i].Total != 1 || st.Ops[i].PerSecond <= 0 {
			t.Errorf("%s: %+v", op, st.Ops[i])
		}
	}
	code, body := httpGet(t, base+"/")
	if code != 200 || !strings.Contains(body, `data-master="`+e.masters[0].Addr+`"`) {
		t.Fatalf("/: %d\n%s", code, body)
	}
	if code, _ := httpGet(t, base+"/nothing-here"); code != 404 {
		t.Fatalf("/nothing-here: %d", code)
	}
}
