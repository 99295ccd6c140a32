package main

import (
	"bytes"
	"context"
	"encoding/csv"
	"errors"
	"fmt"
	"os/exec"
	"strconv"
	"strings"
	"time"
)

// rbResult is one test of one redis-benchmark run.
type rbResult struct {
	rps    float64
	p99ms  float64
	avgms  float64
	nTotal int
}

// runRedisBenchmark runs redis-benchmark against addr with the given
// arguments (plus -h, -p, -n and --csv) and returns its results by test
// name ("SET", "GET", or the command line for a custom command), and the
// CPU time redis-benchmark itself used. An error reply from the server makes
// redis-benchmark stop; that is an error here.
func runRedisBenchmark(addr string, n int, timeout time.Duration, args ...string) (res map[string]rbResult, line string, cpu time.Duration, err error) {
	host, port, _ := strings.Cut(addr, ":")
	argv := append([]string{"-h", host, "-p", port, "-n", strconv.Itoa(n), "--csv"}, args...)
	line = "redis-benchmark " + shellJoin(argv)
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, "redis-benchmark", argv...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout = &stdout
	cmd.Stderr = &stderr
	err = cmd.Run()
	if cmd.ProcessState != nil {
		cpu = cmd.ProcessState.UserTime() + cmd.ProcessState.SystemTime()
	}
	out := stdout.String()
	if ctx.Err() != nil {
		return nil, line, cpu, fmt.Errorf("%s: did not finish within %v; output: %s %s", line, timeout, clip(out), clip(stderr.String()))
	}
	if i := strings.Index(out+stderr.String(), "Error from server"); i >= 0 {
		all := out + stderr.String()
		msg, _, _ := strings.Cut(all[i:], "\n")
		return nil, line, cpu, fmt.Errorf("%s: %s", line, msg)
	}
	if err != nil {
		return nil, line, cpu, fmt.Errorf("%s: %v; output: %s %s", line, err, clip(out), clip(stderr.String()))
	}
	res, perr := parseRedisBenchmarkCSV(out)
	if perr != nil {
		return nil, line, cpu, fmt.Errorf("%s: %v; output: %s", line, perr, clip(out))
	}
	for k, r := range res {
		r.nTotal = n
		res[k] = r
	}
	return res, line, cpu, nil
}

// parseRedisBenchmarkCSV reads redis-benchmark --csv output (Redis 7:
// "test","rps","avg_latency_ms",…,"p99_latency_ms",…). Warnings on other
// lines are skipped.
func parseRedisBenchmarkCSV(out string) (map[string]rbResult, error) {
	var header []string
	res := map[string]rbResult{}
	for _, l := range strings.Split(out, "\n") {
		l = strings.TrimSpace(l)
		if !strings.HasPrefix(l, `"`) {
			continue
		}
		rec, err := csv.NewReader(strings.NewReader(l)).Read()
		if err != nil {
			continue
		}
		if rec[0] == "test" {
			header = rec
			continue
		}
		if header == nil || len(rec) != len(header) {
			continue
		}
		var r rbResult
		for i, h := range header {
			v, _ := strconv.ParseFloat(rec[i], 64)
			switch h {
			case "rps":
				r.rps = v
			case "p99_latency_ms":
				r.p99ms = v
			case "avg_latency_ms":
				r.avgms = v
			}
		}
		res[rec[0]] = r
	}
	if len(res) == 0 {
		return nil, errors.New("no results in redis-benchmark output")
	}
	return res, nil
}

func shellJoin(args []string) string {
	q := make([]string, len(args))
	for i, a := range args {
		if a == "" || strings.ContainsAny(a, " \t\"'$*?[]{}\\;&|<>()#~`") {
			q[i] = "'" + strings.ReplaceAll(a, "'", `'\''`) + "'"
		} else {
			q[i] = a
		}
	}
	return strings.Join(q, " ")
}

func clip(s string) string {
	s = strings.TrimSpace(s)
	if len(s) > 400 {
		return s[:400] + "…"
	}
	return s
}
