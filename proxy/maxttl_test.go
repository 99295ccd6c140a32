package proxy_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/redlock-proxy/redlock-proxy/internal/redistest"
	"github.com/redlock-proxy/redlock-proxy/proxy"
	"github.com/redlock-proxy/redlock-proxy/redlock/engine"
)

// A lock operation that would write a TTL above redlock.max_lock_ttl is
// refused with an error naming the setting, before anything is sent:
// acquires (SET NX with each expiry form, lock scripts, Redisson's,
// a semaphore's, LOCK.ACQUIRE), and writes of a TTL on a held lock (SET …
// PX, SETEX, GETEX, PEXPIRE and the like, extend scripts, an additive
// extend whose sum would pass the bound, LOCK.EXTEND). No master holds
// anything new, and the held lock keeps its TTL.
func TestMaxLockTTLRefused(t *testing.T) {
	e := newEnv(t, 3, nil) // max_lock_ttl: the default, 1h
	held, free := e.key("held"), e.key("free")
	mustEqual(t, "the held lock", must(e.do("SET", held, "A", "NX", "PX", 50*60*1000)), any("OK"))
	mustEqual(t, "the native lock", must(e.do("LOCK.ACQUIRE", held+":n", 50*60*1000, "TOKEN", "N")).([]any)[0], any("N"))
	years292 := int64(1<<63-1) / int64(time.Millisecond)
	at := time.Now().Add(2 * time.Hour)
	cmds := [][]any{
		{"SET", free, "B", "NX", "PX", years292},
		{"SET", free, "B", "NX", "PX", 3600001},
		{"SET", free, "B", "NX", "EX", 3601},
		{"SET", free, "B", "NX", "PXAT", at.UnixMilli()},
		{"SET", free, "B", "NX", "EXAT", at.Unix()},
		{"SET", held, "A", "XX", "PX", 3600001},
		{"SETEX", held, 3601, "A"},
		{"PSETEX", held, 3600001, "A"},
		{"GETEX", held, "PX", 3600001},
		{"PEXPIRE", held, years292},
		{"EXPIRE", held, 3601},
		{"PEXPIREAT", held, at.UnixMilli()},
		{"EXPIREAT", held, at.Unix()},
		{"EVAL", extendScript, 1, held, "A", 3600001},
		{"EVAL", redistest.RedisPyExtend, 1, held, "A", 20 * 60 * 1000, "0"}, // 50 min + 20 min
		{"EVAL", redistest.RedisPyExtend, 1, held, "A", int64(10 * 365 * 24 * time.Hour / time.Millisecond), "0"},
		{"EVAL", redistest.RedissonAcquireGe319, 1, free, 3600001, "R"},
		{"EVAL", redistest.RedissonRenewLe343, 1, held, 3600001, "A"},
		bsmArgsAny(bsmObtain, []string{free}, "B", "1", "3600001"),
		{"LOCK.ACQUIRE", free, 3600001},
		{"LOCK.EXTEND", held + ":n", "N", 3600001},
	}
	for _, c := range cmds {
		_, err := e.do(c...)
		if err == nil || !strings.HasPrefix(err.Error(), "ERR redlock-proxy: a lock TTL of ") || !strings.HasSuffix(err.Error(), " exceeds redlock.max_lock_ttl (1h)") {
			t.Errorf("%v: %v, want the max_lock_ttl error", c[:min(len(c), 3)], err)
		}
	}
	_, err := e.semAcq(e.semKey("s"), "S", 1, 3600001)
	if err == nil || !strings.Contains(err.Error(), "exceeds redlock.max_lock_ttl") {
		t.Errorf("semaphore acquire: %v", err)
	}
	for i, m := range e.masters {
		if n := userKeys(t, m); n != 2 {
			t.Errorf("master %d holds %d keys, want the 2 locks taken before", i, n)
		}
		c := m.Client()
		if p := c.PTTL(context.Background(), held).Val(); p > 50*time.Minute || p < 49*time.Minute {
			t.Errorf("master %d: the held lock's TTL became %s", i, p)
		}
		c.Close()
	}
	// At the bound itself, it is granted.
	mustEqual(t, "SET NX PX max_lock_ttl", must(e.do("SET", free, "B", "NX", "PX", 3600000)), any("OK"))
}

// A smaller bound is named as it is set, and checked against lease_ttl.
func TestMaxLockTTLConfig(t *testing.T) {
	e := newEnv(t, 3, func(c *proxy.Config) { c.Redlock.MaxLockTTL = proxy.Duration{Duration: 90 * time.Second} })
	_, err := e.do("SET", e.key("k"), "v", "NX", "PX", 90001)
	if err == nil || err.Error() != "ERR redlock-proxy: a lock TTL of 1m30.001s exceeds redlock.max_lock_ttl (1m30s)" {
		t.Errorf("got %v", err)
	}
	cfg := proxy.DefaultConfig()
	cfg.Redlock.Masters = []string{"127.0.0.1:1"}
	for _, c := range []struct {
		set  func(*proxy.Config)
		want string
	}{
		{func(c *proxy.Config) { c.Redlock.MaxLockTTL = proxy.Duration{} }, "redlock.max_lock_ttl"},
		{func(c *proxy.Config) { c.Redlock.MaxLockTTL = proxy.Duration{Duration: 8 * 24 * time.Hour} }, "redlock.max_lock_ttl"},
		{func(c *proxy.Config) { c.Redlock.MaxLockTTL = proxy.Duration{Duration: 5 * time.Second} }, "proxy.lease_ttl"},
		{func(c *proxy.Config) { c.Redlock.GuardWindow = proxy.Duration{Duration: -time.Second} }, "redlock.restart_guard_window"},
		{func(c *proxy.Config) { c.Redlock.GuardWindow = proxy.Duration{Duration: 8 * 24 * time.Hour} }, "redlock.restart_guard_window"},
	} {
		x := cfg
		c.set(&x)
		if err := x.Validate(); err == nil || !strings.HasPrefix(err.Error(), c.want) {
			t.Errorf("Validate: %v, want an error about %s", err, c.want)
		}
	}
	if info := must(e.do("INFO", "redlock")).(string); !strings.Contains(info, "max_lock_ttl=1m30s") {
		t.Errorf("the settings summary does not name max_lock_ttl: %s", info)
	}
}

