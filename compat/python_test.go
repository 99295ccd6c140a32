package compat

import (
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
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

// TestPythonDjangoCache runs Django's cache through django-redis (Debian's
// python3-django and python3-django-redis) beside redis-py's Lock (the
// cache's own cache.lock, and one on its connection): the same tests once
// against a plain redis-server and once through the proxy, what each saw
// compared line for line. Configurations: every key a lock key on a backend
// of the proxy's own (scripts/run.sh's), locks taken by the cache's own
// alias; and lock_keys ["lock:*"], locks by a cache alias of their own
// whose KEY_PREFIX is "lock".
func TestPythonDjangoCache(t *testing.T) {
	need(t, "/usr/bin/python3")
	need(t, "/usr/lib/python3/dist-packages/django_redis")
	for _, tc := range []struct {
		name       string
		lockKeys   []string // nil: startStack's, every key a lock key
		lockPrefix string
		db         int
	}{
		{name: "every key a lock key, database 0"},
		{name: "every key a lock key, database 1", db: 1},
		{name: "lock keys lock:*, database 0", lockKeys: []string{"lock:*"}, lockPrefix: "lock"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var s stack
			if tc.lockKeys == nil {
				s = startStack(t)
			} else {
				s = startStackLockKeys(t, tc.lockKeys...)
			}
			plain := redistest.Start(t)
			dir := t.TempDir()
			pytest := func(target string, voters []string, observed string) (string, int) {
				return output(t, "python", []string{"REDIS_TARGET=" + target, "REDIS_VOTERS=" + strings.Join(voters, ","),
					"REDIS_DB=" + strconv.Itoa(tc.db), "LOCK_PREFIX=" + tc.lockPrefix, "RUN=django",
					"OBSERVED=" + observed}, "/usr/bin/python3", "-m", "pytest", "-q", "-x", "-p", "no:cacheprovider", "-W", "ignore::DeprecationWarning", "test_django_cache.py")
			}
			if _, code := pytest(plain.Addr, []string{plain.Addr}, filepath.Join(dir, "plain")); code != 0 {
				t.Fatalf("against a plain Redis: exit %d", code)
			}
			out, code := pytest(s.Addr, redistest.Addrs(s.Masters), filepath.Join(dir, "proxy"))
			if code != 0 {
				t.Fatalf("through the proxy: exit %d\n%s", code, out)
			}
			want, err := os.ReadFile(filepath.Join(dir, "plain"))
			if err != nil {
				t.Fatal(err)
			}
			got, err := os.ReadFile(filepath.Join(dir, "proxy"))
			if err != nil {
				t.Fatal(err)
			}
			if len(want) == 0 {
				t.Fatal("the run against a plain Redis recorded nothing")
			}
			sameLines(t, "test_django_cache.py", string(want), string(got))
		})
	}
}
