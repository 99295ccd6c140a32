package quorum

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/tidwall/redcon"

	"github.com/redlock-proxy/redlock-proxy/redlock/engine"
)

// Commands sent as they are to every master, and the answer a quorum of
// them gave: SET without NX, SETEX, GETDEL, GETEX, DEL and the EXPIRE
// family of lock keys (proxy/quorumcmds.go), and a few writes of scripts
// and mixed mode. Acquires, releases, extends and reads have the engine's
// own operations.

// Engine is what the commands need of the quorum engine: the
// *engine.Client of the client's database.
type Engine interface {
	Quorum() int
	Masters() int
	WaitWrites(ctx context.Context, key string)
	Broadcast(ctx context.Context, key string, done func(got []engine.Result) bool, args ...any) []engine.Result
	BroadcastValue(ctx context.Context, key string, done func(got []engine.Result) bool, args ...any) []engine.Result
	NoQuorum(reachable int, keys ...string) *engine.QuorumError
	Read(ctx context.Context, key string) (engine.KeyState, error)
	ReadHash(ctx context.Context, key string) (engine.HashState, error)
	Release(ctx context.Context, key, value string) (engine.ReleaseResult, error)
	ReleaseAll(ctx context.Context, keys []string, value string) (int, error)
	ReleaseEvery(ctx context.Context, keys []string, value string) (engine.ReleaseResult, error)
	Extend(ctx context.Context, key, value string, ttl time.Duration, mode engine.ExtendMode) (engine.ExtendResult, bool, error)
	ExtendAll(ctx context.Context, keys []string, value string, ttl time.Duration) (engine.ExtendResult, bool, error)
	NoteTTL(key string, ttl time.Duration) (*engine.TTLWrite, error)
	AcquireGet(ctx context.Context, key, value string, ttl time.Duration) (engine.AcquireResult, error)
	AcquireAll(ctx context.Context, keys []string, value string, ttl time.Duration) (engine.AcquireResult, error)
	Reacquire(ctx context.Context, keys []string, value string, ttl time.Duration, h engine.Holder) (engine.ExtendResult, bool, error)
	AcquireRW(ctx context.Context, key, token string, ttl time.Duration, shared bool) (*engine.Lock, error)
	ExtendRW(ctx context.Context, key, token string, ttl time.Duration) (engine.ExtendResult, bool, error)
	ReleaseRW(ctx context.Context, key, token string) (engine.ReleaseResult, error)
	HeldRW(ctx context.Context, key, token string) (bool, error)
	AcquirePermit(ctx context.Context, key, token string, limit int64, ttl time.Duration) (*engine.Lock, error)
	ExtendPermit(ctx context.Context, key, token string, limit int64, ttl time.Duration) (engine.ExtendResult, bool, error)
	ReleasePermit(ctx context.Context, key string, tokens ...string) (int, error)
	AcquireHash(ctx context.Context, key, holder string, ttl time.Duration) (engine.HashResult, error)
	ExtendHash(ctx context.Context, key, holder string, ttl time.Duration) (engine.ExtendResult, bool, error)
	ReleaseHash(ctx context.Context, key, holder string, ttl time.Duration, latch string) (engine.HashRelease, error)
	ExtendHashBatch(ctx context.Context, keys, holders []string, ttl time.Duration) ([]bool, error)
	AcquireFenced(ctx context.Context, key, token string, ttl time.Duration, reentrant bool) (engine.FenceResult, error)
	ReenterFenced(ctx context.Context, key, token string, ttl time.Duration) (engine.FenceResult, error)
	ReleaseFenced(ctx context.Context, key, token string) (engine.FenceRelease, error)
	ReleaseFencedAll(ctx context.Context, key, token string) (engine.FenceRelease, error)
	ExtendFenced(ctx context.Context, key, token string, ttl time.Duration) (time.Duration, bool, error)
	InfoFenced(ctx context.Context, key string) (engine.FenceInfo, error)
}

// Op is one command's call on the quorum: the engine, how long one
// operation may take at most (Context), proxy.max_lock_value, and where
// its acquires, extends and releases are counted.
type Op struct {
	Eng      Engine
	Timeout  time.Duration
	MaxValue int
	Metrics  Metrics
}

// ToAny is a command's arguments as the engine sends them.
func ToAny(args [][]byte) []any {
	out := make([]any, len(args))
	for i, a := range args {
		out[i] = string(a)
	}
	return out
}

// IsLarge reports whether a master's answer is a value longer than
// proxy.max_lock_value (engine.BroadcastValue).
func IsLarge(v any) bool { _, ok := v.(engine.LargeValue); return ok }

// answerKey groups equal answers of different masters.
func answerKey(r engine.Result) (string, bool) {
	var re redis.Error
	switch {
	case r.Err == redis.Nil:
		return "nil", true
	case errors.As(r.Err, &re):
		return "err:" + re.Error(), true
	case r.Err != nil:
		return "", false // not an answer: the master failed
	}
	return fmt.Sprintf("%T:%v", r.Val, r.Val), true
}

