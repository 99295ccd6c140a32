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
)

// rueidis, unmodified. In its default configuration it turns client-side
// caching on (CLIENT TRACKING) when it connects, which the proxy refuses
// with an error that names the option turning it off; with only
// DisableCache set it works: RESP3, SET NX PX on a quorum, a contender
// refused, the unlock script, reply types, and pub/sub on its multiplexed
// connection while lock commands go on beside it.
func TestRueidis(t *testing.T) {
	s := startStack(t)
	ctx := context.Background()

	_, err := rueidis.NewClient(rueidis.ClientOption{InitAddress: []string{s.addr}})
	if err == nil || !strings.Contains(err.Error(), "DisableCache") {
		t.Fatalf("rueidis with client-side caching: %v; want the proxy's error naming DisableCache", err)
	}

	c, err := rueidis.NewClient(rueidis.ClientOption{InitAddress: []string{s.addr}, DisableCache: true})
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
	if n := s.holders(key, "t1"); n < 2 {
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
	if n := s.holders(key, "t1"); n != 0 {
		t.Fatalf("the released lock is on %d masters", n)
	}
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
				ClientOption:  rueidis.ClientOption{InitAddress: []string{s.addr}, DisableCache: true},
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
				for _, m := range s.masters {
					c := m.Client()
					v, _ := c.Get(context.Background(), key).Result()
					c.Close()
					if v != "" && s.holders(key, v) >= 2 {
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
