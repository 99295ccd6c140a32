package proxy_test

import (
	"context"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/redlock-proxy/redlock-proxy/internal/redistest"
	"github.com/redlock-proxy/redlock-proxy/proxy"
)

const reserved = "are reserved for the proxy's own records"

// The proxy's records on the masters (keys beginning "redlock-proxy:") are
// refused to every command that names them, wherever the key is among its
// arguments, in every configuration: through the quorum's commands, the
// backend's, scripts' declared keys, LOCK.*, MULTI and a pipeline; and
// nothing reaches a master. SCAN, KEYS and RANDOMKEY leave them out on a
// voting backend, where they are.
func TestReservedKeysRefused(t *testing.T) {
	for _, c := range []struct {
		name    string
		keys    []string
		ownBack bool
	}{
		{"every_key_voting", []string{"*"}, false},
		{"prefix_voting", []string{"lock:*"}, false},
		{"every_key_own_backend", []string{"*"}, true},
		{"prefix_own_backend", []string{"lock:*"}, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			var own string
			if c.ownBack {
				own = redistest.Start(t).Addr
			}
			e := newEnv(t, 3, func(cfg *proxy.Config) { cfg.Proxy.LockKeys, cfg.Proxy.Backend = c.keys, own })
			ctx := context.Background()
			rec, fence := "redlock-proxy:dataset", "redlock-proxy:fence:"+e.key("f")
			before := make([]string, len(e.masters))
			for i, m := range e.masters {
				mc := m.Client()
				mc.HSetNX(ctx, rec, "id", "seeded") // without the restart guard no proxy writes one
				before[i] = mc.HGet(ctx, rec, "id").Val()
				mc.Close()
			}
			refused := [][]any{
				{"GET", rec}, {"DEL", rec}, {"UNLINK", "x", rec}, {"EXISTS", rec}, {"PTTL", rec},
				{"PEXPIRE", rec, 1}, {"SET", rec, "x"}, {"SET", fence, "1", "NX", "PX", 1000}, {"SETNX", fence, 1},
				{"HGETALL", rec}, {"HSET", rec, "id", "old"}, {"HGET", rec, "id"}, {"TYPE", rec},
				{"INCR", fence}, {"RENAME", "x", fence}, {"COPY", rec, "x"}, {"OBJECT", "ENCODING", rec},
				{"MSET", "x", "1", fence, "2"}, {"DUMP", rec},
				{"EVAL", "return 1", 1, rec}, {"EVAL_RO", "return 1", 1, rec}, {"FCALL", "f", 1, rec},
				{"LOCK.ACQUIRE", fence, 1000},
			}
			for _, args := range refused {
				if _, err := e.do(args...); err == nil || !strings.Contains(err.Error(), reserved) {
					t.Errorf("%v: %v, want refused", args, err)
				}
			}
			tx := e.client()
			defer tx.Close()
			_, err := tx.TxPipelined(ctx, func(p redis.Pipeliner) error {
				p.Ping(ctx)
				p.Del(ctx, rec)
				return nil
			})
			if err == nil || !strings.Contains(err.Error(), "EXECABORT") {
				t.Errorf("MULTI with a DEL of a record: %v, want EXECABORT", err)
			}
			p := e.c.Pipeline()
			get := p.Get(ctx, e.key("a"))
			del := p.Del(ctx, rec)
			_, _ = p.Exec(ctx)
			if err := del.Err(); err == nil || !strings.Contains(err.Error(), reserved) {
				t.Errorf("pipelined DEL of a record: %v", err)
			}
			if get.Err() != redis.Nil {
				t.Errorf("the pipelined GET before it: %v", get.Err())
			}
			for i, m := range e.masters {
				mc := m.Client()
				if got := mc.HGet(ctx, rec, "id").Val(); got == "" || got != before[i] {
					t.Errorf("master %d's record: %q, was %q", i, got, before[i])
				}
				if n := mc.Exists(ctx, fence).Val(); n != 0 {
					t.Errorf("master %d holds %s", i, fence)
				}
				mc.Close()
			}

			// The records are not listed.
			if keys := must(e.do("KEYS", "*")).([]any); containsReserved(keys) {
				t.Errorf("KEYS lists the proxy's records: %v", keys)
			}
			if sc := must(e.do("SCAN", 0, "COUNT", 1000)).([]any); containsReserved(sc[1].([]any)) {
				t.Errorf("SCAN lists the proxy's records: %v", sc)
			}
			for range 20 {
				if k, err := e.do("RANDOMKEY"); err != redis.Nil && (err != nil || strings.HasPrefix(k.(string), "redlock-proxy:")) {
					t.Fatalf("RANDOMKEY: %v %v", k, err)
				}
			}
		})
	}
}

func containsReserved(keys []any) bool {
	for _, k := range keys {
		if s, _ := k.(string); strings.HasPrefix(s, "redlock-proxy:") {
			return true
		}
	}
	return false
}

