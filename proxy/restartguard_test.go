package proxy_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/redlock-proxy/redlock-proxy/proxy"
)

func infoField(t *testing.T, e *env, field string) string {
	t.Helper()
	info := must(e.do("INFO", "redlock")).(string)
	for _, line := range strings.Split(info, "\r\n") {
		if v, ok := strings.CutPrefix(line, field+":"); ok {
			return v
		}
	}
	t.Fatalf("INFO has no %s", field)
	return ""
}

// The seeds' r0/r1/r2 example: A holds a lock on two of three masters, one
// of those restarts empty, and B asks for the same lock. Without the guard B
// is granted it while A still holds it; with the guard B is refused.
func TestRestartGuard(t *testing.T) {
	for _, guard := range []bool{true, false} {
		name := map[bool]string{true: "on", false: "off_shows_the_violation"}[guard]
		t.Run(name, func(t *testing.T) {
			window := 3 * time.Second
			e := newEnv(t, 3, func(c *proxy.Config) {
				c.Redlock.RestartGuard = guard
				c.Redlock.GuardWindow = proxy.Duration{Duration: window}
				c.Redlock.RetryCount = 2
			})
			ctx := context.Background()
			key := e.key("k")
			if guard {
				// The masters are younger than the window: none may vote yet.
				_, err := e.do("SET", key, "early", "NX", "PX", 1000)
				if err == nil || !strings.HasPrefix(err.Error(), "NOQUORUM") {
					t.Fatalf("acquire while every master is guarded: %v", err)
				}
				eventually2(t, window+2*time.Second, "guards expire", func() bool { return infoField(t, e, "masters_guarded") == "0" })
			}
			mustEqual(t, "A acquires", must(e.do("SET", key, "A", "NX", "PX", 60000)), any("OK"))
			eventually(t, "A on every master", func() bool { return count(e.onMasters(key), "A") == 3 })
			c := e.masters[2].Client()
			c.Del(ctx, key) // A holds r0 and r1 only
			c.Close()
			e.masters[0].Restart() // r0 comes back empty
			v, err := e.do("SET", key, "B", "NX", "PX", 60000)
			if err != nil && err != redis.Nil && !strings.HasPrefix(err.Error(), "NOQUORUM") {
				t.Fatal(err)
			}
			if guard {
				if v == "OK" {
					t.Fatal("B was granted a lock that A still holds")
				}
				if infoField(t, e, "masters_guarded") != "1" {
					t.Fatal("INFO does not show the restarted master as guarded")
				}
			} else if v != "OK" {
				t.Fatalf("without the guard B should (unsafely) win; got %v %v", v, err)
			}
		})
	}
}

func eventually2(t *testing.T, d time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not true after %s", what, d)
		}
		time.Sleep(50 * time.Millisecond)
	}
}
