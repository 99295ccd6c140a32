package proxy_test

import (
	"context"
	"fmt"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/redlock-proxy/redlock-proxy/proxy"
)

// Reload swaps client credentials live: new AUTHs see them at once, and
// clients connected before keep working, as on Redis after CONFIG SET
// requirepass.
func TestReloadClientPasswords(t *testing.T) {
	var cfg proxy.Config
	e := newEnv(t, 3, func(c *proxy.Config) { cfg = *c })
	must(e.do("PING")) // connected while no password was set
	ctx := context.Background()
	dial := func(user, pass string) error {
		c := redis.NewClient(&redis.Options{Addr: e.addr, Username: user, Password: pass, MaxRetries: -1, Protocol: 2})
		defer c.Close()
		return c.Ping(ctx).Err()
	}

	next := cfg
	next.Proxy.Password = "new"
	next.Proxy.Users = []proxy.UserConfig{{Name: "app", Password: "apw"}}
	changed, err := e.srv.Reload(next)
	if err != nil || !reflect.DeepEqual(changed, []string{"proxy.password", "proxy.users"}) {
		t.Fatalf("Reload: %v %v", changed, err)
	}
	if v, err := e.do("SET", e.key("k"), "t", "NX", "PX", 10000); v != "OK" {
		t.Fatalf("client connected before the password was set: %v %v", v, err)
	}
	if err := dial("", ""); err == nil || !strings.HasPrefix(err.Error(), "NOAUTH") {
		t.Fatalf("new client without AUTH: %v", err)
	}
	if err := dial("", "new"); err != nil {
		t.Fatalf("new password: %v", err)
	}
	if err := dial("app", "apw"); err != nil {
		t.Fatalf("new user: %v", err)
	}

	// Master credentials change live too; other keys are refused.
	next.Redlock.Password = "unused"
	if changed, err := e.srv.Reload(next); err != nil || !reflect.DeepEqual(changed, []string{"redlock.password"}) {
		t.Fatalf("Reload of redlock.password: %v %v", changed, err)
	}
	bad := next
	bad.Proxy.LockKeys = []string{"lock:*"}
	if _, err := e.srv.Reload(bad); err == nil || !strings.Contains(err.Error(), "proxy.password") {
		t.Fatalf("a change of proxy.lock_keys: %v", err)
	}

	next.Proxy.Password, next.Proxy.Users = "", nil
	if _, err := e.srv.Reload(next); err != nil {
		t.Fatal(err)
	}
	if err := dial("", ""); err != nil {
		t.Fatalf("no password any more: %v", err)
	}
}

// Reload applies proxy.idle_timeout to connected clients from their next
// read: an idle client connected before is closed once the new timeout
// passes.
func TestReloadIdleTimeout(t *testing.T) {
	var cfg proxy.Config
	e := newEnv(t, 3, func(c *proxy.Config) { cfg = *c })
	c := e.dial()
	defer c.Close()
	c.Write([]byte("PING\r\n"))
	buf := make([]byte, 64)
	if n, err := c.Read(buf); err != nil || string(buf[:n]) != "+PONG\r\n" {
		t.Fatalf("PING: %q %v", buf[:n], err)
	}
	next := cfg
	next.Proxy.IdleTimeout = proxy.Duration{Duration: 300 * time.Millisecond}
	next.Proxy.WriteTimeout = proxy.Duration{Duration: 10 * time.Second}
	changed, err := e.srv.Reload(next)
	if err != nil || !reflect.DeepEqual(changed, []string{"proxy.idle_timeout", "proxy.write_timeout"}) {
		t.Fatalf("Reload: %v %v", changed, err)
	}
	// The client's read in progress still has no deadline; its next one has.
	c.Write([]byte("PING\r\n"))
	if n, err := c.Read(buf); err != nil || string(buf[:n]) != "+PONG\r\n" {
		t.Fatalf("PING after the reload: %q %v", buf[:n], err)
	}
	c.SetReadDeadline(time.Now().Add(5 * time.Second))
	if n, err := c.Read(buf); err == nil {
		t.Fatalf("an idle client was not closed after the new idle_timeout; got %q", buf[:n])
	}
}

// Reload writes the configuration while clients work: new clients connect
// (their input limits come from it), open databases (SELECT: a Redlock
// client made from it) and take locks (each bounded by the masters'
// timeouts in it). Under -race this shows that none of them reads what a
// reload writes.
func TestReloadWhileClientsWork(t *testing.T) {
	var cfg proxy.Config
	e := newEnv(t, 3, func(c *proxy.Config) { cfg = *c })
	stop := make(chan struct{})
	reloaded := make(chan error, 1)
	go func() {
		next := cfg
		next.Redlock.Username = "default" // the masters' user without a password takes any
		for i := 0; ; i++ {
			next.Proxy.MaxClients = cfg.Proxy.MaxClients + i%2
			next.Redlock.Password = fmt.Sprintf("p%d", i%2)
			if _, err := e.srv.Reload(next); err != nil {
				reloaded <- err
				return
			}
			select {
			case <-stop:
				reloaded <- nil
				return
			case <-time.After(time.Millisecond):
			}
		}
	}()
	ctx := context.Background()
	var failed error
	for db := 1; db <= 5 && failed == nil; db++ {
		c := redis.NewClient(&redis.Options{Addr: e.addr, DB: db, MaxRetries: -1})
		if ok, err := c.SetNX(ctx, e.key(fmt.Sprint(db)), "t", 10*time.Second).Result(); !ok || err != nil {
			failed = fmt.Errorf("SET NX in database %d: %v %v", db, ok, err)
		}
		c.Close()
	}
	close(stop)
	if err := <-reloaded; err != nil {
		t.Fatalf("Reload: %v", err)
	}
	if failed != nil {
		t.Fatal(failed)
	}
}
