// Package bsmredislock drives bsm/redislock v0.10 through the proxy. It is
// a module of its own: the proxy's module tests v0.9.4 (compat/go_test.go),
// and a module holds one version of a library.
package bsmredislock

import (
	"context"
	"crypto/sha1"
	"encoding/hex"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/bsm/redislock"
	"github.com/redis/go-redis/v9"

	"github.com/redlock-proxy/redlock-proxy/internal/redistest"
	"github.com/redlock-proxy/redlock-proxy/proxy/lockscripts"
)

var binary string

func TestMain(m *testing.M) { redistest.MainWithProxy(m, "../../cmd/redlock-proxy", &binary) }

// stack is three masters and the proxy binary in front of them.
type stack struct{ *redistest.ClientStack }

func startStack(t *testing.T) stack { return stack{redistest.StartClientStack(t, binary)} }

// absent reports whether key is on no master.
func (s stack) absent(key string) bool {
	for _, m := range s.Masters {
		c := m.Client()
		n, _ := c.Exists(context.Background(), key).Result()
		c.Close()
		if n != 0 {
			return false
		}
	}
	return true
}

// eventually polls cond for up to five seconds: the proxy answers once a
// quorum decides, and the other masters finish a moment later.
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not so after 5 s", what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// scriptLog records the scripting commands a client sends.
type scriptLog struct {
	mu   sync.Mutex
	cmds [][]any
}

func (l *scriptLog) DialHook(next redis.DialHook) redis.DialHook { return next }

func (l *scriptLog) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		if n := cmd.Name(); n == "eval" || n == "evalsha" {
			l.mu.Lock()
			l.cmds = append(l.cmds, cmd.Args())
			l.mu.Unlock()
		}
		return next(ctx, cmd)
	}
}

func (l *scriptLog) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}

// sent returns what was recorded: the texts sent by EVAL and the SHA1s sent
// by EVALSHA.
func (l *scriptLog) sent() (texts, shas []string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, a := range l.cmds {
		if a[0] == "eval" {
			texts = append(texts, a[1].(string))
		} else {
			shas = append(shas, a[1].(string))
		}
	}
	return texts, shas
}

