package proxy_test

import (
	"context"
	"strings"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/redlock-proxy/redlock-proxy/internal/redistest"
	"github.com/redlock-proxy/redlock-proxy/proxy"
)

// Admin commands that would erase or reconfigure a voting master are
// refused when the passthrough backend is a master (the default). A lock
// held on masters 0 and 1 (master 2 missed it): FLUSHALL through the proxy
// would erase master 0's copy while it keeps voting, and a second client
// would be granted the lock. With the guard off it passes through, and
// the second client is granted it.
func TestAdminCommandsOnVotingBackend(t *testing.T) {
	for _, guard := range []bool{true, false} {
		name := map[bool]string{true: "on", false: "off_grants_the_lock_twice"}[guard]
		t.Run(name, func(t *testing.T) {
			e := newEnv(t, 3, func(c *proxy.Config) {
				if !guard {
					c.GuardsOff = []string{"admin-commands"}
				}
			})
			key := e.key("k")
			mustEqual(t, "acquire", must(e.do("SET", key, "A", "NX", "PX", 60000)), any("OK"))
			eventually(t, "on every master", func() bool { return count(e.onMasters(key), "A") == 3 })
			m2 := e.masters[2].Client()
			m2.Del(context.Background(), key)
			m2.Close()
			_, err := e.do("FLUSHALL")
			b, berr := e.do("SET", key, "B", "NX", "PX", 60000)
			if guard {
				if err == nil || !strings.Contains(err.Error(), "voting master") {
					t.Fatalf("FLUSHALL through the proxy: %v, want refused", err)
				}
				if b == "OK" {
					t.Fatal("a second client was granted the lock")
				}
				for _, cmd := range [][]any{{"FLUSHDB"}, {"FLUSHALL", "ASYNC"}, {"DEBUG", "RELOAD"}, {"DEBUG", "SLEEP", "0"},
					{"CONFIG", "SET", "appendonly", "no"}, {"config", "rewrite"}, {"ACL", "SETUSER", "x"}, {"MODULE", "LOAD", "/x.so"}, {"SWAPDB", "0", "1"}} {
					if _, err := e.do(cmd...); err == nil || !strings.HasPrefix(err.Error(), "ERR redlock-proxy:") {
						t.Errorf("%v: %v, want refused", cmd, err)
					}
				}
				// Reads of the configuration pass.
				if v, err := e.do("CONFIG", "GET", "maxmemory"); err != nil {
					t.Errorf("CONFIG GET: %v %v", v, err)
				}
				mustEqual(t, "the lock is intact", count(e.onMasters(key), "A"), 2)
				return
			}
			if err != nil || b != "OK" {
				t.Fatalf("with the guard off FLUSHALL should pass (%v) and the second client be granted the lock (%v %v)", err, b, berr)
			}
		})
	}
}

// With a backend of its own that is not a master, admin commands pass
// through to it.
func TestAdminCommandsOnOwnBackend(t *testing.T) {
	be := redistest.Start(t)
	e := newEnv(t, 3, func(c *proxy.Config) { c.Proxy.Backend = be.Addr })
	bc := be.Client()
	defer bc.Close()
	bc.Set(context.Background(), "x", "1", 0)
	mustEqual(t, "FLUSHALL", must(e.do("FLUSHALL")), any("OK"))
	if err := bc.Get(context.Background(), "x").Err(); err != redis.Nil {
		t.Fatalf("the backend was not flushed: %v", err)
	}
	mustEqual(t, "CONFIG SET", must(e.do("CONFIG", "SET", "maxmemory-policy", "allkeys-lru")), any("OK"))
}
