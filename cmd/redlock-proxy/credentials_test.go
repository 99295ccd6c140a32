package main

import (
	"context"
	"fmt"
	"os/exec"
	"strings"
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
	// Passthrough goes to the first master, with redlock.password.
	if n, err := c.Incr(ctx, "cred:counter").Result(); n != 1 || err != nil {
		t.Fatalf("passthrough INCR: %v %v", n, err)
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
