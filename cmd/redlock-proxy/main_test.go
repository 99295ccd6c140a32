package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/redlock-proxy/redlock-proxy/internal/redistest"
)

var binary string

func TestMain(m *testing.M) { redistest.MainWithProxy(m, ".", &binary) }

func writeConfig(t *testing.T, body string) string {
	p := filepath.Join(t.TempDir(), "config.toml")
	if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestBinaryServesAndStops(t *testing.T) {
	masters := redistest.StartN(t, 3)
	port := redistest.FreePort(t)
	cfg := writeConfig(t, fmt.Sprintf(`
[proxy]
listen = "127.0.0.1:%d"
[redlock]
masters = ["%s"]
restart_guard = false
[log]
format = "json"
`, port, strings.Join(redistest.Addrs(masters), `", "`)))
	cmd := exec.Command(binary, "-config", cfg)
	stderr, _ := cmd.StderrPipe()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer cmd.Process.Kill()
	lines := bufio.NewScanner(stderr)
	if !lines.Scan() {
		t.Fatal("no log line")
	}
	var first map[string]any
	if err := json.Unmarshal(lines.Bytes(), &first); err != nil {
		t.Fatalf("first log line is not JSON: %s", lines.Text())
	}
	if first["message"] != "redlock-proxy serving" || first["reachable"] != float64(3) {
		t.Fatalf("first log line: %s", lines.Text())
	}
	c := redis.NewClient(&redis.Options{Addr: fmt.Sprintf("127.0.0.1:%d", port), MaxRetries: -1})
	defer c.Close()
	ctx := context.Background()
	ok, err := c.SetNX(ctx, "bin:lock", "tok", 10*time.Second).Result()
	if err != nil || !ok {
		t.Fatalf("SetNX: %v %v", ok, err)
	}
	// The proxy answers once a quorum has it; the last master follows.
	deadline := time.Now().Add(2 * time.Second)
	for _, m := range masters {
		mc := m.Client()
		for v, _ := mc.Get(ctx, "bin:lock").Result(); v != "tok"; v, _ = mc.Get(ctx, "bin:lock").Result() {
			if time.Now().After(deadline) {
				t.Fatalf("master %s holds %q, want the lock", m.Addr, v)
			}
			time.Sleep(10 * time.Millisecond)
		}
		mc.Close()
	}
	_ = cmd.Process.Signal(syscall.SIGTERM)
	done := make(chan error, 1)
	go func() {
		for lines.Scan() {
		}
		done <- cmd.Wait()
	}()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("exit after SIGTERM: %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("did not exit after SIGTERM")
	}
}

func TestConfigErrors(t *testing.T) {
	cases := []struct{ body, want string }{
		{"[proxy]\nlisten = \"127.0.0.1:1\"\nlistne = 1\n[redlock]\nmasters=[\"127.0.0.1:2\"]\n", "unknown key proxy.listne"},
		{"[redlock]\nmasters = []\n", "redlock.masters: at least one master"},
		{"[redlock]\nmasters = [\"nohostport\"]\n", `redlock.masters: "nohostport" is not host:port`},
		{"[redlock]\nmasters = [\"a:1\",\"b:1\",\"c:1\"]\nquorum = 1\n", "redlock.quorum: 1 is not a majority"},
		{"[redlock]\nmasters = [\"a:1\"]\nnode_timeout = \"fast\"\n", "invalid duration"},
		{"[redlock]\nmasters = [\"a:1\"]\ndrift_factor = 2.0\n", "redlock.drift_factor"},
		{"[redlock]\nmasters = [\"a:1\"]\n[log]\nlevel = \"loud\"\n", "log.level"},
		{"[proxy]\nmax_lock_value = \"100\"\n[redlock]\nmasters = [\"a:1\"]\n", "proxy.max_lock_value: 100 is outside 1024.."},
		{"[redlock]\nmasters = [\"a:1\"]\n[[scripts]]\nfile = \"nope.lua\"\nop = \"release\"\ntoken_arg = 1\n", "scripts[0]: open"},
		{"[redlock]\nmasters = [\"a:1\"]\n[[scripts]]\nfile = \"/etc/hostname\"\nop = \"unlock\"\ntoken_arg = 1\n", `op "unlock" is not one of`},
	}
	for _, c := range cases {
		out, err := exec.Command(binary, "-check-config", "-config", writeConfig(t, c.body)).CombinedOutput()
		if err == nil {
			t.Errorf("%q: accepted", c.body)
			continue
		}
		if !strings.Contains(string(out), c.want) {
			t.Errorf("%q: got %q, want it to mention %q", c.body, out, c.want)
		}
	}
	out, err := exec.Command(binary, "-check-config", "-config", "../../config.toml").CombinedOutput()
	if err != nil {
		t.Fatalf("the repository's config.toml is rejected: %s", out)
	}
}

// A redis-cli session through the binary, as the README shows it.
func TestRedisCLISession(t *testing.T) {
	cli, err := exec.LookPath("redis-cli")
	if err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatal("redis-cli is not installed; CI must install redis-tools")
		}
		t.Skip("redis-cli not installed")
	}
	masters := redistest.StartN(t, 3)
	backend := redistest.Start(t) // the application's Redis, as scripts/run.sh starts it
	port := redistest.FreePort(t)
	cfg := writeConfig(t, fmt.Sprintf("[proxy]\nlisten = \"127.0.0.1:%d\"\nbackend = %q\n[redlock]\nmasters = [\"%s\"]\nrestart_guard = false\n",
		port, backend.Addr, strings.Join(redistest.Addrs(masters), `", "`)))
	cmd := exec.Command(binary, "-config", cfg)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = cmd.Process.Kill(); _ = cmd.Wait() }()
	p := fmt.Sprint(port)
	cliRun := func(args ...string) string {
		out, _ := exec.Command(cli, append([]string{"-p", p}, args...)...).CombinedOutput()
		return strings.TrimSpace(string(out))
	}
	deadline := time.Now().Add(5 * time.Second)
	for cliRun("ping") != "PONG" {
		if time.Now().After(deadline) {
			t.Fatal("proxy did not answer redis-cli PING")
		}
		time.Sleep(20 * time.Millisecond)
	}
	unlock := `if redis.call("get",KEYS[1]) == ARGV[1] then return redis.call("del",KEYS[1]) else return 0 end`
	steps := []struct {
		args []string
		want string
	}{
		{[]string{"set", "mylock", "token1", "NX", "PX", "10000"}, "OK"},
		{[]string{"set", "mylock", "token2", "NX", "PX", "10000"}, ""},
		{[]string{"get", "mylock"}, "token1"},
		{[]string{"eval", unlock, "1", "mylock", "token1"}, "1"},
		{[]string{"set", "mylock", "token2", "NX", "PX", "10000"}, "OK"},
		{[]string{"incr", "visits"}, "1"},
		{[]string{"get", "visits"}, "1"},
		{[]string{"set", "x", "y", "nx", "px", "0"}, "ERR invalid expire time in 'set' command"},
	}
	for _, s := range steps {
		if got := cliRun(s.args...); got != s.want {
			t.Fatalf("redis-cli %v: got %q, want %q", s.args, got, s.want)
		}
	}
	// Commands piped to one redis-cli, as in a script.
	c := exec.Command(cli, "-p", p)
	c.Stdin = strings.NewReader("set piped v NX EX 10\npttl piped\ninfo redlock\n")
	out, err := c.CombinedOutput()
	if err != nil || !strings.HasPrefix(string(out), "OK\n") || !strings.Contains(string(out), "quorum:2") {
		t.Fatalf("piped session: %v\n%s", err, out)
	}
}