// Writes that a quorum refused stretch nothing: a PEXPIRE of a key that
// does not exist, and an acquire every master refused, each with a TTL far
// beyond the window. Two masters restart empty; once their window has
// passed, both keys are granted at once.
func TestRefusedTTLWritesDoNotStretch(t *testing.T) {
	e, _ := newGuardedEnv(t, 3, time.Second, nil)
	absent, taken := e.key("absent"), e.key("taken")
	mustEqual(t, "PEXPIRE of an absent key", must(e.do("PEXPIRE", absent, 50*60*1000)), any(int64(0)))
	mustEqual(t, "GETEX of an absent key", must2(e.do("GETEX", absent, "PX", 50*60*1000)), any(nil))
	e.seed(taken, "other", 2*time.Second, 0, 1, 2)
	if v, err := e.do("SET", taken, "A", "NX", "PX", 50*60*1000); err != redis.Nil {
		t.Fatalf("acquire of a key every master holds: %v %v", v, err)
	}
	mustEqual(t, "PEXPIRE of a key held by another (not ours: the script refuses)", must(e.do("EVAL", extendScript, 1, taken, "A", 50*60*1000)), any(int64(0)))
	e.masters[0].Restart()
	e.masters[1].Restart()
	restarted := time.Now()
	eventually2(t, 5*time.Second, "the restarts seen and the window over", func() bool {
		_, _ = e.do("GET", absent)
		return strings.Count(must(e.do("INFO", "redlock")).(string), "restarts=1") == 2 && infoField(t, e, "masters_guarded") == "0"
	})
	if time.Since(restarted) > 3*time.Second {
		t.Error("the guard outlived its window")
	}
	for _, k := range []string{absent, taken} {
		if v, err := e.do("SET", k, "B", "NX", "PX", 5000); v != "OK" {
			t.Errorf("%s after the window: %v %v, want OK", k, v, err)
		}
	}
	if info := must(e.do("INFO", "redlock")).(string); strings.Contains(info, "guarded_keys=1") {
		t.Errorf("a refused write guards a key: %s", info)
	}
}

func must2(v any, err error) any {
	if err != nil && err != redis.Nil {
		panic(err)
	}
	return v
}

// A lock on key A taken for 2 s and extended to 30 s, then two of the
// three masters restart empty (the window is 1 s): 3 s after the grant a
// lock on key B is granted, and a second holder of A is refused with
// NOQUORUM naming the masters guarded on A and until when. The negative
// control: with the TTL stretch off, the same schedule grants A to a
// second holder while the first keeps it for 27 s more.
func TestLongLockGuardsOnlyItsKey(t *testing.T) {
	for _, stretch := range []bool{true, false} {
		name := map[bool]string{true: "on", false: "off_grants_A_twice"}[stretch]
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			e, _ := newGuardedEnv(t, 3, time.Second, func(c *proxy.Config) {
				if !stretch {
					c.GuardsOff = []string{string(engine.GuardTTLStretch)}
				}
			})
			a, b := e.key("A"), e.key("B")
			granted := time.Now()
			mustEqual(t, "A acquires", must(e.do("SET", a, "h1", "NX", "PX", 2000)), any("OK"))
			mustEqual(t, "A extends", must(e.do("PEXPIRE", a, 30000)), any(int64(1)))
			e.masters[0].Restart()
			e.masters[1].Restart()
			for time.Since(granted) < 3*time.Second {
				_, _ = e.do("GET", b) // the proxy reconnects, and sees the restarts
				time.Sleep(100 * time.Millisecond)
			}
			eventually2(t, 3*time.Second, "the window over", func() bool { return infoField(t, e, "masters_guarded") == "0" })
			if v, err := e.do("SET", b, "x", "NX", "PX", 5000); v != "OK" {
				t.Fatalf("B after the window: %v %v, want OK", v, err)
			}
			v, err := e.do("SET", a, "h2", "NX", "PX", 5000)
			t.Logf("A %s after the grant: %v %v", time.Since(granted).Round(time.Millisecond), v, err)
			if !stretch {
				if v != "OK" {
					t.Fatalf("with the stretch off a second holder should (unsafely) get A; got %v %v", v, err)
				}
				return
			}
			if v == "OK" {
				t.Fatal("a second holder got A 3 s into its 30 s")
			}
			want := fmt.Sprintf("NOQUORUM 1 of the masters can vote, 2 needed; 2 masters are under the restart guard: master0 and master1 on key '%s' for another ", a)
			if err == nil || !strings.HasPrefix(err.Error(), want) {
				t.Fatalf("got %v, want %q…", err, want)
			}
			if strings.Contains(err.Error(), e.masters[0].Addr) {
				t.Fatal("a master's address reached the client")
			}
			info := must(e.do("INFO", "redlock")).(string)
			if !strings.Contains(info, "master0:state=up,durable=0,guarded=0,guard_left_ms=0,guarded_keys=1,") {
				t.Errorf("INFO: %s", info)
			}
		})
	}
}
