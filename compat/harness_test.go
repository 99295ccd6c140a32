// Package compat drives real lock client libraries, unmodified, against the
// real proxy binary in front of three real redis-server masters.
package compat

import (
	"os"
	"os/exec"
	"strings"
	"testing"

	"github.com/redlock-proxy/redlock-proxy/internal/redistest"
)

var binary string

func TestMain(m *testing.M) { redistest.MainWithProxy(m, "../cmd/redlock-proxy", &binary) }

// stack is three masters, the application's Redis and the proxy binary in
// front of them.
type stack struct{ *redistest.ClientStack }

func startStack(t *testing.T) stack { return stack{redistest.StartClientStack(t, binary)} }

// env is what an external test program needs: the proxy's address, the
// masters', to check that locks are held on a quorum, and the backend's
// (the application's Redis), where what is not a lock lives.
func (s stack) env() []string {
	return append(os.Environ(),
		"REDLOCK_PROXY="+s.Addr,
		"REDLOCK_MASTERS="+strings.Join(redistest.Addrs(s.Masters), ","),
		"REDLOCK_BACKEND="+s.Backend.Addr)
}

// need fails under CI (which must install it) or skips elsewhere when a
// client runtime is missing.
func need(t *testing.T, path string) {
	t.Helper()
	if _, err := os.Stat(path); err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("%s is missing; CI must install it", path)
		}
		t.Skipf("%s is missing", path)
	}
}

// run runs an external test program against the stack and fails with its
// output if it fails.
func run(t *testing.T, s stack, dir string, name string, args ...string) {
	t.Helper()
	cmd := exec.Command(name, args...)
	cmd.Dir = dir
	cmd.Env = s.env()
	out, err := cmd.CombinedOutput()
	t.Logf("%s %s:\n%s", name, strings.Join(args, " "), out)
	if err != nil {
		t.Fatalf("%s failed: %v", name, err)
	}
}