// Flags win over environment variables, which win over the file.
func TestFlagsAndEnvOverrideTheFile(t *testing.T) {
	cfg := writeConfig(t, "[proxy]\nlisten = \"127.0.0.1:1111\"\n[redlock]\nmasters = [\"127.0.0.1:1\"]\n")
	check := func(env []string, args ...string) string {
		cmd := exec.Command(binary, append([]string{"-check-config", "-config", cfg}, args...)...)
		cmd.Env = append(os.Environ(), env...)
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("%v %v: %v\n%s", env, args, err, out)
		}
		return string(out)
	}
	if out := check(nil); !strings.Contains(out, "listen 127.0.0.1:1111, 1 masters") {
		t.Fatalf("file values: %s", out)
	}
	env := []string{"REDLOCK_PROXY_LISTEN=127.0.0.1:2222", "REDLOCK_PROXY_MASTERS=127.0.0.1:1,127.0.0.1:2,127.0.0.1:3"}
	if out := check(env); !strings.Contains(out, "listen 127.0.0.1:2222, 3 masters") {
		t.Fatalf("environment: %s", out)
	}
	if out := check(env, "-listen", "127.0.0.1:3333"); !strings.Contains(out, "listen 127.0.0.1:3333, 3 masters") {
		t.Fatalf("flag over environment: %s", out)
	}
	out, err := exec.Command(binary, "-check-config", "-config", cfg, "-masters", "nohostport").CombinedOutput()
	if err == nil || !strings.Contains(string(out), "redlock.masters") {
		t.Fatalf("a bad flag value is not reported by key: %v %s", err, out)
	}
}

