package main

import (
	"math"
	"os"
	"strings"
	"testing"
	"time"
)

// These tests cover the parsing and statistics only; they start no
// servers. The benchmark itself runs with `go run ./bench`.

func TestParseRedisBenchmarkCSV(t *testing.T) {
	out := "WARNING: Could not fetch server CONFIG\n" +
		`"test","rps","avg_latency_ms","min_latency_ms","p50_latency_ms","p95_latency_ms","p99_latency_ms","max_latency_ms"` + "\n" +
		`"SET","312500.00","2.170","0.344","1.399","5.415","7.159","7.607"` + "\n" +
		`"GET","198019.80","2.631","0.288","1.039","7.287","22.335","22.479"` + "\n"
	res, err := parseRedisBenchmarkCSV(out)
	if err != nil {
		t.Fatal(err)
	}
	if res["SET"].rps != 312500 || res["GET"].p99ms != 22.335 || res["SET"].avgms != 2.17 {
		t.Fatalf("parsed %+v", res)
	}
	if _, err := parseRedisBenchmarkCSV("Error from server: ERR\n"); err == nil {
		t.Fatal("no error for output without results")
	}
}

func TestMedianQuantile(t *testing.T) {
	if m := median([]float64{3, 1, 2}); m != 2 {
		t.Fatalf("median = %v", m)
	}
	if m := median([]float64{4, 1, 2, 3}); m != 2.5 {
		t.Fatalf("median = %v", m)
	}
	var d []time.Duration
	for i := 1; i <= 100; i++ {
		d = append(d, time.Duration(i))
	}
	if q := quantile(d, 0.99); q != 99 {
		t.Fatalf("p99 = %v", q)
	}
	if q := quantile(d[:1], 0.99); q != 1 {
		t.Fatalf("p99 of one = %v", q)
	}
}

func TestRatioTargets(t *testing.T) {
	r := &results{vals: map[string][]float64{"a": {2, 4, 6}, "b": {1, 2, 3}}}
	if v := ratioOf(r, "a", "b"); v != 2 {
		t.Fatalf("ratio = %v", v)
	}
	if v := ratioOf(r, "a", "missing"); !math.IsNaN(v) {
		t.Fatalf("ratio with a missing side = %v", v)
	}
	if got := (row{target: "≥ 2×", min: 2, ratio: 1.9}).verdict(); got != "≥ 2× (not met)" {
		t.Fatal(got)
	}
	if got := (row{target: "≤ 100 MB", maxAbsolute: 100, absolute: 40}).verdict(); got != "≤ 100 MB (met)" {
		t.Fatal(got)
	}
}

