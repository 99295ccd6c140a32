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

// redis-semaphore 5.8.0's Semaphore scripts, exactly as the library sends
// them (lib/semaphore/acquire/lua.js and lib/semaphore/refresh/lua.js):
// ARGV = limit, identifier, lockTimeout (ms), the client's Date.now(). Its
// release is ZREM. compat/node/semaphore.test.mjs drives the library itself.
const (
	semAcquire = "\n  local key = KEYS[1]\n  local limit = tonumber(ARGV[1])\n  local identifier = ARGV[2]\n  local lockTimeout = tonumber(ARGV[3])\n  local now = tonumber(ARGV[4])\n  local expiredTimestamp = now - lockTimeout\n\n  redis.call('zremrangebyscore', key, '-inf', expiredTimestamp)\n\n  if redis.call('zcard', key) < limit then\n    redis.call('zadd', key, now, identifier)\n    redis.call('pexpire', key, lockTimeout)\n    return 1\n  else\n    return 0\n  end"
	semRefresh = "\n  local key = KEYS[1]\n  local limit = tonumber(ARGV[1])\n  local identifier = ARGV[2]\n  local lockTimeout = tonumber(ARGV[3])\n  local now = tonumber(ARGV[4])\n  local expiredTimestamp = now - lockTimeout\n\n  redis.call('zremrangebyscore', key, '-inf', expiredTimestamp)\n\n  if redis.call('zscore', key, identifier) then\n    redis.call('zadd', key, now, identifier)\n    redis.call('pexpire', key, lockTimeout)\n    return 1\n  else\n    return 0\n  end"
	// Their SHA1s, which the library sends first, by EVALSHA.
	semAcquireSHA = "43ebdb49120d170e08af560cb4e46e36f8585936"
	semRefreshSHA = "999a49a1d07671a8027165641001f5bad44608b3"
)

// semKey is a semaphore key unique to the test, in the library's form.
func (e *env) semKey(suffix string) string { return "semaphore:" + e.key(suffix) }

// semAcq runs the library's acquire of a permit of key (limit permits) for
// id, for ttl ms.
func (e *env) semAcq(key, id string, limit, ttl int) (any, error) {
	return e.do("EVAL", semAcquire, 1, key, limit, id, ttl, time.Now().UnixMilli())
}

func (e *env) semRefresh(key, id string, limit, ttl int) (any, error) {
	return e.do("EVAL", semRefresh, 1, key, limit, id, ttl, time.Now().UnixMilli())
}

// seedPermits makes members hold permits of key on master m for 10 s, in
// the proxy's form: scored by their expiry on the master's clock (the
// masters run on this machine).
func seedPermits(t *testing.T, m *redis.Client, key string, members ...string) {
	t.Helper()
	ctx := context.Background()
	exp := float64(time.Now().Add(10 * time.Second).UnixMilli())
	for _, id := range members {
		if err := m.ZAdd(ctx, key, redis.Z{Score: exp, Member: id}).Err(); err != nil {
			t.Fatal(err)
		}
	}
	m.PExpire(ctx, key, 10*time.Second)
}

// permitsOn counts the masters on which id is a member of key.
func (e *env) permitsOn(key, id string) int {
	n := 0
	for _, m := range e.masters {
		c := m.Client()
		if _, err := c.ZScore(context.Background(), key, id).Result(); err == nil {
			n++
		}
		c.Close()
	}
	return n
}

