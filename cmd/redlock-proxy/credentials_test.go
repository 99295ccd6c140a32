package main

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/redlock-proxy/redlock-proxy/internal/redistest"
)

// authMaster is a master that asks for credentials: a requirepass, or an
// ACL user with the default user switched off.
type authMaster struct {
	*redistest.Server
	user, pass string
}

func startAuthMaster(t *testing.T, user, pass string) authMaster {
	t.Helper()
	m := authMaster{redistest.Start(t), user, pass}
	c := m.Server.Client()
	defer c.Close()
	ctx := context.Background()
	if user == "" {
		if err := c.ConfigSet(ctx, "requirepass", pass).Err(); err != nil {
			t.Fatal(err)
		}
		return m
	}
	if err := c.Do(ctx, "ACL", "SETUSER", user, "on", ">"+pass, "~*", "&*", "+@all").Err(); err != nil {
		t.Fatal(err)
	}
	if err := c.Do(ctx, "ACL", "SETUSER", "default", "off").Err(); err != nil {
		t.Fatal(err)
	}
	return m
}

// client is a direct client of the master, with its current credentials.
func (m authMaster) client() *redis.Client {
	return redis.NewClient(&redis.Options{Addr: m.Addr, Username: m.user, Password: m.pass, MaxRetries: -1, Protocol: 2})
}

// holds reports whether the master holds key with value v.
func (m authMaster) holds(t *testing.T, key, v string) bool {
	t.Helper()
	c := m.client()
	defer c.Close()
	got, err := c.Get(context.Background(), key).Result()
	if err != nil && err != redis.Nil {
		t.Fatalf("master %s: %v", m.Addr, err)
	}
	return got == v
}

// Three masters with three different credentials, one of them an ACL user,
// through the binary: redlock.password for the one without an entry of its
// own, [[redlock.master_auth]] for the others.
func TestPerMasterCredentials(t *testing.T) {
	ms := []authMaster{startAuthMaster(t, "", "pw-zero"), startAuthMaster(t, "", "pw-one"), startAuthMaster(t, "locker", "pw-two")}
	port, mport := redistest.FreePort(t), redistest.FreePort(t)
	cfg := writeConfig(t, fmt.Sprintf(`
[proxy]
listen = "127.0.0.1:%d"
[redlock]
masters = ["%s", "%s", "%s"]
password = "pw-zero"
restart_guard = false
[[redlock.master_auth]]
address = "%s"
password = "pw-one"
[[redlock.master_auth]]
address = "%s"
username = "locker"
password = "pw-two"
[metrics]
listen = "127.0.0.1:%d"
`, port, ms[0].Addr, ms[1].Addr, ms[2].Addr, ms[1].Addr, ms[2].Addr, mport))
	startBinary(t, cfg)
	waitHTTP(t, fmt.Sprintf("http://127.0.0.1:%d/readyz", mport), 200)
	c := redis.NewClient(&redis.Options{Addr: fmt.Sprintf("127.0.0.1:%d", port), MaxRetries: -1})
	defer c.Close()
	ctx := context.Background()
	if ok, err := c.SetNX(ctx, "cred:lock", "tok", 10*time.Second).Result(); !ok || err != nil {
		t.Fatalf("acquire: %v %v", ok, err)
	}
	for _, m := range ms {
		eventuallyTrue(t, "master "+m.Addr+" holds the lock", func() bool { return m.holds(t, "cred:lock", "tok") })
	}
	if n, err := c.Eval(ctx, unlockScript, []string{"cred:lock"}, "tok").Int(); n != 1 || err != nil {
		t.Fatalf("release: %v %v", n, err)
	}
	// Passthrough goes to the first master, with redlock.password (DBSIZE:
	// a command that names no key, which a voting backend runs).
	if err := c.DBSize(ctx).Err(); err != nil {
		t.Fatalf("passthrough DBSIZE: %v", err)
	}
}

