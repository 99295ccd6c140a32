package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// nodeDir holds the Node load generator and its packages (node-redlock 5,
// ioredis 5, node-redis 4), installed by scripts/deps.sh (npm ci).
const nodeDir = "compat/node"

// nodeResult is one run of the Node load generator, and the CPU time the
// node process used.
type nodeResult struct {
	Pairs        int     `json:"pairs"`
	LockErrors   int     `json:"lockErrors"`
	UnlockErrors int     `json:"unlockErrors"`
	P50          float64 `json:"p50"` // ms, per lock+release pair
	P99          float64 `json:"p99"`
	Seconds      float64 `json:"seconds"`
	FirstError   string  `json:"firstError"`
	cpu          time.Duration
	line         string
}

func (r nodeResult) rate() float64 {
	if r.Seconds <= 0 {
		return 0
	}
	return float64(r.Pairs) / r.Seconds
}

// nodeReady reports why the Node load generator cannot run, or "".
func nodeReady() string {
	if _, err := exec.LookPath("node"); err != nil {
		return "node is not installed"
	}
	for _, pkg := range []string{"redlock5", "ioredis", "redis"} {
		if _, err := os.Stat(filepath.Join(nodeDir, "node_modules", pkg)); err != nil {
			return fmt.Sprintf("%s/node_modules/%s is missing (bash scripts/deps.sh runs npm ci there)", nodeDir, pkg)
		}
	}
	return ""
}

// runNode runs compat/node/loadgen.mjs in mode (redlock5 or noderedis)
// against addrs, loops concurrent lock/release loops, for d. started, if
// not nil, is called with the node process's pid once it has started.
func runNode(mode string, addrs []string, loops int, d time.Duration, started func(pid int, at time.Time)) (nodeResult, error) {
	args := []string{"loadgen.mjs", mode, strconv.FormatFloat(d.Seconds(), 'f', -1, 64), strconv.Itoa(loops), strings.Join(addrs, ",")}
	ctx, cancel := context.WithTimeout(context.Background(), d+60*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, "node", args...)
	cmd.Dir = nodeDir
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Start()
	if err == nil {
		if started != nil {
			started(cmd.Process.Pid, time.Now())
		}
		err = cmd.Wait()
	}
	var r nodeResult
	r.line = "node " + shellJoin(args)
	if cmd.ProcessState != nil {
		r.cpu = cmd.ProcessState.UserTime() + cmd.ProcessState.SystemTime()
	}
	if err != nil {
		return r, fmt.Errorf("%s: %v: %s", r.line, err, clip(stderr.String()))
	}
	if err := json.Unmarshal(bytes.TrimSpace(stdout.Bytes()), &r); err != nil {
		return r, fmt.Errorf("%s: %v: %s", r.line, err, clip(stdout.String()))
	}
	return r, nil
}
