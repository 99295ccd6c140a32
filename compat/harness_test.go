// Package compat drives real lock client libraries, unmodified, against the
// real proxy binary in front of three real redis-server masters.
package compat

import (
	"fmt"
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

// startStackLockKeys is startStack with proxy.lock_keys set to patterns:
// the application's Redis still the proxy's backend, but only the keys
// they match served by the quorum.
func startStackLockKeys(t *testing.T, patterns ...string) stack {
	t.Helper()
	masters := redistest.StartN(t, 3)
	backend := redistest.Start(t)
	p := redistest.StartProxy(t, binary, func(listen string) string {
		return fmt.Sprintf("[proxy]\nlisten = %q\nbackend = %q\nlock_keys = [%s]\n[redlock]\nmasters = [%s]\nrestart_guard = false\nnode_timeout = \"200ms\"\n[log]\nformat = \"json\"\nlevel = \"warn\"\n",
			listen, backend.Addr, redistest.Quote(patterns), redistest.Quote(redistest.Addrs(masters)))
	}, redistest.WithProxyLog())
	return stack{&redistest.ClientStack{Masters: masters, Backend: backend, Addr: p.Addr}}
}

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

// output runs an external test program with env added to the test
// process's environment, and returns what it printed and its exit code
// (-1 if it could not run).
func output(t *testing.T, dir string, env []string, name string, args ...string) (string, int) {
	t.Helper()
	cmd := exec.Command(name, args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), env...)
	out, err := cmd.CombinedOutput()
	t.Logf("%s %s %s:\n%s", strings.Join(env, " "), name, strings.Join(args, " "), out)
	if err != nil {
		if e, ok := err.(*exec.ExitError); ok {
			return string(out), e.ExitCode()
		}
		t.Fatalf("%s: %v", name, err)
		return string(out), -1
	}
	return string(out), 0
}

// sameLines fails unless a and b, two runs' outputs, are the same line for
// line, naming the first line where they part.
func sameLines(t *testing.T, what string, a, b string) {
	t.Helper()
	la, lb := strings.Split(a, "\n"), strings.Split(b, "\n")
	for i := 0; i < len(la) || i < len(lb); i++ {
		var x, y string
		if i < len(la) {
			x = la[i]
		}
		if i < len(lb) {
			y = lb[i]
		}
		if x != y {
			t.Fatalf("%s: line %d differs:\n  plain Redis: %q\n  proxy:       %q", what, i+1, x, y)
		}
	}
}
