package proxy_test

import (
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/redlock-proxy/redlock-proxy/proxy"
)

// An ordinary lock workflow through the proxy sees one consistent store.
func TestLockKeyWorkflow(t *testing.T) {
	e := newEnv(t, 3, nil)
	key := e.key("k")
	mustEqual(t, "SET NX", must(e.do("SET", key, "v1", "NX", "PX", 20000)), any("OK"))
	mustEqual(t, "GET", must(e.do("GET", key)), any("v1"))
	mustEqual(t, "EXISTS", must(e.do("EXISTS", key, e.key("none"))), any(int64(1)))
	mustEqual(t, "SET overwrite", must(e.do("SET", key, "v2", "PX", 30000)), any("OK"))
	eventually(t, "overwritten on every master", func() bool { return count(e.onMasters(key), "v2") == 3 })
	p := must(e.do("PTTL", key)).(int64)
	if p <= 20000 || p > 30000 {
		t.Fatalf("PTTL after overwrite: %d", p)
	}
	mustEqual(t, "PEXPIRE", must(e.do("PEXPIRE", key, 50000)), any(int64(1)))
	ttl := must(e.do("TTL", key)).(int64)
	if ttl < 49 || ttl > 50 {
		t.Fatalf("TTL %d", ttl)
	}
	mustEqual(t, "PERSIST", must(e.do("PERSIST", key)), any(int64(1)))
	mustEqual(t, "PTTL after PERSIST", must(e.do("PTTL", key)), any(int64(-1)))
	mustEqual(t, "DEL", must(e.do("DEL", key, e.key("none"))), any(int64(1)))
	eventually(t, "deleted on every master", func() bool { return count(e.onMasters(key), "") == 3 })
	_, err := e.do("GET", key)
	mustEqual(t, "GET after DEL", err, error(redis.Nil))
	mustEqual(t, "PTTL after DEL", must(e.do("PTTL", key)), any(int64(-2)))
}

// PTTL is the quorum-th largest TTL of the holders: after it, fewer than a
// quorum hold the lock.
func TestPTTLIsQuorumTh(t *testing.T) {
	e := newEnv(t, 3, nil)
	key := e.key("k")
	e.seed(key, "v", 10*time.Second, 0)
	e.seed(key, "v", 20*time.Second, 1)
	e.seed(key, "v", 30*time.Second, 2)
	p := must(e.do("PTTL", key)).(int64)
	if p <= 15000 || p > 20000 {
		t.Fatalf("PTTL %d, want the second largest (~20000)", p)
	}
	// A value on a minority is not there.
	e.seed(e.key("m"), "v", 10*time.Second, 1)
	_, err := e.do("GET", e.key("m"))
	mustEqual(t, "GET of a minority value", err, error(redis.Nil))
	mustEqual(t, "EXISTS of a minority value", must(e.do("EXISTS", e.key("m"))), any(int64(0)))
}

func TestLockKeyPatterns(t *testing.T) {
	e := newEnv(t, 3, func(c *proxy.Config) { c.Proxy.LockKeys = []string{"lock:*"} })
	must(e.do("SET", "lock:"+e.key("a"), "t", "NX", "PX", 10000))
	eventually(t, "lock key on every master", func() bool { return count(e.onMasters("lock:"+e.key("a")), "t") == 3 })
	must(e.do("SET", "data:"+e.key("a"), "t", "NX", "PX", 10000))
	vals := e.onMasters("data:" + e.key("a"))
	mustEqual(t, "other key on the backend only", vals[0]+"|"+vals[1]+"|"+vals[2], "t||")
	mustEqual(t, "DEL of both kinds", must(e.do("DEL", "lock:"+e.key("a"), "data:"+e.key("a"))), any(int64(2)))
}

func must(v any, err error) any {
	if err != nil && err != redis.Nil {
		panic(err)
	}
	return v
}