// Every subset of 3 and of 5 masters full (the others one member short of
// full), for every limit up to N: a permit is granted exactly when the
// masters with room reach the semaphore's quorum, PermitQuorum(N, limit)
// (2 of 3 for limit 1, 3 of 3 above; 3, 4, 4, 5, 5 of 5), and is then on
// exactly those masters; a refused one is on none, and the other members
// are as they were.
func TestSemaphoreQuorumOnEverySubset(t *testing.T) {
	for _, n := range []int{3, 5} {
		t.Run(fmt.Sprintf("%d_masters", n), func(t *testing.T) {
			e := newEnv(t, n, func(c *proxy.Config) {
				c.Redlock.RetryCount = 0
				c.Redlock.NodeTimeout = proxy.Duration{Duration: 2 * time.Second} // every master answers, however busy the machine
			})
			ms := make([]*redis.Client, n)
			for i, m := range e.masters {
				ms[i] = m.Client()
				defer ms[i].Close()
			}
			ctx := context.Background()
			for limit := 1; limit <= n; limit++ {
				q := engine.PermitQuorum(n, int64(limit))
				for mask := 0; mask < 1<<n; mask++ {
					key := e.semKey(fmt.Sprintf("%d:%d", limit, mask))
					free := 0
					var others []string
					for i := 0; i < limit; i++ {
						others = append(others, fmt.Sprintf("o%d", i))
					}
					for i := range ms {
						if mask&(1<<i) != 0 {
							seedPermits(t, ms[i], key, others...)
						} else {
							free++
							if limit > 1 {
								seedPermits(t, ms[i], key, others[:limit-1]...)
							}
						}
					}
					v, err := e.semAcq(key, "tok", limit, 10000)
					want := free >= q
					if err != nil || v != map[bool]any{true: int64(1), false: int64(0)}[want] {
						t.Fatalf("limit %d, full masters %05b (%d with room, quorum %d): %v %v", limit, mask, free, q, v, err)
					}
					on := 0
					if want {
						on = free
					}
					eventually(t, fmt.Sprintf("limit %d, mask %05b: the token on %d masters", limit, mask, on), func() bool { return e.permitsOn(key, "tok") == on })
					for i := range ms {
						full := mask&(1<<i) != 0
						got, _ := ms[i].ZCard(ctx, key).Result()
						wantCard := int64(limit) // full, or one short plus the token
						if !full && !want {
							wantCard = int64(limit - 1)
						}
						if got != wantCard {
							t.Fatalf("limit %d, mask %05b: master %d holds %d members, want %d", limit, mask, i, got, wantCard)
						}
					}
				}
			}
		})
	}
}

// The semaphore's quorum is what keeps it to its limit. A semaphore of 2
// permits on 3 masters; three contenders A, B, C each find one master full
// (of members of clients whose acquires failed elsewhere, standing in for
// a master that did not answer), and each is admitted by the other two:
// A on masters 0 and 1, B on 1 and 2, C on 2 and 0, every master holding
// two members. With the plain majority (guard permit-quorum off) all three
// are granted, three holders of two permits at once; with the semaphore's
// quorum (3 of 3) none of them is, and nothing of them is left.
func TestSemaphoreMajorityAdmitsOneTooMany(t *testing.T) {
	for _, guard := range []bool{true, false} {
		t.Run(map[bool]string{true: "on", false: "off_admits_three_holders_of_two_permits"}[guard], func(t *testing.T) {
			e := newEnv(t, 3, func(c *proxy.Config) {
				c.Redlock.RetryCount = 0
				c.Redlock.NodeTimeout = proxy.Duration{Duration: 2 * time.Second} // every master answers, however busy the machine
				if !guard {
					c.GuardsOff = []string{string(engine.GuardPermitQuorum)}
				}
			})
			ctx := context.Background()
			key := e.semKey("s")
			granted := 0
			for i, who := range []string{"A", "B", "C"} {
				m := e.masters[(i+2)%3].Client() // A finds master 2 full, B master 0, C master 1
				card, _ := m.ZCard(ctx, key).Result()
				var standIns []string
				for j := card; j < 2; j++ {
					standIns = append(standIns, fmt.Sprintf("x%d", j))
				}
				seedPermits(t, m, key, standIns...)
				v, err := e.semAcq(key, who, 2, 10000)
				if err != nil {
					t.Fatalf("%s: %v", who, err)
				}
				if v == int64(1) {
					granted++
				}
				// The reply came at the quorum; a ZREM (of no member) waits
				// until the acquire has reached every master (WaitWrites),
				// so that the full master refused it before its stand-ins go.
				must(e.do("ZREM", key, "settle"))
				if len(standIns) > 0 {
					m.ZRem(ctx, key, standIns)
				}
				m.Close()
			}
			held := 0 // holders whose permit a majority of masters hold, at once
			for _, who := range []string{"A", "B", "C"} {
				if e.permitsOn(key, who) >= 2 {
					held++
				}
			}
			t.Logf("granted %d, held on a majority at once: %d", granted, held)
			switch {
			case guard && (granted > 0 || held > 0):
				t.Fatalf("with the semaphore's quorum: %d granted, %d left on a majority; want none", granted, held)
			case !guard && (granted != 3 || held != 3):
				t.Fatalf("with the majority the three should (unsafely) hold two permits; granted %d, held %d", granted, held)
			}
		})
	}
}

