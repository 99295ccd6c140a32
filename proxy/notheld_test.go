package proxy_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/redlock-proxy/redlock-proxy/internal/redistest"
	"github.com/redlock-proxy/redlock-proxy/proxy"
	"github.com/redlock-proxy/redlock-proxy/redlock/engine"
)

// newGuardedEnv starts n masters, each behind a relay, and a proxy with the
// restart guard on (window w) in front of the relays, and waits until the
// masters, younger than the window when the proxy first sees them, vote.
func newGuardedEnv(t *testing.T, n int, w time.Duration, mutate func(*proxy.Config)) (*env, []*redistest.Relay) {
	t.Helper()
	var relays []*redistest.Relay
	e := newEnv(t, n, func(c *proxy.Config) {
		c.Redlock.RestartGuard = true
		c.Redlock.GuardWindow = proxy.Duration{Duration: w}
		for i, m := range c.Redlock.Masters {
			r := redistest.NewRelay(t, m)
			relays = append(relays, r)
			c.Redlock.Masters[i] = r.Addr()
		}
		if mutate != nil {
			mutate(c)
		}
	})
	eventually2(t, w+3*time.Second, "the masters vote", func() bool { return infoField(t, e, "masters_guarded") == "0" })
	return e, relays
}

// isNoQuorum reports whether err is a NOQUORUM error reply.
func isNoQuorum(err error) bool { return err != nil && strings.HasPrefix(err.Error(), "NOQUORUM") }

// "Not held" needs a quorum of masters saying so. A lock is held on masters
// 0 and 1 (master 2 missed it), and master 1 restarts empty: the restart
// guard rightly refuses it to anyone else, and reads, the unlock script and
// an extend must not tell its holder it lost it either: their answer cannot
// be known, NOQUORUM. With the guard off, master 1's "absent" counts, and
// each answers "not held" (nil, −2, 0) to a holder whose lock nobody else
// can take.
func TestNotHeldNeedsQuorum(t *testing.T) {
	for _, guard := range []bool{true, false} {
		name := map[bool]string{true: "on", false: "off_tells_the_holder_it_lost_the_lock"}[guard]
		t.Run(name, func(t *testing.T) {
			e, relays := newGuardedEnv(t, 3, 2*time.Second, func(c *proxy.Config) {
				if !guard {
					c.GuardsOff = []string{string(engine.GuardNotHeldNeedsQuorum)}
				}
			})
			ctx := context.Background()
			held, renewed := e.key("held"), e.key("renewed")
			for _, k := range []string{held, renewed} {
				mustEqual(t, "acquire", must(e.do("SET", k, "A", "NX", "PX", 60000)), any("OK"))
				eventually(t, "on every master", func() bool { return count(e.onMasters(k), "A") == 3 })
			}
			m2 := e.masters[2].Client()
			m2.Del(ctx, held) // master 2 missed it
			m2.Close()
			e.masters[1].Restart()
			_, _ = e.do("GET", held) // the proxy's connection to master 1 breaks here, or is renewed

			mustEqual(t, "another token", nilOrNoQuorum(t)(e.do("SET", held, "B", "NX", "PX", 60000)), true)
			get, errGet := e.do("GET", held)
			pttl, errPTTL := e.do("PTTL", held)
			exists, errExists := e.do("EXISTS", held)
			// Master 2 stalls past the node timeout: the extend is renewed on
			// master 0, refused by the guarded master 1, unanswered by 2.
			relays[2].Delay.Store(int64(400 * time.Millisecond))
			ext, errExt := e.do("EVAL", extendScript, 1, renewed, "A", 60000)
			relays[2].Delay.Store(0)
			time.Sleep(500 * time.Millisecond) // what master 2 held back arrives
			unlock, errUnlock := e.do("EVAL", unlockSpellings[0], 1, held, "A")
			t.Logf("GET %v %v; PTTL %v %v; EXISTS %v %v; extend %v %v; unlock %v %v", get, errGet, pttl, errPTTL, exists, errExists, ext, errExt, unlock, errUnlock)
			if guard {
				for what, err := range map[string]error{"GET": errGet, "PTTL": errPTTL, "EXISTS": errExists, "extend": errExt, "unlock": errUnlock} {
					if !isNoQuorum(err) {
						t.Errorf("%s of a lock whose state cannot be known: %v, want NOQUORUM", what, err)
					}
				}
				return
			}
			if errGet != redis.Nil || pttl != int64(-2) || exists != int64(0) || ext != int64(0) || unlock != int64(0) {
				t.Errorf("with the guard off the holder should be told it lost the lock")
			}
		})
	}
}

// nilOrNoQuorum reads the reply of an acquire that must not be granted:
// true for nil or NOQUORUM.
func nilOrNoQuorum(t *testing.T) func(any, error) bool {
	return func(v any, err error) bool {
		t.Helper()
		switch {
		case err == redis.Nil || isNoQuorum(err):
			return true
		case err != nil:
			t.Fatal(err)
		}
		return false
	}
}