// BroadcastMajority sends a write to every master and answers what a quorum
// of them answered. Writes of lock keys wait for every master (each within
// the node timeout), so that a read that follows sees the write everywhere
// it landed, as on a single Redis. Only answers that may count as votes
// (engine.Result.Counts) are counted; with too few of them the answer is
// NOQUORUM. A write of a TTL on a lock key passes w (engine.NoteTTL), and
// applied, which says from a master's answer whether it took effect there.
// With valued (GETDEL, GETEX, SET … GET: the reply is the key's value), a
// master where the value is longer than proxy.max_lock_value changes
// nothing (engine.BroadcastValue), and a quorum of them answers the error
// that says so.
func (o Op) BroadcastMajority(c redcon.Conn, args []any, w *engine.TTLWrite, applied func(engine.Result) bool, valued bool) {
	if r, ok := o.Majority(c, args, w, applied, valued); ok {
		o.WriteResult(c, r)
	}
}

// Majority is BroadcastMajority's write and count: it returns the answer a
// quorum of masters gave, or writes the error (NOQUORUM, or TRYAGAIN when
// no answer holds a quorum) and reports false.
func (o Op) Majority(c redcon.Conn, args []any, w *engine.TTLWrite, applied func(engine.Result) bool, valued bool) (engine.Result, bool) {
	ctx, cancel := Context(o.Timeout)
	defer cancel()
	q := o.Eng.Quorum()
	key := fmt.Sprint(args[1])
	o.Eng.WaitWrites(ctx, key)
	var got []engine.Result
	if valued {
		got = o.Eng.BroadcastValue(ctx, key, nil, args...)
	} else {
		got = o.Eng.Broadcast(ctx, key, nil, args...)
	}
	w.Done(got, applied)
	counts := map[string]int{}
	answered := 0
	for _, r := range got {
		k, ok := answerKey(r)
		if !ok || !r.Counts {
			continue
		}
		answered++
		if counts[k]++; counts[k] >= q {
			return r, true
		}
	}
	if answered < q {
		WriteErr(c, o.Eng.NoQuorum(answered, key))
		return engine.Result{}, false
	}
	c.WriteError("TRYAGAIN redlock-proxy: the masters disagree and no answer holds a quorum")
	return engine.Result{}, false
}

// WriteResult answers a master's answer r as the client's reply.
func (o Op) WriteResult(c redcon.Conn, r engine.Result) {
	var re redis.Error
	switch {
	case r.Err == redis.Nil:
		c.WriteNull()
	case r.Err == nil && IsLarge(r.Val):
		c.WriteError(TooLargeReply(r.Val.(engine.LargeValue).Len, o.MaxValue))
	case errors.As(r.Err, &re):
		c.WriteError(re.Error())
	default:
		switch v := r.Val.(type) {
		case string:
			if v == "OK" {
				c.WriteString(v)
			} else {
				c.WriteBulkString(v)
			}
		case int64:
			c.WriteInt64(v)
		default:
			c.WriteAny(v)
		}
	}
}

// Count sends a command answering 0 or 1 to every master and
// reports whether a quorum answered 1. It answers false only when a quorum
// of 1s is out of reach even if every master that did not answer, or whose
// answer does not count (engine.Result.Counts), had answered 1; otherwise
// the error is a master's own error reply, or NOQUORUM. A write of a TTL
// on a lock key passes w (engine.NoteTTL): it took effect where a master
// answered 1.
func (o Op) Count(w *engine.TTLWrite, args ...[]byte) (bool, error) {
	ok, _, err := o.Ones(w, args...)
	return ok, err
}

// Ones is Count, and also counts the masters whose
// answer (one that counts) was 1: those that held the key. Where the
// backend holds data beside the locks, a NOQUORUM with ones > 0 says that
// the key is a lock on masters that answered, which the command could not
// end on a quorum; with ones = 0 no master that answered held it.
func (o Op) Ones(w *engine.TTLWrite, args ...[]byte) (bool, int, error) {
	ctx, cancel := Context(o.Timeout)
	defer cancel()
	q, n := o.Eng.Quorum(), o.Eng.Masters()
	key := string(args[1])
	o.Eng.WaitWrites(ctx, key)
	ones, zeros := 0, 0
	var errReply error
	got := o.Eng.Broadcast(ctx, key, func(got []engine.Result) bool {
		r := got[len(got)-1]
		var re redis.Error
		switch {
		case r.Err == nil && r.Counts:
			if v, _ := r.Val.(int64); v == 1 {
				ones++
			} else {
				zeros++
			}
		case errors.As(r.Err, &re):
			errReply = r.Err
		}
		return false // wait for every master, as BroadcastMajority does
	}, ToAny(args)...)
	w.Done(got, func(r engine.Result) bool { v, _ := r.Val.(int64); return r.Err == nil && v == 1 })
	switch {
	case ones >= q:
		return true, ones, nil
	case errReply != nil:
		return false, ones, errReply
	case n-zeros < q: // even with every other master answering 1
		return false, ones, nil
	}
	return false, ones, o.Eng.NoQuorum(ones+zeros, key)
}
