package compat

import (
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/redlock-proxy/redlock-proxy/internal/redistest"
)

// TestPythonRedisPy runs redis-py's Lock (Debian's python3-redis) through the
// proxy binary and checks the lock on the masters.
func TestPythonRedisPy(t *testing.T) {
	need(t, "/usr/bin/python3")
	s := startStack(t)
	run(t, s, "python", "/usr/bin/python3", "-m", "pytest", "-q", "-p", "no:cacheprovider", "test_redispy.py")
}

// TestPythonRedisPyRESP3 runs redis-py 6 with protocol=3 (fetched into
// .deps/redis-py by scripts/deps.sh) through the proxy binary: replies
// compared type for type with a plain redis-server, its Lock, and pub/sub.
// (Its client-side cache needs a server that reports Redis 7.4 or later;
// the proxy reports 7.0.0, the command set it serves.)
func TestPythonRedisPyRESP3(t *testing.T) {
	need(t, "/usr/bin/python3")
	lib, err := filepath.Abs("../.deps/redis-py")
	if err != nil {
		t.Fatal(err)
	}
	need(t, filepath.Join(lib, "redis"))
	s := startStack(t)
	plain := redistest.Start(t)
	cmd := exec.Command("/usr/bin/python3", "-m", "pytest", "-q", "-p", "no:cacheprovider", "test_redispy_resp3.py")
	cmd.Dir = "python"
	cmd.Env = append(s.env(), "REDIS_PLAIN="+plain.Addr, "PYTHONPATH="+lib)
	out, err := cmd.CombinedOutput()
	t.Logf("%s:\n%s", cmd, out)
	if err != nil {
		t.Fatalf("pytest failed: %v", err)
	}
}
