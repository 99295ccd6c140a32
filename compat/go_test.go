package compat

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/bsm/redislock"
	"github.com/go-redsync/redsync/v4"
	"github.com/go-redsync/redsync/v4/redis/goredis/v9"
	"github.com/redis/go-redis/v9"
)

// appClient is a go-redis client of the proxy with go-redis's defaults, as
// an application has it (HELLO 3 first: RESP3).
func appClient(s stack) *redis.Client { return redis.NewClient(&redis.Options{Addr: s.Addr}) }

func eventuallyHolders(t *testing.T, s stack, key, value string, want int) {
	t.Helper()
	deadline := time.Now().Add(2 * time.Second)
	for s.Holders(key, value) != want {
		if time.Now().After(deadline) {
			t.Fatalf("%s=%s on %d masters, want %d", key, value, s.Holders(key, value), want)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func TestGoRedsync(t *testing.T) {
	s := startStack(t)
	ctx := context.Background()
	a, b := appClient(s), appClient(s)
	defer a.Close()
	defer b.Close()
	rsA := redsync.New(goredis.NewPool(a))
	rsB := redsync.New(goredis.NewPool(b))
	name := "compat:redsync"

	// Whole seconds: go-redis sends SET … EX 8 NX.
	m := rsA.NewMutex(name, redsync.WithExpiry(8*time.Second), redsync.WithTries(1))
	if err := m.LockContext(ctx); err != nil {
		t.Fatalf("Lock: %v", err)
	}
	if s.Holders(name, m.Value()) < 2 {
		t.Fatal("lock not on a quorum of masters")
	}
	other := rsB.NewMutex(name, redsync.WithExpiry(8*time.Second), redsync.WithTries(2), redsync.WithRetryDelay(10*time.Millisecond))
	err := other.LockContext(ctx)
	var taken *redsync.ErrTaken
	if !errors.As(err, &taken) && !errors.Is(err, redsync.ErrFailed) {
		t.Fatalf("second Lock: %v, want ErrTaken/ErrFailed", err)
	}
	ok, err := m.ExtendContext(ctx)
	if err != nil || !ok {
		t.Fatalf("Extend: %v %v", ok, err)
	}
	ok, err = m.UnlockContext(ctx)
	if err != nil || !ok {
		t.Fatalf("Unlock: %v %v", ok, err)
	}
	eventuallyHolders(t, s, name, m.Value(), 0)
	// Unlocking again: the key is gone, and redsync says so.
	ok, err = m.UnlockContext(ctx)
	if ok || err == nil {
		t.Fatalf("second Unlock: %v %v, want an error", ok, err)
	}
	// Milliseconds: go-redis sends SET … PX ms NX.
	m2 := rsB.NewMutex(name, redsync.WithExpiry(1500*time.Millisecond), redsync.WithTries(1))
	if err := m2.LockContext(ctx); err != nil {
		t.Fatalf("Lock after Unlock: %v", err)
	}
	eventuallyHolders(t, s, name, m2.Value(), 3)
	pttl, _ := a.PTTL(ctx, name).Result()
	if pttl <= 0 || pttl > 1500*time.Millisecond {
		t.Fatalf("PTTL %s", pttl)
	}
	// After expiry another client takes it.
	time.Sleep(1600 * time.Millisecond)
	m3 := rsA.NewMutex(name, redsync.WithExpiry(8*time.Second), redsync.WithTries(1))
	if err := m3.LockContext(ctx); err != nil {
		t.Fatalf("Lock after expiry: %v", err)
	}
	if ok, err := m2.ExtendContext(ctx); ok || err == nil {
		t.Fatalf("Extend by the expired holder: %v %v, want refused", ok, err)
	}
}

func TestGoBsmRedislock(t *testing.T) {
	s := startStack(t)
	ctx := context.Background()
	a, b := appClient(s), appClient(s)
	defer a.Close()
	defer b.Close()
	la, lb := redislock.New(a), redislock.New(b)
	key := "compat:bsm"

	lock, err := la.Obtain(ctx, key, 5*time.Second, nil)
	if err != nil {
		t.Fatalf("Obtain: %v", err)
	}
	if s.Holders(key, lock.Token()) < 2 {
		t.Fatal("lock not on a quorum of masters")
	}
	if _, err := lb.Obtain(ctx, key, 5*time.Second, nil); !errors.Is(err, redislock.ErrNotObtained) {
		t.Fatalf("second Obtain: %v, want ErrNotObtained", err)
	}
	// Blocking obtain with a retry strategy gives up after its deadline.
	start := time.Now()
	wctx, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
	_, err = lb.Obtain(wctx, key, 5*time.Second, &redislock.Options{RetryStrategy: redislock.LinearBackoff(50 * time.Millisecond)})
	cancel()
	if err == nil || time.Since(start) > 2*time.Second {
		t.Fatalf("blocking Obtain on a held key: %v after %s", err, time.Since(start))
	}
	// Obtaining again with the holder's own token takes it over.
	again, err := lb.Obtain(ctx, key, 5*time.Second, &redislock.Options{Token: lock.Token(), Metadata: "m2"})
	if err != nil {
		t.Fatalf("Obtain with the holder's token: %v", err)
	}
	eventuallyHolders(t, s, key, lock.Token()+"m2", 3)
	if err := again.Refresh(ctx, 20*time.Second, nil); err != nil {
		t.Fatalf("Refresh: %v", err)
	}
	ttl, err := again.TTL(ctx)
	if err != nil || ttl < 15*time.Second {
		t.Fatalf("TTL after Refresh: %s %v", ttl, err)
	}
	if ttl, err := lock.TTL(ctx); err != nil || ttl != 0 {
		t.Fatalf("TTL of a lock no longer held: %s %v, want 0", ttl, err)
	}
	if err := lock.Release(ctx); !errors.Is(err, redislock.ErrLockNotHeld) {
		t.Fatalf("Release by the old value: %v, want ErrLockNotHeld", err)
	}
	if err := again.Release(ctx); err != nil {
		t.Fatalf("Release: %v", err)
	}
	eventuallyHolders(t, s, key, lock.Token()+"m2", 0)
	if err := again.Refresh(ctx, time.Second, nil); !errors.Is(err, redislock.ErrNotObtained) {
		t.Fatalf("Refresh after Release: %v, want ErrNotObtained", err)
	}
}