func TestCPUTimeOfThisProcess(t *testing.T) {
	before, err := cpuTime(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	x := 0
	for start := time.Now(); time.Since(start) < 100*time.Millisecond; {
		x++
	}
	after, err := cpuTime(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	if after <= before {
		t.Fatalf("CPU time did not grow after 100 ms of work (%d loops): %v then %v", x, before, after)
	}
}

func TestBudgetIsWhatTheOthersLeave(t *testing.T) {
	r := &results{vals: map[string][]float64{
		"acq.single.rps": {40000}, "acq.single.cpu": {10},
		"acq.proxy.rps": {16000}, "acq.proxy.cpu": {25},
		"acq.proxy.gen": {14}, "acq.proxy.servers": {15}, "acq.proxy.machine": {100},
	}}
	bs := budgets(options{rows: map[string]bool{"3": true}}, r, 2)
	if len(bs) != 1 {
		t.Fatalf("budgets: %+v", bs)
	}
	b := bs[0]
	// 0.5 × 40,000/s: 2 CPUs give 100 µs per acquire, of which 29 are taken.
	if b.need != 20000 || b.gen != 14 || b.srv != 15 || b.proxy != 25 || b.redis != 10 {
		t.Fatalf("budget %+v", b)
	}
	if b.busy != 0.8 { // 100 µs per acquire at 16,000/s on 2 CPUs
		t.Fatalf("busy = %v", b.busy)
	}
	// Measured per repetition, the busy share is taken as it is.
	r.vals["acq.proxy.busy"] = []float64{0.9, 0.85, 0.95}
	if b := budgets(options{rows: map[string]bool{"3": true}}, r, 2)[0]; b.busy != 0.9 {
		t.Fatalf("busy = %v with key.busy measured 0.9, 0.85, 0.95", b.busy)
	}
	var out strings.Builder
	writeBudgets(&out, bs, 2)
	if !strings.Contains(out.String(), "| 20,000/s | 100.0 µs | 14.0 µs | 15.0 µs | 71.0 µs | 25.0 µs | 10.0 µs | 80% |") {
		t.Fatalf("table:\n%s", out.String())
	}
	if v := bothTests(&results{vals: map[string][]float64{"x.SET": {100}, "x.GET": {300}}}, "x"); v != 150 {
		t.Fatalf("SET at 100/s and GET at 300/s, as many of each: %v/s", v)
	}
}

// The row comparing the proxy's CPU with 5 and 3 masters is printed only
// when both were measured.
func TestReportCPURowNeedsBothMasterCounts(t *testing.T) {
	const cpuRow = "1/2. proxy CPU"
	for _, tc := range []struct {
		rows string
		vals map[string][]float64
		want bool
	}{
		{"1", map[string][]float64{"rs.p3.rate": {100}, "rs.m3.rate": {50}, "rs.p3.cpu": {20}}, false},
		{"1,2", map[string][]float64{"rs.p3.rate": {100}, "rs.p5.rate": {80}, "rs.p3.cpu": {20}, "rs.p5.cpu": {25}}, true},
	} {
		o := options{rows: map[string]bool{}}
		for _, k := range strings.Split(tc.rows, ",") {
			o.rows[k] = true
		}
		var out strings.Builder
		report(&out, o, &results{vals: tc.vals}, machine{cpus: 2}, time.Now())
		if got := strings.Contains(out.String(), cpuRow); got != tc.want {
			t.Errorf("rows %s: %q row printed: %v, want %v\n%s", tc.rows, cpuRow, got, tc.want, out.String())
		}
	}
}

func TestSystemTimeOfThisProcess(t *testing.T) {
	_, sys0, err := cpuTimes(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	f, err := os.OpenFile(os.DevNull, os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	b := make([]byte, 1)
	n := 0
	for start := time.Now(); time.Since(start) < 200*time.Millisecond; n++ {
		_, _ = f.Write(b) // a system call each
	}
	_, sys1, err := cpuTimes(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	if sys1 <= sys0 {
		t.Fatalf("system time did not grow after 200 ms of writes (%d): %v then %v", n, sys0, sys1)
	}
}

func TestWindowBoundLeavesOutTheProxysOwnCode(t *testing.T) {
	r := &results{vals: map[string][]float64{}}
	r.recordWindow("rs.p3", window{gen: 30, servers: 12, proxy: 28, proxySys: 18, serversSys: 4, pairs: 1000})
	if got := r.med("rs.p3.win.floor"); got != 30+12+18 {
		t.Fatalf("bound = %v, want clients + servers + the proxy's system time = 60", got)
	}
	if got := r.med("rs.p3.win.sum"); got != 30+12+28 {
		t.Fatalf("sum = %v, want 70", got)
	}
}

func TestSlotRangesCoverEverySlotOnce(t *testing.T) {
	for n := 1; n <= 5; n++ {
		rs := slotRanges(n)
		if len(rs) != n || rs[0][0] != 0 || rs[n-1][1] != clusterSlots-1 {
			t.Fatalf("%d shards: %v", n, rs)
		}
		for i := 1; i < n; i++ {
			if rs[i][0] != rs[i-1][1]+1 || rs[i][1] < rs[i][0] {
				t.Fatalf("%d shards: %v", n, rs)
			}
		}
	}
	if s := clusterSeed([]*proc{{addr: "127.0.0.1:1"}, {addr: "127.0.0.1:2"}}); s != "cluster://127.0.0.1:1,127.0.0.1:2/" {
		t.Fatalf("seed %q", s)
	}
}