// A refused acquire leaves its member on no master: taken back where it
// was admitted, and on a master that answered only after the node timeout
// (its admission lands late, the rollback after it).
func TestSemaphoreRefusedLeavesNothing(t *testing.T) {
	var late *redistest.Relay
	e := newEnv(t, 3, func(c *proxy.Config) {
		late = redistest.NewRelay(t, c.Redlock.Masters[2])
		c.Redlock.Masters[2] = late.Addr()
		c.Redlock.RetryCount = 0
	})
	key := e.semKey("s")
	mustEqual(t, "warm", must(e.semAcq(e.semKey("warm"), "w", 1, 1000)), any(int64(1)))
	m0 := e.masters[0].Client()
	defer m0.Close()
	seedPermits(t, m0, key, "o1", "o2") // full for 2 permits: the quorum (3 of 3) is out of reach
	// Master 2's writes to the key, as they land: its keyspace events.
	ctx := context.Background()
	m2 := e.masters[2].Client()
	defer m2.Close()
	must(m2.ConfigSet(ctx, "notify-keyspace-events", "Kz").Result())
	sub := m2.Subscribe(ctx, "__keyspace@0__:"+key)
	defer sub.Close()
	if _, err := sub.Receive(ctx); err != nil {
		t.Fatal(err)
	}
	late.Delay.Store(int64(300 * time.Millisecond)) // each way; node timeout 200 ms
	mustEqual(t, "acquire with one master full and one late", must(e.semAcq(key, "tok", 2, 10000)), any(int64(0)))
	// Master 2 gets the admission late, then its rollback, tried again
	// until it lands.
	select {
	case m := <-sub.Channel():
		mustEqual(t, "master 2's first write of the key", m.Payload, "zadd")
	case <-time.After(8 * time.Second):
		t.Fatal("the late admission did not land on master 2")
	}
	late.Delay.Store(0) // the rollback's tries get through from now on
	deadline := time.Now().Add(8 * time.Second)
	for e.permitsOn(key, "tok") != 0 {
		if time.Now().After(deadline) {
			t.Fatalf("the refused member is left on %d masters", e.permitsOn(key, "tok"))
		}
		time.Sleep(5 * time.Millisecond)
	}
	mustEqual(t, "the other members", e.permitsOn(key, "o1")+e.permitsOn(key, "o2"), 2)
}

