package compat

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/redis/rueidis"
	"github.com/redis/rueidis/rueidislock"
	"github.com/redlock-proxy/redlock-proxy/internal/redistest"
)

// rueidis, unmodified, with DisableCache (its default configuration is
// TestRueidisDefault's): RESP3, SET NX PX on a quorum, a contender
// refused, the unlock script, reply types, and pub/sub on its multiplexed
// connection while lock commands go on beside it.
func TestRueidis(t *testing.T) {
	s := startStack(t)
	ctx := context.Background()

	c, err := rueidis.NewClient(rueidis.ClientOption{InitAddress: []string{s.Addr}, DisableCache: true})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	info, err := c.Do(ctx, c.B().ClientInfo().Build()).ToString()
	if err != nil || !strings.Contains(info, " resp=3 ") {
		t.Fatalf("CLIENT INFO: %q %v", info, err)
	}

	key := "compat:rueidis"
	set := func(token string) error {
		return c.Do(ctx, c.B().Set().Key(key).Value(token).Nx().Px(10*time.Second).Build()).Error()
	}
	if err := set("t1"); err != nil {
		t.Fatalf("SET NX: %v", err)
	}
	if n := s.Holders(key, "t1"); n < 2 {
		t.Fatalf("the lock is on %d masters", n)
	}
	if err := set("t2"); !rueidis.IsRedisNil(err) {
		t.Fatalf("a second SET NX: %v, want nil", err)
	}
	if v, err := c.Do(ctx, c.B().Get().Key(key).Build()).ToString(); err != nil || v != "t1" {
		t.Fatalf("GET: %q %v", v, err)
	}

	// Pub/sub on the same (multiplexed) connection, with lock commands
	// beside it.
	channel := "compat:rueidis:ch"
	got := make(chan string, 4)
	subCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	subscribed := make(chan error, 1)
	go func() {
		subscribed <- c.Receive(subCtx, c.B().Subscribe().Channel(channel).Build(), func(m rueidis.PubSubMessage) {
			got <- m.Message
		})
	}()
	deadline := time.Now().Add(5 * time.Second)
	for {
		n, err := c.Do(ctx, c.B().Publish().Channel(channel).Message("hello").Build()).AsInt64()
		if err != nil {
			t.Fatal(err)
		}
		if n == 1 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the subscription never showed on the backend")
		}
		time.Sleep(20 * time.Millisecond)
	}
	select {
	case m := <-got:
		if m != "hello" {
			t.Fatalf("message %q", m)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("no message")
	}
	unlock := rueidis.NewLuaScript(`if redis.call("get",KEYS[1]) == ARGV[1] then return redis.call("del",KEYS[1]) else return 0 end`)
	if n, err := unlock.Exec(ctx, c, []string{key}, []string{"t1"}).AsInt64(); err != nil || n != 1 {
		t.Fatalf("unlock: %d %v", n, err)
	}
	// The release is decided by a quorum; the last master's delete may
	// land just after the reply, as TestGoRedsync allows for its unlock.
	eventuallyHolders(t, s, key, "t1", 0)
	h := "compat:rueidis:h"
	if err := c.Do(ctx, c.B().Hset().Key(h).FieldValue().FieldValue("a", "1").Build()).Error(); err != nil {
		t.Fatal(err)
	}
	if m, err := c.Do(ctx, c.B().Hgetall().Key(h).Build()).AsStrMap(); err != nil || m["a"] != "1" {
		t.Fatalf("HGETALL: %v %v", m, err)
	}
	if err := c.Do(ctx, c.B().Publish().Channel(channel).Message("again").Build()).Error(); err != nil {
		t.Fatal(err)
	}
	select {
	case m := <-got:
		if m != "again" {
			t.Fatalf("message %q", m)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("no second message")
	}
}

// rueidislock, unmodified, with DisableCache (it then polls instead of
// waiting on invalidations): a lock is KeyMajority of 2·KeyMajority−1 keys
// (rueidislock's own majority, on what it takes for one Redis), each
// acquired with SET NX PXAT and kept alive with PEXPIREAT. Through the
// proxy each of those keys is a quorum lock of the masters: the lock is
// held past its key validity, refused to a second locker, and gone from
// every master once released; SET NX PX (FallbackSETPX) works too.
func TestRueidisLock(t *testing.T) {
	s := startStack(t)
	for _, setpx := range []bool{false, true} {
		opt := func() rueidislock.LockerOption {
			return rueidislock.LockerOption{
				ClientOption:  rueidis.ClientOption{InitAddress: []string{s.Addr}, DisableCache: true},
				KeyValidity:   2 * time.Second,
				FallbackSETPX: setpx,
			}
		}
		a, err := rueidislock.NewLocker(opt())
		if err != nil {
			t.Fatal(err)
		}
		b, err := rueidislock.NewLocker(opt())
		if err != nil {
			t.Fatal(err)
		}
		name := fmt.Sprintf("compat-setpx-%v", setpx)
		ctx, cancel, err := a.TryWithContext(context.Background(), name)
		if err != nil {
			t.Fatalf("setpx=%v: TryWithContext: %v", setpx, err)
		}
		held := func() int { // rueidislock's keys held on a quorum of masters
			n := 0
			for i := 0; i < 3; i++ {
				key := fmt.Sprintf("rueidislock:%d:%s", i, name)
				for _, m := range s.Masters {
					c := m.Client()
					v, _ := c.Get(context.Background(), key).Result()
					c.Close()
					if v != "" && s.Holders(key, v) >= 2 {
						n++
						break
					}
				}
			}
			return n
		}
		if n := held(); n < 2 {
			t.Fatalf("setpx=%v: %d of rueidislock's 3 keys held on a quorum, want at least 2", setpx, n)
		}
		if _, _, err := b.TryWithContext(context.Background(), name); !errors.Is(err, rueidislock.ErrNotLocked) {
			t.Fatalf("setpx=%v: a second locker: %v, want ErrNotLocked", setpx, err)
		}
		time.Sleep(3 * time.Second) // past the key validity: its extends keep it
		if ctx.Err() != nil {
			t.Fatalf("setpx=%v: the lock was lost: %v", setpx, context.Cause(ctx))
		}
		if n := held(); n < 2 {
			t.Fatalf("setpx=%v: after 3 s, %d keys held on a quorum", setpx, n)
		}
		if _, _, err := b.TryWithContext(context.Background(), name); !errors.Is(err, rueidislock.ErrNotLocked) {
			t.Fatalf("setpx=%v: a second locker after 3 s: %v, want ErrNotLocked", setpx, err)
		}
		cancel()
		deadline := time.Now().Add(3 * time.Second)
		for held() > 0 && time.Now().Before(deadline) {
			time.Sleep(20 * time.Millisecond)
		}
		if n := held(); n != 0 {
			t.Fatalf("setpx=%v: %d keys still held after release", setpx, n)
		}
		for i := 0; i < 3; i++ {
			key := fmt.Sprintf("rueidislock:%d:%s", i, name)
			eventuallyHolders(t, s, key, "", 3) // absent everywhere: GET answers ""
		}
		_, cancel2, err := b.TryWithContext(context.Background(), name)
		if err != nil {
			t.Fatalf("setpx=%v: the second locker after the release: %v", setpx, err)
		}
		cancel2()
		a.Close()
		b.Close()
	}
}

// rueidis and rueidislock in their default configuration, client-side
// caching on (CLIENT TRACKING ON OPTIN, or OPTOUT for rueidislock), with
// locks under lock:* and rueidislock:*: a cached read of a plain key is
// served from the client's cache until another client writes the key,
// whose invalidation reaches it through the proxy; lock commands work
// beside it; a cached read of a lock key is refused (the client-side
// cache reads in MULTI), while a plain read of one answers from the quorum.
// rueidislock's waiter, which waits for an invalidation of the key, is
// woken and takes the lock once the holder releases it.
func TestRueidisDefault(t *testing.T) {
	masters := redistest.StartN(t, 3)
	p := redistest.StartProxy(t, binary, func(listen string) string {
		return fmt.Sprintf("[proxy]\nlisten = %q\nlock_keys = [\"lock:*\", \"rueidislock:*\"]\n[redlock]\nmasters = [%s]\nrestart_guard = false\nnode_timeout = \"200ms\"\n[log]\nformat = \"json\"\nlevel = \"warn\"\n",
			listen, redistest.Quote(redistest.Addrs(masters)))
	}, redistest.WithProxyLog())
	s := stack{&redistest.ClientStack{Masters: masters, Addr: p.Addr}}
	ctx := context.Background()

	c, err := rueidis.NewClient(rueidis.ClientOption{InitAddress: []string{s.Addr}})
	if err != nil {
		t.Fatalf("rueidis in its default configuration: %v", err)
	}
	defer c.Close()
	other := p.Client()
	defer other.Close()

	plain := "compat:rueidis:cached"
	if err := other.Set(ctx, plain, "v1", 0).Err(); err != nil {
		t.Fatal(err)
	}
	cached := func() rueidis.RedisResult { return c.DoCache(ctx, c.B().Get().Key(plain).Cache(), time.Minute) }
	if v, err := cached().ToString(); err != nil || v != "v1" {
		t.Fatalf("DoCache GET: %q %v", v, err)
	}
	if r := cached(); !r.IsCacheHit() {
		t.Fatalf("the second DoCache GET was not served from the client's cache: %v", r.Error())
	}
	if err := other.Set(ctx, plain, "v2", 0).Err(); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(5 * time.Second)
	for {
		v, err := cached().ToString()
		if err != nil {
			t.Fatal(err)
		}
		if v == "v2" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the cache still answers %q after another client wrote the key", v)
		}
		time.Sleep(10 * time.Millisecond)
	}

	lock := "lock:rueidis"
	if err := c.Do(ctx, c.B().Set().Key(lock).Value("t1").Nx().Px(10*time.Second).Build()).Error(); err != nil {
		t.Fatalf("SET NX: %v", err)
	}
	if n := s.Holders(lock, "t1"); n < 2 {
		t.Fatalf("the lock is on %d masters", n)
	}
	if err := c.Do(ctx, c.B().Set().Key(lock).Value("t2").Nx().Px(10*time.Second).Build()).Error(); !rueidis.IsRedisNil(err) {
		t.Fatalf("a second SET NX: %v, want nil", err)
	}
	if v, err := c.Do(ctx, c.B().Get().Key(lock).Build()).ToString(); err != nil || v != "t1" {
		t.Fatalf("GET of the lock: %q %v", v, err)
	}
	if err := c.DoCache(ctx, c.B().Get().Key(lock).Cache(), time.Minute).Error(); err == nil || !strings.Contains(err.Error(), "lock keys cannot be cached") {
		t.Fatalf("DoCache GET of a lock key: %v, want the proxy's refusal", err)
	}

	opt := rueidislock.LockerOption{ClientOption: rueidis.ClientOption{InitAddress: []string{s.Addr}}, KeyValidity: 2 * time.Second}
	a, err := rueidislock.NewLocker(opt)
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	b, err := rueidislock.NewLocker(opt)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	_, cancel, err := a.WithContext(ctx, "default")
	if err != nil {
		t.Fatalf("rueidislock: %v", err)
	}
	for i := 0; i < 3; i++ {
		key := fmt.Sprintf("rueidislock:%d:default", i)
		for _, m := range masters {
			mc := m.Client()
			v, _ := mc.Get(ctx, key).Result()
			mc.Close()
			if v != "" && s.Holders(key, v) < 2 {
				t.Fatalf("%s is on fewer than a quorum of masters", key)
			}
		}
	}
	if _, _, err := b.TryWithContext(ctx, "default"); !errors.Is(err, rueidislock.ErrNotLocked) {
		t.Fatalf("a second locker: %v, want ErrNotLocked", err)
	}
	woken := make(chan error, 1)
	go func() {
		wctx, wcancel := context.WithTimeout(ctx, 20*time.Second)
		defer wcancel()
		_, c2, err := b.WithContext(wctx, "default")
		if c2 != nil {
			c2()
		}
		woken <- err
	}()
	time.Sleep(3 * time.Second) // past the key validity: the holder's extends keep it
	select {
	case err := <-woken:
		t.Fatalf("the waiter got the lock while it was held: %v", err)
	default:
	}
	cancel()
	if err := <-woken; err != nil {
		t.Fatalf("the waiter after the release: %v", err)
	}
}