// The scripts the library sends are those the proxy's table declares: on
// a plain Redis that has none loaded, each EVALSHA is answered NOSCRIPT
// and the library sends the text by EVAL. Each text is a built-in script
// of the proxy by its normalised digest and by the SHA1 of its exact
// bytes, and is byte for byte the copy the proxy's tests run
// (internal/redistest).
func TestTheLibrarysScriptsAreDeclared(t *testing.T) {
	plain := redistest.Start(t)
	c := redis.NewClient(&redis.Options{Addr: plain.Addr})
	defer c.Close()
	log := &scriptLog{}
	c.AddHook(log)
	ctx := context.Background()
	lock, err := redislock.New(c).ObtainMulti(ctx, []string{"a", "b"}, 5*time.Second, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := lock.TTL(ctx); err != nil {
		t.Fatal(err)
	}
	if err := lock.Refresh(ctx, 5*time.Second, nil); err != nil {
		t.Fatal(err)
	}
	if err := lock.Release(ctx); err != nil {
		t.Fatal(err)
	}
	texts, _ := log.sent()
	copies := map[string]string{
		"bsm/redislock 0.10 obtain":  redistest.BsmObtain,
		"bsm/redislock 0.10 pttl":    redistest.BsmPTTL,
		"bsm/redislock 0.10 refresh": redistest.BsmRefresh,
		"bsm/redislock 0.10 release": redistest.BsmRelease,
	}
	if len(texts) != len(copies) {
		t.Fatalf("%d scripts sent by EVAL, want %d", len(texts), len(copies))
	}
	for _, text := range texts {
		sp := lockscripts.Builtin(text)
		if sp == nil {
			t.Fatalf("not a built-in script:\n%s", text)
		}
		h := sha1.Sum([]byte(text))
		if by := lockscripts.BySHA(hex.EncodeToString(h[:])); by != sp {
			t.Errorf("%s: its wire SHA1 %x is not declared for it", sp.Name, h)
		}
		if theirs, ok := copies[sp.Name]; !ok || theirs != text {
			t.Errorf("%s: the library's text is not internal/redistest's copy", sp.Name)
		}
		delete(copies, sp.Name)
	}
}

// bsm/redislock v0.10.0, unmodified, with the proxy as its Redis: a lock
// held on a quorum, a contender refused (at once, and retrying until its
// deadline), a lock of two keys each held on a quorum and a contender for
// one of them refused with nothing left behind, the holder's obtain again
// by its token, Refresh past the first TTL, TTL, Release (gone from every
// master) and ErrLockNotHeld for a second Release. The library's EVALSHAs
// are answered without a load: it never falls back to EVAL.
func TestBsmRedislock(t *testing.T) {
	s := startStack(t)
	ctx := context.Background()
	log := &scriptLog{}
	a, b := redis.NewClient(&redis.Options{Addr: s.Addr}), redis.NewClient(&redis.Options{Addr: s.Addr})
	defer a.Close()
	defer b.Close()
	a.AddHook(log)
	b.AddHook(log)
	la, lb := redislock.New(a), redislock.New(b)
	key := "compat:bsm10"

	lock, err := la.Obtain(ctx, key, 5*time.Second, nil)
	if err != nil {
		t.Fatalf("Obtain: %v", err)
	}
	if n := s.Holders(key, lock.Token()); n < 2 {
		t.Fatalf("the lock is on %d masters", n)
	}
	if _, err := lb.Obtain(ctx, key, 5*time.Second, nil); !errors.Is(err, redislock.ErrNotObtained) {
		t.Fatalf("a contender's Obtain: %v, want ErrNotObtained", err)
	}
	wctx, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
	_, err = lb.Obtain(wctx, key, 5*time.Second, &redislock.Options{RetryStrategy: redislock.LinearBackoff(50 * time.Millisecond)})
	cancel()
	if !errors.Is(err, redislock.ErrNotObtained) || !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("a contender retrying until its deadline: %v, want ErrNotObtained and the deadline", err)
	}

	// Two keys at once, each on a quorum; a contender for one of them and
	// a free one takes neither.
	x, y, z := key+":x", key+":y", key+":z"
	multi, err := la.ObtainMulti(ctx, []string{x, y}, 5*time.Second, nil)
	if err != nil {
		t.Fatalf("ObtainMulti: %v", err)
	}
	for _, k := range []string{x, y} {
		if n := s.Holders(k, multi.Token()); n < 2 {
			t.Fatalf("%s is on %d masters", k, n)
		}
	}
	if _, err := lb.ObtainMulti(ctx, []string{z, y}, 5*time.Second, nil); !errors.Is(err, redislock.ErrNotObtained) {
		t.Fatalf("a contender's ObtainMulti: %v, want ErrNotObtained", err)
	}
	eventually(t, "nothing of the contender's", func() bool { return s.absent(z) })

	// The holder obtains its key again by its token, with new metadata,
	// for 2 s; refreshed to 20 s, it is still held past those 2 s.
	obtained := time.Now()
	again, err := lb.Obtain(ctx, key, 2*time.Second, &redislock.Options{Token: lock.Token(), Metadata: "m2"})
	if err != nil {
		t.Fatalf("Obtain with the holder's token: %v", err)
	}
	if err := again.Refresh(ctx, 20*time.Second, nil); err != nil {
		t.Fatalf("Refresh: %v", err)
	}
	value := lock.Token() + "m2"
	eventually(t, "the new value on every master", func() bool { return s.Holders(key, value) == 3 })
	if _, err := la.ObtainMulti(ctx, []string{x, y}, 5*time.Second, &redislock.Options{Token: multi.Token(), Metadata: "m2"}); err != nil {
		t.Fatalf("ObtainMulti with the holder's token: %v", err)
	}
	time.Sleep(time.Until(obtained.Add(2500 * time.Millisecond))) // past the TTL it was obtained with
	if n := s.Holders(key, value); n < 2 {
		t.Fatalf("after its first TTL, the refreshed lock is on %d masters", n)
	}
	ttl, err := again.TTL(ctx)
	if err != nil || ttl <= 10*time.Second {
		t.Fatalf("TTL of the refreshed lock: %s %v", ttl, err)
	}
	if ttl, err := lock.TTL(ctx); err != nil || ttl != 0 {
		t.Fatalf("TTL of a value no longer held: %s %v, want 0", ttl, err)
	}
	if err := lock.Release(ctx); !errors.Is(err, redislock.ErrLockNotHeld) {
		t.Fatalf("Release by the old value: %v, want ErrLockNotHeld", err)
	}

	if err := again.Release(ctx); err != nil {
		t.Fatalf("Release: %v", err)
	}
	eventually(t, "the released lock gone from every master", func() bool { return s.absent(key) })
	if err := again.Release(ctx); !errors.Is(err, redislock.ErrLockNotHeld) {
		t.Fatalf("a second Release: %v, want ErrLockNotHeld", err)
	}
	if err := again.Refresh(ctx, time.Second, nil); !errors.Is(err, redislock.ErrNotObtained) {
		t.Fatalf("Refresh after Release: %v, want ErrNotObtained", err)
	}
	mine := &redislock.Options{Token: multi.Token(), Metadata: "m2"}
	multiAgain, err := la.ObtainMulti(ctx, []string{x, y}, 5*time.Second, mine)
	if err != nil {
		t.Fatalf("ObtainMulti with the holder's token, once more: %v", err)
	}
	if err := multiAgain.Release(ctx); err != nil {
		t.Fatalf("Release of two keys: %v", err)
	}
	eventually(t, "both keys gone from every master", func() bool { return s.absent(x) && s.absent(y) })
	if err := multiAgain.Release(ctx); !errors.Is(err, redislock.ErrLockNotHeld) {
		t.Fatalf("a second Release of two keys: %v, want ErrLockNotHeld", err)
	}

	texts, shas := log.sent()
	if len(texts) > 0 {
		t.Errorf("the library fell back to EVAL %d times: the proxy answered NOSCRIPT", len(texts))
	}
	if len(shas) == 0 {
		t.Error("no EVALSHA sent")
	}
	for _, sha := range shas {
		if sp := lockscripts.BySHA(sha); sp == nil || !strings.HasPrefix(sp.Name, "bsm/redislock 0.10 ") {
			t.Errorf("EVALSHA %s: not one of the table's bsm/redislock 0.10 scripts (%v)", sha, sp)
		}
	}
}