// Acquire up to the limit, a contender refused, refresh on the quorum
// (and "not refreshed" for a member on a minority only), ZREM from every
// master, the contender admitted after it; other sorted-set commands on
// the semaphore are refused, EXISTS, PTTL and DEL answer for it whole.
func TestSemaphoreCycle(t *testing.T) {
	own := ownBackend(t) // the sorted sets that are not semaphores
	e := newEnv(t, 3, func(c *proxy.Config) { c.Proxy.Backend = own })
	ctx := context.Background()
	key := e.semKey("s")
	mustEqual(t, "A", must(e.semAcq(key, "A", 2, 10000)), any(int64(1)))
	mustEqual(t, "B", must(e.semAcq(key, "B", 2, 2000)), any(int64(1)))
	mustEqual(t, "C while two hold it", must(e.semAcq(key, "C", 2, 1000)), any(int64(0)))
	eventually(t, "A and B on every master", func() bool { return e.permitsOn(key, "A") == 3 && e.permitsOn(key, "B") == 3 })
	mustEqual(t, "no C left", e.permitsOn(key, "C"), 0)

	mustEqual(t, "refresh A", must(e.semRefresh(key, "A", 2, 30000)), any(int64(1)))
	eventually(t, "A renewed on every master", func() bool {
		n := 0
		for _, m := range e.masters {
			c := m.Client()
			if s, err := c.ZScore(ctx, key, "A").Result(); err == nil && s > float64(time.Now().Add(25*time.Second).UnixMilli()) {
				n++
			}
			c.Close()
		}
		return n == 3
	})
	mustEqual(t, "refresh C", must(e.semRefresh(key, "C", 2, 30000)), any(int64(0)))
	m0 := e.masters[0].Client()
	defer m0.Close()
	seedPermits(t, m0, key+":m", "M") // a permit on one master only
	mustEqual(t, "refresh of a permit held on a minority", must(e.semRefresh(key+":m", "M", 2, 30000)), any(int64(0)))
	mustEqual(t, "ZREM of a permit held on a minority", must(e.do("ZREM", key+":m", "M")), any(int64(0)))
	eventually(t, "the minority copy removed", func() bool { return e.permitsOn(key+":m", "M") == 0 })

	time.Sleep(2100 * time.Millisecond) // B expires, on each master's clock
	mustEqual(t, "C once B expired", must(e.semAcq(key, "C", 2, 10000)), any(int64(1)))
	mustEqual(t, "D while A and C hold it", must(e.semAcq(key, "D", 2, 10000)), any(int64(0)))
	mustEqual(t, "ZREM A", must(e.do("ZREM", key, "A")), any(int64(1)))
	eventually(t, "A gone from every master", func() bool { return e.permitsOn(key, "A") == 0 })
	mustEqual(t, "ZREM A again", must(e.do("ZREM", key, "A")), any(int64(0)))
	mustEqual(t, "D after A left", must(e.semAcq(key, "D", 2, 10000)), any(int64(1)))

	for _, cmd := range [][]any{{"ZCARD", key}, {"ZRANGE", key, 0, -1}, {"ZADD", key, 1, "E"}, {"ZREMRANGEBYSCORE", key, "-inf", "+inf"},
		{"ZPOPMIN", key}, {"ZUNIONSTORE", key, 1, "other"}, {"ZMPOP", 1, key, "MIN"}, {"BZPOPMIN", key, 1}} {
		if _, err := e.do(cmd...); err == nil || !strings.Contains(err.Error(), "semaphore's permits") {
			t.Errorf("%v: %v, want refused", cmd, err)
		}
	}
	mustEqual(t, "C and D still on every master", e.permitsOn(key, "C")+e.permitsOn(key, "D"), 6)
	// Sorted sets that are not semaphores pass through.
	mustEqual(t, "ZADD of another key", must(e.do("ZADD", e.key("z"), 1, "m")), any(int64(1)))
	mustEqual(t, "ZCARD of another key", must(e.do("ZCARD", e.key("z"))), any(int64(1)))
	mustEqual(t, "ZREM of another key", must(e.do("ZREM", e.key("z"), "m")), any(int64(1)))

	mustEqual(t, "EXISTS", must(e.do("EXISTS", key)), any(int64(1)))
	if p := must(e.do("PTTL", key)).(int64); p <= 0 || p > 10000 {
		t.Fatalf("PTTL %d", p)
	}
	mustEqual(t, "DEL", must(e.do("DEL", key)), any(int64(1)))
	eventually(t, "gone", func() bool { return e.permitsOn(key, "C")+e.permitsOn(key, "D") == 0 })
}

