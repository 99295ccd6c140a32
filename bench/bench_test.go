package main

import (
	"math"
	"os"
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