// An entry for an address that is neither a master nor the backend is a
// configuration error that names it.
func TestMasterAuthConfigErrors(t *testing.T) {
	cases := []struct{ body, want string }{
		{"[redlock]\nmasters = [\"127.0.0.1:1\", \"127.0.0.1:2\", \"127.0.0.1:3\"]\n[[redlock.master_auth]]\naddress = \"localhost:1\"\npassword = \"x\"\n",
			`redlock.master_auth[0]: address "localhost:1" is not one of redlock.masters or proxy.backend`},
		{"[redlock]\nmasters = [\"127.0.0.1:1\"]\n[[redlock.master_auth]]\naddress = \"127.0.0.1:1\"\npassword = \"x\"\n[[redlock.master_auth]]\naddress = \"127.0.0.1:1\"\npassword = \"y\"\n",
			`redlock.master_auth[1]: address "127.0.0.1:1" has credentials twice`},
		{"[redlock]\nmasters = [\"127.0.0.1:1\"]\n[[redlock.master_auth]]\npassword = \"x\"\n", "redlock.master_auth[0]: address is missing"},
		{"[redlock]\nmasters = [\"127.0.0.1:1\"]\n[[redlock.master_auth]]\naddress = \"127.0.0.1:1\"\nusername = \"u\"\n", `redlock.master_auth[0]: username "u" needs a password`},
		{"[redlock]\nmasters = [\"127.0.0.1:1\"]\n[[redlock.master_auth]]\naddress = \"127.0.0.1:1\"\npasword = \"x\"\n", "unknown key redlock.master_auth.pasword"},
		{"[redlock]\nmasters = [\"127.0.0.1:1\"]\nusername = \"u\"\n", "redlock.username: a username needs redlock.password"},
	}
	for _, c := range cases {
		out, err := exec.Command(binary, "-check-config", "-config", writeConfig(t, c.body)).CombinedOutput()
		if err == nil || !strings.Contains(string(out), c.want) {
			t.Errorf("%q: got %v %q, want an error with %q", c.body, err, out, c.want)
		}
	}
	// The backend may have an entry of its own.
	body := "[proxy]\nbackend = \"127.0.0.1:9\"\n[redlock]\nmasters = [\"127.0.0.1:1\"]\n[[redlock.master_auth]]\naddress = \"127.0.0.1:9\"\nusername = \"u\"\npassword = \"p\"\n"
	if out, err := exec.Command(binary, "-check-config", "-config", writeConfig(t, body)).CombinedOutput(); err != nil {
		t.Errorf("credentials for the backend refused: %s", out)
	}
}

func eventuallyTrue(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(5 * time.Second); !cond(); time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting until %s", what)
		}
	}
}