// Inside MULTI, ZREM of a semaphore's permits is refused as every lock
// command is (one master's transaction cannot carry it); ZREM of another
// key is queued.
func TestSemaphoreZRemInMulti(t *testing.T) {
	e := newEnv(t, 3, nil)
	key := e.semKey("s")
	mustEqual(t, "A", must(e.semAcq(key, "A", 1, 10000)), any(int64(1)))
	var zrem, other *redis.IntCmd
	_, err := e.c.TxPipelined(context.Background(), func(p redis.Pipeliner) error {
		zrem = p.ZRem(context.Background(), key, "A")
		other = p.ZRem(context.Background(), e.key("z"), "m")
		return nil
	})
	if err == nil || zrem.Err() == nil || !strings.Contains(zrem.Err().Error(), "MULTI") {
		t.Fatalf("ZREM of a semaphore in MULTI: %v %v (other: %v)", err, zrem.Err(), other.Err())
	}
	mustEqual(t, "A still on every master", e.permitsOn(key, "A"), 3)
}

// Replies are what one Redis running the library's scripts answers, byte
// for byte, in RESP2 and RESP3: 1 and 0 from acquire and refresh, ZREM's
// count, through a cycle that fills the semaphore, refreshes, releases
// (one member and two at once) and takes it again by EVALSHA.
func TestSemaphoreLikeRedis(t *testing.T) {
	// Limit 2 needs every master (3 of 3): each must answer in time,
	// however busy the machine.
	e := newEnv(t, 3, func(c *proxy.Config) { c.Redlock.NodeTimeout = proxy.Duration{Duration: 2 * time.Second} })
	plain := startPlain(t)
	for _, hello := range []string{"2", "3"} {
		key := e.semKey("resp" + hello)
		now := fmt.Sprint(time.Now().UnixMilli())
		acq := func(id string) []string { return []string{"EVAL", semAcquire, "1", key, "2", id, "10000", now} }
		cmds := [][]string{
			acq("A"), acq("B"), acq("C"),
			{"EVAL", semRefresh, "1", key, "2", "A", "20000", now},
			{"EVAL", semRefresh, "1", key, "2", "C", "20000", now},
			{"ZREM", key, "A"}, {"ZREM", key, "A"}, {"ZREM", key, "B", "C"},
			{"EVALSHA", semAcquireSHA, "1", key, "2", "C", "10000", now},
			{"EVALSHA", semAcquireSHA, "1", key, "2", "D", "10000", now},
			acq("E"),
			{"EXISTS", key}, {"DEL", key}, {"EXISTS", key},
		}
		run := func(addr string) []string { // after HELLO, whose reply is not compared
			return rawReplies(t, addr, append([][]string{{"HELLO", hello}}, cmds...)...)[1:]
		}
		want, got := run(plain), run(e.addr)
		for i := range cmds {
			if got[i] != want[i] {
				t.Errorf("RESP%s, %s %s: proxy %q, Redis %q", hello, cmds[i][0], strings.Join(cmds[i][3:], " "), got[i], want[i])
			}
		}
	}
}

// A proxy that never saw the scripts runs them by their SHA1s, as the
// library sends them first; SCRIPT EXISTS knows them.
func TestSemaphoreByEVALSHAWithoutLoad(t *testing.T) {
	e := newEnv(t, 3, nil)
	key := e.semKey("s")
	now := time.Now().UnixMilli()
	mustEqual(t, "acquire by SHA", must(e.do("EVALSHA", semAcquireSHA, 1, key, 1, "A", 10000, now)), any(int64(1)))
	eventually(t, "on every master", func() bool { return e.permitsOn(key, "A") == 3 })
	mustEqual(t, "a contender by SHA", must(e.do("EVALSHA", semAcquireSHA, 1, key, 1, "B", 10000, now)), any(int64(0)))
	mustEqual(t, "refresh by SHA", must(e.do("EVALSHA", semRefreshSHA, 1, key, 1, "A", 10000, now)), any(int64(1)))
	ex := must(e.do("SCRIPT", "EXISTS", semAcquireSHA, semRefreshSHA)).([]any)
	mustEqual(t, "SCRIPT EXISTS", fmt.Sprint(ex), "[1 1]")
}

