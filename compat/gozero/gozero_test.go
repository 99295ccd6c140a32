// Package gozero drives go-zero's RedisLock through the proxy. It is a
// module of its own so that go-zero's dependencies (OpenTelemetry, gRPC
// and more) stay out of the proxy's module and its binary.
package gozero

import (
	"slices"
	"testing"

	zredis "github.com/zeromicro/go-zero/core/stores/redis"

	"github.com/redlock-proxy/redlock-proxy/internal/redistest"
)

var binary string

func TestMain(m *testing.M) { redistest.MainWithProxy(m, "../../cmd/redlock-proxy", &binary) }

// stack is three masters and the proxy binary in front of them.
type stack struct{ *redistest.ClientStack }

func startStack(t *testing.T) stack { return stack{redistest.StartClientStack(t, binary)} }

// value is what key holds on a quorum of the masters ("" if none).
func (s stack) value(key string) string {
	vs, _ := s.Values(key)
	for _, v := range vs {
		if v != "" && s.Holders(key, v) > len(s.Masters)/2 {
			return v
		}
	}
	return ""
}

// minPTTL is the PTTL key has on a quorum of the masters at least.
func (s stack) minPTTL(key string) int64 {
	_, ttls := s.Values(key)
	slices.Sort(ttls)
	return ttls[len(ttls)-(len(ttls)/2+1)]
}

// go-zero's RedisLock, unmodified, with the proxy as its Redis: its
// acquire script is reentrant (the holder's id renews the lock, anyone
// else's is SET NX PX), its release the compare-and-delete. The lock is on
// a quorum while held, refused to another id, renewed by its holder, and
// gone from every master once released.
func TestGoZeroRedisLock(t *testing.T) {
	s := startStack(t)
	store := zredis.MustNewRedis(zredis.RedisConf{Host: s.Addr, Type: zredis.NodeType})
	key := "compat:gozero"
	a, b := zredis.NewRedisLock(store, key), zredis.NewRedisLock(store, key)
	a.SetExpire(5)
	b.SetExpire(5)
	ok, err := a.Acquire()
	if err != nil || !ok {
		t.Fatalf("Acquire: %v %v", ok, err)
	}
	value := s.value(key)
	if n := s.Holders(key, value); n < 2 {
		t.Fatalf("the lock is on %d masters", n)
	}
	if ok, err := b.Acquire(); err != nil || ok {
		t.Fatalf("another id's Acquire: %v %v, want false", ok, err)
	}
	a.SetExpire(30)
	if ok, err := a.Acquire(); err != nil || !ok {
		t.Fatalf("the holder's Acquire again: %v %v, want true (reentrant)", ok, err)
	}
	if ms := s.minPTTL(key); ms < 25000 {
		t.Fatalf("the holder's second Acquire left a PTTL of %d ms on a quorum, want about 30 s", ms)
	}
	if ok, err := b.Release(); err != nil || ok {
		t.Fatalf("another id's Release: %v %v, want false", ok, err)
	}
	if ok, err := a.Release(); err != nil || !ok {
		t.Fatalf("Release: %v %v", ok, err)
	}
	if n := s.Holders(key, value); n != 0 {
		t.Fatalf("the released lock is on %d masters", n)
	}
	if ok, err := b.Acquire(); err != nil || !ok {
		t.Fatalf("Acquire after the release: %v %v", ok, err)
	}
	if ok, err := b.Release(); err != nil || !ok {
		t.Fatalf("Release: %v %v", ok, err)
	}
}