// SIGHUP applies new client passwords to new AUTHs (clients already
// authenticated go on) and new master credentials to new connections to
// the masters.
func TestSIGHUPReloadsPasswords(t *testing.T) {
	ms := []authMaster{startAuthMaster(t, "", "m-old"), startAuthMaster(t, "", "m-old"), startAuthMaster(t, "", "m-old")}
	port := redistest.FreePort(t)
	body := func(client, app, master1 string) string {
		return fmt.Sprintf(`
[proxy]
listen = "127.0.0.1:%d"
password = "%s"
[[proxy.users]]
name = "app"
password = "%s"
[redlock]
masters = ["%s", "%s", "%s"]
password = "m-old"
restart_guard = false
[[redlock.master_auth]]
address = "%s"
password = "%s"
[log]
format = "json"
`, port, client, app, ms[0].Addr, ms[1].Addr, ms[2].Addr, ms[1].Addr, master1)
	}
	cfg := writeConfig(t, body("c-old", "a-old", "m-old"))
	cmd, waitLog := startBinaryLogs(t, cfg)
	waitLog("redlock-proxy serving")
	addr := fmt.Sprintf("127.0.0.1:%d", port)
	ctx := context.Background()
	c1 := redis.NewClient(&redis.Options{Addr: addr, Password: "c-old", MaxRetries: -1, PoolSize: 1, Protocol: 2})
	defer c1.Close()
	if ok, err := c1.SetNX(ctx, "rot:1", "tok", 10*time.Second).Result(); !ok || err != nil {
		t.Fatalf("acquire before the reload: %v %v", ok, err)
	}

	// Master 1 gets a new password and drops its connections: the proxy,
	// still on the old one, cannot reconnect to it.
	m1 := ms[1].client()
	if err := m1.ConfigSet(ctx, "requirepass", "m-new").Err(); err != nil {
		t.Fatal(err)
	}
	m1.Close()
	ms[1].pass = "m-new"
	killClients(t, ms[1])
	if ok, err := c1.SetNX(ctx, "rot:before", "tok", 10*time.Second).Result(); !ok || err != nil {
		t.Fatalf("acquire with one master refusing the proxy: %v %v", ok, err)
	}
	time.Sleep(300 * time.Millisecond)
	if ms[1].holds(t, "rot:before", "tok") {
		t.Fatal("master 1 took a lock with its old password: the test proves nothing")
	}

	if err := os.WriteFile(cfg, []byte(body("c-new", "a-new", "m-new")), 0o644); err != nil {
		t.Fatal(err)
	}
	_ = cmd.Process.Signal(syscall.SIGHUP)
	l := waitLog("configuration reloaded")
	for _, k := range []string{"proxy.password", "proxy.users", "redlock.master_auth"} {
		if !strings.Contains(l, k) {
			t.Errorf("reload log does not name %s: %s", k, l)
		}
	}
	for _, secret := range []string{"c-new", "a-new", "m-new", "c-old"} {
		if strings.Contains(l, secret) {
			t.Errorf("reload log shows a password: %s", l)
		}
	}

	// New AUTHs: the old passwords are refused, the new ones accepted.
	for _, c := range []struct {
		user, pass string
		ok         bool
	}{{"", "c-old", false}, {"", "c-new", true}, {"app", "a-old", false}, {"app", "a-new", true}} {
		rc := redis.NewClient(&redis.Options{Addr: addr, Username: c.user, Password: c.pass, MaxRetries: -1, Protocol: 2})
		err := rc.Ping(ctx).Err()
		rc.Close()
		if (err == nil) != c.ok || (err != nil && !strings.Contains(err.Error(), "WRONGPASS")) {
			t.Errorf("AUTH %q %q after the reload: %v, want ok=%v", c.user, c.pass, err, c.ok)
		}
	}
	// The client that authenticated before goes on.
	if ok, err := c1.SetNX(ctx, "rot:2", "tok", 10*time.Second).Result(); !ok || err != nil {
		t.Fatalf("acquire by a client authenticated before the reload: %v %v", ok, err)
	}

	// New connections to master 1 use its new password: locks reach it again.
	i := 0
	eventuallyTrue(t, "master 1 takes locks after the reload", func() bool {
		i++
		key := fmt.Sprintf("rot:after:%d", i)
		_ = c1.SetNX(ctx, key, "tok", 10*time.Second).Err()
		time.Sleep(20 * time.Millisecond)
		return ms[1].holds(t, key, "tok")
	})
	// Rotate the shared password of the other two, with the backend (master
	// 0) among them: passthrough reconnects with it too.
	for _, m := range []authMaster{ms[0], ms[2]} {
		mc := m.client()
		if err := mc.ConfigSet(ctx, "requirepass", "m-newer").Err(); err != nil {
			t.Fatal(err)
		}
		mc.Close()
	}
	ms[0].pass, ms[2].pass = "m-newer", "m-newer"
	newer := strings.Replace(body("c-new", "a-new", "m-new"), `password = "m-old"`, `password = "m-newer"`, 1)
	if err := os.WriteFile(cfg, []byte(newer), 0o644); err != nil {
		t.Fatal(err)
	}
	_ = cmd.Process.Signal(syscall.SIGHUP)
	if l := waitLog("configuration reloaded"); !strings.Contains(l, "redlock.password") {
		t.Errorf("reload log does not name redlock.password: %s", l)
	}
	killClients(t, ms[0])
	killClients(t, ms[2])
	c2 := redis.NewClient(&redis.Options{Addr: addr, Password: "c-new", MaxRetries: -1, Protocol: 2})
	defer c2.Close()
	eventuallyTrue(t, "every master takes locks after the second reload", func() bool {
		i++
		key := fmt.Sprintf("rot:after:%d", i)
		_ = c2.SetNX(ctx, key, "tok", 10*time.Second).Err()
		time.Sleep(20 * time.Millisecond)
		return ms[0].holds(t, key, "tok") && ms[2].holds(t, key, "tok")
	})
	if err := c2.DBSize(ctx).Err(); err != nil {
		t.Fatalf("passthrough after the backend's password changed: %v", err)
	}
}

// killClients closes every client connection of the master but the one
// that asks, so the proxy has to reconnect.
func killClients(t *testing.T, m authMaster) {
	t.Helper()
	c := m.client()
	defer c.Close()
	if err := c.Do(context.Background(), "CLIENT", "KILL", "TYPE", "normal", "SKIPME", "yes").Err(); err != nil {
		t.Fatalf("CLIENT KILL on %s: %v", m.Addr, err)
	}
}

// startBinaryLogs runs the proxy and returns a function that waits for a
// log line containing a string.
func startBinaryLogs(t *testing.T, cfg string) (*exec.Cmd, func(string) string) {
	t.Helper()
	cmd := exec.Command(binary, "-config", cfg)
	stderr, _ := cmd.StderrPipe()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	logs := make(chan string, 1000)
	go func() {
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			select {
			case logs <- sc.Text():
			default:
			}
		}
	}()
	return cmd, func(want string) string {
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
}