// Arguments the library's script would fail on are refused with an error
// that names the argument, and nothing is written; a limit below 1 admits
// no one, as the script answers.
func TestSemaphoreBadArguments(t *testing.T) {
	e := newEnv(t, 3, nil)
	key := e.semKey("s")
	now := time.Now().UnixMilli()
	for _, c := range []struct {
		args []any
		err  string
	}{
		{[]any{"EVAL", semAcquire, 1, key, "two", "A", 10000, now}, "ERR redlock-proxy: the 'redis-semaphore Semaphore acquire' script needs a number of permits in ARGV[1]"},
		{[]any{"EVAL", semAcquire, 1, key, "1.5", "A", 10000, now}, "ERR redlock-proxy: the 'redis-semaphore Semaphore acquire' script needs a number of permits in ARGV[1]"},
		{[]any{"EVAL", semAcquire, 1, key, 2, "A", "soon", now}, "ERR redlock-proxy: the 'redis-semaphore Semaphore acquire' script needs a TTL in ARGV[3]"},
		{[]any{"EVAL", semAcquire, 1, key, 2, "A", 0, now}, "ERR redlock-proxy: the 'redis-semaphore Semaphore acquire' script needs a TTL in ARGV[3]"},
		{[]any{"EVAL", semAcquire, 1, key, 2}, "ERR redlock-proxy: the 'redis-semaphore Semaphore acquire' script needs ARGV[2]"},
		{[]any{"EVAL", semRefresh, 1, key, "x", "A", 10000, now}, "ERR redlock-proxy: the 'redis-semaphore Semaphore refresh' script needs a number of permits in ARGV[1]"},
		{[]any{"EVAL", semAcquire, 2, key, key + ":2", 2, "A", 10000, now}, "ERR redlock-proxy: the 'redis-semaphore Semaphore acquire' script takes one key"},
		{[]any{"ZREM", key}, "ERR wrong number of arguments for 'zrem' command"},
	} {
		if _, err := e.do(c.args...); err == nil || err.Error() != c.err {
			t.Errorf("%v: %v, want %q", c.args[3:], err, c.err)
		}
	}
	mustEqual(t, "limit 0", must(e.do("EVAL", semAcquire, 1, key, 0, "A", 10000, now)), any(int64(0)))
	mustEqual(t, "limit -1", must(e.do("EVAL", semAcquire, 1, key, -1, "A", 10000, now)), any(int64(0)))
	for i, m := range e.masters {
		if n := userKeys(t, m); n != 0 {
			t.Errorf("master %d holds %d keys after refused arguments", i, n)
		}
	}
}

// A connection's pipeline of acquires and releases of one semaphore is
// answered in order, each after the ones before it took effect, as one
// Redis answers it.
func TestSemaphorePipelined(t *testing.T) {
	e := newEnv(t, 3, nil)
	key := e.semKey("s")
	now := time.Now().UnixMilli()
	acq := func(id string) []any { return []any{"EVAL", semAcquire, 1, key, 1, id, 10000, now} }
	r := pipeline(t, e.c, acq("A"), acq("B"), []any{"ZREM", key, "A"}, acq("B"), []any{"ZREM", key, "B"}, []any{"ZREM", key, "B"}, acq("C"))
	want := []int64{1, 0, 1, 1, 1, 0, 1}
	for i, c := range r {
		if v, err := c.Result(); err != nil || v != want[i] {
			t.Fatalf("reply %d (%v): %v %v, want %d", i, c.Args()[0], v, err, want[i])
		}
	}
	eventually(t, "C alone, on every master", func() bool {
		return e.permitsOn(key, "C") == 3 && e.permitsOn(key, "A")+e.permitsOn(key, "B") == 0
	})
}