// The control: with the guard reserved-keys off, a client deletes a
// lock's fence counter through the proxy, and the fencing numbers of the
// next grants go backwards (1, 2, then 1), which fencing exists to
// prevent; with the guard on the delete is refused and the numbers keep
// growing.
func TestReservedKeysFenceGoesBackwardsWithGuardOff(t *testing.T) {
	for _, off := range []bool{false, true} {
		name := map[bool]string{false: "on", true: "off_shows_the_violation"}[off]
		t.Run(name, func(t *testing.T) {
			e := newEnv(t, 3, func(c *proxy.Config) {
				if off {
					c.GuardsOff = []string{"reserved-keys"}
				}
			})
			key := e.key("k")
			grant := func() int64 {
				t.Helper()
				r := must(e.do("LOCK.ACQUIRE", key, 10000)).([]any)
				mustEqual(t, "release", must(e.do("LOCK.RELEASE", key, r[0])), any(int64(1)))
				return r[1].(int64)
			}
			first, second := grant(), grant()
			_, err := e.do("DEL", "redlock-proxy:fence:"+key)
			third := grant()
			switch {
			case !off && (err == nil || !strings.Contains(err.Error(), reserved)):
				t.Fatalf("DEL of a fence counter: %v, want refused", err)
			case !off && !(first < second && second < third):
				t.Fatalf("fencing numbers %d, %d, %d: not growing", first, second, third)
			case off && third > second:
				t.Fatalf("with the guard off the numbers should go back (%d, %d, %d; DEL: %v)", first, second, third, err)
			}
		})
	}
}

// MSETNX and GETSET of a lock key, with every key a lock key and the first
// master as the backend, would write that master alone while a quorum
// holds the lock there; they are refused, and the lock is untouched.
func TestMultiKeyWritesOfLockKeysRefusedOnVotingBackend(t *testing.T) {
	e := newEnv(t, 3, nil)
	key := e.key("k")
	mustEqual(t, "acquire", must(e.do("SET", key, "A", "NX", "PX", 10000)), any("OK"))
	for _, args := range [][]any{
		{"MSETNX", e.key("other"), "1", key, "B"},
		{"GETSET", key, "B"},
		{"SORT", e.key("list"), "BY", "w_*"},
		{"SORT", e.key("list"), "GET", "redlock-proxy:*"},
	} {
		if _, err := e.do(args...); err == nil || !strings.Contains(err.Error(), "voting master") {
			t.Errorf("%v: %v, want refused", args, err)
		}
	}
	mustEqual(t, "the lock on every master", strings.Join(e.onMasters(key), "|"), "A|A|A")
	time.Sleep(10 * time.Millisecond)
	if v, _ := e.do("SET", key, "B", "NX", "PX", 10000); v == "OK" {
		t.Fatal("a second client was granted the lock")
	}
}

// A RESP3 client with a backend connection of its own (tracking, or
// subscribed) is held to the boundary as every client is: on a voting
// backend its commands on lock keys, scripts, WATCH of a lock key, and
// what it queues in MULTI are refused before they reach the master, and
// its replies keep their order.
func TestBoundaryOnTrackingConnection(t *testing.T) {
	e := newEnv(t, 3, func(c *proxy.Config) { c.Proxy.LockKeys = []string{"lock:*"} })
	c, err := net.Dial("tcp", e.addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	send := func(cmds ...string) string {
		t.Helper()
		if _, err := c.Write(resp(cmds...)); err != nil {
			t.Fatal(err)
		}
		return string(quietRead(t, c, 200*time.Millisecond))
	}
	send("HELLO 3")
	mustEqual(t, "tracking on", send("CLIENT TRACKING ON"), "+OK\r\n")
	mustEqual(t, "SET NX", send("SET lock:b t1 NX PX 10000"), "+OK\r\n>2\r\n$10\r\ninvalidate\r\n*1\r\n$6\r\nlock:b\r\n")
	for _, cmd := range []string{"INCR lock:b", "APPEND lock:b x", "WATCH lock:b", "DEL redlock-proxy:dataset", "EVAL return 1 0"} {
		if got := send(cmd); !strings.HasPrefix(got, "-ERR redlock-proxy:") {
			t.Errorf("%s on a tracking connection: %q, want refused", cmd, got)
		}
	}
	got := send("MULTI", "SET trk:m 1", "APPEND lock:b x", "EXEC")
	if !strings.HasPrefix(got, "+OK\r\n+QUEUED\r\n-ERR redlock-proxy:") || !strings.HasSuffix(got, "-EXECABORT Transaction discarded because of previous errors.\r\n") {
		t.Errorf("MULTI with a lock key's APPEND: %q", got)
	}
	mustEqual(t, "a plain key on the connection", send("INCR trk:n"), ":1\r\n")
	mustEqual(t, "the lock on every master, untouched", strings.Join(e.onMasters("lock:b"), "|"), "t1|t1|t1")
}