// SIGHUP applies what is safe to change live and refuses a new master list.
func TestSIGHUPReload(t *testing.T) {
	masters := redistest.StartN(t, 3)
	port := redistest.FreePort(t)
	body := func(maxClients int, ms []string) string {
		return fmt.Sprintf("[proxy]\nlisten = \"127.0.0.1:%d\"\nmax_clients = %d\n[redlock]\nmasters = [\"%s\"]\nrestart_guard = false\n[log]\nformat = \"json\"\n",
			port, maxClients, strings.Join(ms, `", "`))
	}
	cfg := writeConfig(t, body(100, redistest.Addrs(masters)))
	cmd := exec.Command(binary, "-config", cfg)
	stderr, _ := cmd.StderrPipe()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = cmd.Process.Kill(); _ = cmd.Wait() }()
	logs := make(chan string, 100)
	go func() {
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			logs <- sc.Text()
		}
	}()
	waitLog := func(want string) string {
		t.Helper()
		for deadline := time.After(10 * time.Second); ; {
			select {
			case l := <-logs:
				if strings.Contains(l, want) {
					return l
				}
			case <-deadline:
				t.Fatalf("no log line with %q", want)
			}
		}
	}
	waitLog("redlock-proxy serving")

	// A different master list is refused, and says why.
	other := append(redistest.Addrs(masters)[:2:2], "127.0.0.1:1")
	if err := os.WriteFile(cfg, []byte(body(100, other)), 0o644); err != nil {
		t.Fatal(err)
	}
	_ = cmd.Process.Signal(syscall.SIGHUP)
	if l := waitLog("reload refused"); !strings.Contains(l, "redlock.masters") {
		t.Fatalf("refusal does not name the reason: %s", l)
	}

	// max_clients is applied live.
	if err := os.WriteFile(cfg, []byte(body(1, redistest.Addrs(masters))), 0o644); err != nil {
		t.Fatal(err)
	}
	_ = cmd.Process.Signal(syscall.SIGHUP)
	if l := waitLog("configuration reloaded"); !strings.Contains(l, "proxy.max_clients") {
		t.Fatalf("reload does not list what changed: %s", l)
	}
	addr := fmt.Sprintf("127.0.0.1:%d", port)
	c1, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c1.Close()
	c1.Write([]byte("PING\r\n"))
	r1 := bufio.NewReader(c1)
	if l, _ := r1.ReadString('\n'); l != "+PONG\r\n" {
		t.Fatalf("first client: %q", l)
	}
	c2, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c2.Close()
	if l, _ := bufio.NewReader(c2).ReadString('\n'); l != "-ERR max number of clients reached\r\n" {
		t.Fatalf("second client after max_clients = 1: %q", l)
	}
}