// A library's own permit scripts, declared in [[scripts]] with the
// arguments in another order, run as the built-in ones do.
func TestCustomPermitScripts(t *testing.T) {
	const (
		acquire = `-- KEYS[1] the semaphore; ARGV[1] token, ARGV[2] ttl ms, ARGV[3] limit
local n = redis.call('zcard', KEYS[1]) if n < tonumber(ARGV[3]) then redis.call('zadd', KEYS[1], 0, ARGV[1]) return 'yes' end return 'no'`
		refresh = `if redis.call('zscore', KEYS[1], ARGV[1]) then redis.call('pexpire', KEYS[1], ARGV[2]) return 'yes' end return 'no'`
		release = `return redis.call('zrem', KEYS[1], ARGV[1]) == 1 and 'yes' or 'no'`
	)
	e := newEnv(t, 3, func(c *proxy.Config) {
		c.Scripts = []proxy.ScriptConfig{
			{File: "acquire.lua", Source: acquire, Op: "permit_acquire", TokenArg: 1, TTLArg: 2, LimitArg: 3, OK: int64(7), NotOwned: int64(-7)},
			{File: "refresh.lua", Source: refresh, Op: "permit_refresh", TokenArg: 1, TTLArg: 2, LimitArg: 3, OK: int64(7), NotOwned: int64(-7)},
			{File: "release.lua", Source: release, Op: "permit_release", TokenArg: 1, OK: int64(7), NotOwned: int64(-7)},
		}
	})
	key := e.key("permits") // not redis-semaphore's form: its scripts make it a semaphore
	mustEqual(t, "A", must(e.do("EVAL", acquire, 1, key, "A", 10000, 2)), any(int64(7)))
	mustEqual(t, "B", must(e.do("EVAL", acquire, 1, key, "B", 10000, 2)), any(int64(7)))
	mustEqual(t, "C", must(e.do("EVAL", acquire, 1, key, "C", 10000, 2)), any(int64(-7)))
	mustEqual(t, "refresh A", must(e.do("EVAL", refresh, 1, key, "A", 30000, 2)), any(int64(7)))
	mustEqual(t, "refresh C", must(e.do("EVAL", refresh, 1, key, "C", 30000, 2)), any(int64(-7)))
	mustEqual(t, "release A", must(e.do("EVAL", release, 1, key, "A")), any(int64(7)))
	mustEqual(t, "release A again", must(e.do("EVAL", release, 1, key, "A")), any(int64(-7)))
	eventually(t, "A gone, B on every master", func() bool { return e.permitsOn(key, "A") == 0 && e.permitsOn(key, "B") == 3 })
	mustEqual(t, "C after A left", must(e.do("EVAL", acquire, 1, key, "C", 10000, 2)), any(int64(7)))
}

// What a semaphore's quorum costs: with one master of three down, a
// semaphore of one permit (quorum 2) still works, one of two permits
// (quorum 3) answers NOQUORUM to acquires and to its holder's refresh, and
// writes nothing.
func TestSemaphoreWithAMasterDown(t *testing.T) {
	e := newEnv(t, 3, nil)
	one, two := e.semKey("one"), e.semKey("two")
	mustEqual(t, "a holder of two permits", must(e.semAcq(two, "A", 2, 10000)), any(int64(1)))
	e.masters[2].Kill()
	mustEqual(t, "limit 1", must(e.semAcq(one, "A", 1, 10000)), any(int64(1)))
	mustEqual(t, "limit 1, refresh", must(e.semRefresh(one, "A", 1, 10000)), any(int64(1)))
	if _, err := e.semAcq(two, "B", 2, 10000); !isNoQuorum(err) {
		t.Fatalf("limit 2, acquire: %v, want NOQUORUM", err)
	}
	if _, err := e.semRefresh(two, "A", 2, 10000); !isNoQuorum(err) {
		t.Fatalf("limit 2, the holder's refresh: %v, want NOQUORUM", err)
	}
	for i, m := range e.masters[:2] {
		c := m.Client()
		if _, err := c.ZScore(context.Background(), two, "B").Result(); err != redis.Nil {
			t.Errorf("master %d: B's permit %v, want none", i, err)
		}
		c.Close()
	}
}
