package compat

import (
	"os"
	"os/exec"
	"path/filepath"
	"testing"
)

// TestNodeRedlock runs node-redlock v4 (ioredis 4) and v5 (ioredis 5),
// node-redis 6 in RESP3 and RESP2, and the other Node lock libraries
// (redis-semaphore's Mutex and Semaphore among them), unmodified, with the
// proxy as their only Redis client, and node-redlock 5 with many locks in
// flight on one ioredis connection; the tests are node/*.test.mjs. CI
// installs the packages with `npm ci` in compat/node first.
func TestNodeRedlock(t *testing.T) {
	node, err := exec.LookPath("node")
	if err != nil {
		node = "/usr/bin/node" // reported missing by need
	}
	need(t, node)
	needNodeModules(t, "node", "redlock4", "redlock5", "ioredis", "ioredis4", "redis6", "@sesamecare-oss/redlock", "redis-semaphore", "simple-redis-mutex", "redlock-universal")
	s := startStack(t)
	run(t, s, "node", "node", "--test")
}

// needNodeModules fails under CI, or skips elsewhere, when the npm packages
// of the node project in dir are not installed.
func needNodeModules(t *testing.T, dir string, pkgs ...string) {
	t.Helper()
	for _, p := range pkgs {
		path := filepath.Join(dir, "node_modules", p, "package.json")
		if _, err := os.Stat(path); err != nil {
			if os.Getenv("CI") == "true" {
				t.Fatalf("%s is missing; CI must run `npm ci` in compat/%s first", path, dir)
			}
			t.Skipf("%s is missing; run `npm ci` in compat/%s", path, dir)
		}
	}
}
