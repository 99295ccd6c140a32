package quorum

import (
	"cmp"
	"context"
	"errors"
	"time"

	"github.com/tidwall/redcon"

	"github.com/redlock-proxy/redlock-proxy/proxy/lockscripts"
	"github.com/redlock-proxy/redlock-proxy/redlock/engine"
)

// Recognised lock scripts (package lockscripts, each a lockscripts.Spec)
// run as quorum operations: here are each operation's call on the engine,
// built from the script's keys and arguments, and the reply the script
// would have given on one Redis holding the quorum's state (the spec's
// raw replies, integers, arrays, nil, errors). Package proxy's eval.go
// finds the spec and reads its token and TTL, and keeps the leases and
// mixed mode's mirrors.

// Metrics counts acquires, extends and releases and how long they took
// (package proxy passes its admin.Metrics).
type Metrics interface {
	Acquire(err error, d time.Duration)
	Extend(ok bool, err error, d time.Duration)
	Release(ok bool, err error, d time.Duration)
}

// WriteSpec writes one of a recognised script's replies; nil as the
// connection's null (RESP3's own in RESP3, as Redis answers it there).
func WriteSpec(c redcon.Conn, reply string) {
	if reply == lockscripts.NilReply {
		c.WriteNull()
		return
	}
	c.WriteRaw([]byte(reply))
}

// AnswerSpec answers an operation that took effect (ok) or did not, in the
// script's replies, or its error.
func AnswerSpec(c redcon.Conn, spec *lockscripts.Spec, ok bool, err error) {
	switch {
	case err != nil:
		WriteErr(c, err)
	case ok:
		WriteSpec(c, spec.OK)
	default:
		WriteSpec(c, spec.NotOwned)
	}
}

// WriteOutcome answers an acquire, extend or release of keys that took
// effect (ok) or not: the script's own reply (notOK when it did not), or,
// for a multi-key script that answers a count, the number of keys.
func WriteOutcome(c redcon.Conn, spec *lockscripts.Spec, keys int, ok bool, notOK string) {
	switch {
	case keys > 1 && !spec.MultiOutcome && ok:
		c.WriteInt(keys)
	case keys > 1 && !spec.MultiOutcome:
		c.WriteInt(0)
	case ok:
		WriteSpec(c, spec.OK)
	default:
		WriteSpec(c, notOK)
	}
}

// Release is a release script's call: key deleted from every master where
// it holds token (engine.Client.Release), counted in o.Metrics.
func (o Op) Release(key, token string) (engine.ReleaseResult, error) {
	ctx, cancel := Context(o.Timeout)
	defer cancel()
	start := time.Now()
	r, err := o.Eng.Release(ctx, key, token)
	o.Metrics.Release(r.Released(o.Eng.Quorum()), err, time.Since(start))
	return r, err
}

// WriteRelease answers a release script from the quorum's release (r, or
// err); released, if not nil, runs first when the lock was released (the
// reply is spec.OK). With dataBeside the backend holds data beside the
// locks (proxy/mixed.go), and mirror says what the lock's mirror there
// held: 1 the token (and no longer does), -1 something else, 0 nothing.
func (o Op) WriteRelease(c redcon.Conn, spec *lockscripts.Spec, r engine.ReleaseResult, err error, mirror int, dataBeside bool, released func()) {
	q := o.Eng.Quorum()
	ok := false
	switch {
	case mirror == 1:
		// The application's keyspace held the token, and no longer does,
		// as on one Redis; the quorum's copy went too, or goes with its TTL.
		ok = true
	case mirror == -1:
		// Data took the lock's place: on one Redis the key no longer holds
		// the token, and the script answers so.
		WriteSpec(c, spec.NotOwned)
		return
	case dataBeside && err == nil:
		// Not in the application's keyspace (renamed, expired there, or
		// lost with the backend): on one Redis the script finds nothing.
		// The quorum's copy went all the same.
		WriteSpec(c, spec.Absent)
		return
	case err != nil:
		WriteErr(c, err)
		return
	case r.Released(q):
		ok = true
	case r.Absent >= q:
		WriteSpec(c, spec.Absent)
		return
	default:
		WriteSpec(c, spec.NotOwned)
		return
	}
	if ok && released != nil {
		released()
	}
	WriteSpec(c, spec.OK)
}

// ReleaseAll is a multi-key release that answers a count (node-redlock's
// scripts): decided key by key, each key deleted wherever it holds token
// (engine.Client.ReleaseAll). It returns the number of keys released.
func (o Op) ReleaseAll(keys []string, token string) (int, error) {
	ctx, cancel := Context(o.Timeout)
	defer cancel()
	start := time.Now()
	n, err := o.Eng.ReleaseAll(ctx, keys, token)
	o.Metrics.Release(n > 0, err, time.Since(start))
	return n, err
}

// WriteReleaseCount answers ReleaseAll's count (n, or err), and ZREM's of
// a semaphore's permits (ReleasePermits).
func WriteReleaseCount(c redcon.Conn, n int, err error) {
	if err != nil {
		WriteErr(c, err)
		return
	}
	c.WriteInt(n)
}

// ReleaseEvery is a multi-key release that answers an outcome
// (spec.MultiOutcome): all or none, as one Redis running such a script
// does. A master deletes the keys only where every one holds token, and
// the lock was held when a quorum did (engine.Client.ReleaseEvery).
// WriteRelease, without a mirror, answers it.
func (o Op) ReleaseEvery(keys []string, token string) (engine.ReleaseResult, error) {
	ctx, cancel := Context(o.Timeout)
	defer cancel()
	start := time.Now()
	r, err := o.Eng.ReleaseEvery(ctx, keys, token)
	o.Metrics.Release(r.Released(o.Eng.Quorum()), err, time.Since(start))
	return r, err
}

// Extend is an extend script's call: key renewed for ttl on every master
// where it holds token, the TTL set as mode says (engine.Client.Extend),
// counted in o.Metrics.
func (o Op) Extend(key, token string, ttl time.Duration, mode engine.ExtendMode) (engine.ExtendResult, bool, error) {
	ctx, cancel := Context(o.Timeout)
	defer cancel()
	return o.extend(ctx, key, token, ttl, mode)
}

func (o Op) extend(ctx context.Context, key, token string, ttl time.Duration, mode engine.ExtendMode) (engine.ExtendResult, bool, error) {
	start := time.Now()
	r, extended, err := o.Eng.Extend(ctx, key, token, ttl, mode)
	o.Metrics.Extend(extended, err, time.Since(start))
	return r, extended, err
}

// WriteExtend answers an extend script of one key from the quorum's
// extend (r and extended, or err): spec.NoTTL, where the script has one,
// when the key had no TTL to add to.
func (o Op) WriteExtend(c redcon.Conn, spec *lockscripts.Spec, r engine.ExtendResult, extended bool, err error) {
	switch {
	case err != nil:
		WriteErr(c, err)
	case extended:
		WriteSpec(c, spec.OK)
	case r.NoTTL > 0 && spec.NoTTL != "":
		WriteSpec(c, spec.NoTTL)
	case r.Absent >= o.Eng.Quorum():
		WriteSpec(c, spec.Absent)
	default:
		WriteSpec(c, spec.NotOwned)
	}
}

// ExtendAll is a multi-key extend script's call: keys renewed for ttl on
// every master where all of them hold token, decided on the quorum
// (engine.Client.ExtendAll), counted in o.Metrics.
func (o Op) ExtendAll(keys []string, token string, ttl time.Duration) (engine.ExtendResult, bool, error) {
	ctx, cancel := Context(o.Timeout)
	defer cancel()
	start := time.Now()
	r, extended, err := o.Eng.ExtendAll(ctx, keys, token, ttl)
	o.Metrics.Extend(extended, err, time.Since(start))
	return r, extended, err
}

// WriteExtendAll answers a multi-key extend script of keys keys from
// ExtendAll's outcome (r and extended, or err).
func (o Op) WriteExtendAll(c redcon.Conn, spec *lockscripts.Spec, keys int, r engine.ExtendResult, extended bool, err error) {
	switch {
	case err != nil:
		WriteErr(c, err)
	case !extended && r.Absent >= o.Eng.Quorum():
		WriteOutcome(c, spec, keys, false, spec.Absent)
	default:
		WriteOutcome(c, spec, keys, extended, spec.NotOwned)
	}
}

// ExtendIfLeft runs an extend that goes ahead only while the lock has at
// least least ms left, and answers as the script does, {outcome, TTL left
// before}: the lock's state is read on the quorum, then the extend is the
// usual compare-and-extend on the quorum (the lock may be lost in between,
// which the extend finds: -1).
func (o Op) ExtendIfLeft(c redcon.Conn, key, token string, least int64, ttl time.Duration) {
	ctx, cancel := Context(o.Timeout)
	defer cancel()
	reply := func(outcome, left int64) {
		c.WriteArray(2)
		c.WriteInt64(outcome)
		c.WriteInt64(left)
	}
	k, err := o.Eng.Read(ctx, key)
	switch {
	case err != nil:
		WriteErr(c, err)
		return
	case !k.Exists:
		reply(-1, -2)
		return
	}
	// The script compares what is left before it reads the value.
	left := ms(k.PTTL)
	switch {
	case left < least:
		reply(0, left)
		return
	case k.Value != token:
		reply(-1, left)
		return
	}
	_, extended, err := o.extend(ctx, key, token, ttl, engine.ExtendSet)
	switch {
	case err != nil:
		WriteErr(c, err)
	case extended:
		reply(1, left)
	default:
		reply(-1, left)
	}
}

// ms is a TTL in milliseconds as Redis answers it: -1 and -2 as they are.
func ms(d time.Duration) int64 {
	if d < 0 {
		return int64(d)
	}
	return d.Milliseconds()
}

// Inspect answers an inspect script (redlock-universal's): {value, PTTL}
// of key as the quorum reads it, nil when a quorum does not hold it.
func (o Op) Inspect(c redcon.Conn, key string) {
	k, err := o.Read([]byte(key))
	switch {
	case err != nil:
		WriteErr(c, err)
	case !k.Exists:
		c.WriteNull()
	default:
		c.WriteArray(2)
		c.WriteBulkString(k.Value)
		c.WriteInt64(ms(k.PTTL))
	}
}

// OwnerTTL answers an owner TTL script of one key: the key's TTL as the
// quorum reads it when it holds token (with spec.Positive, 0 rather than
// a negative TTL), else spec.Absent or spec.NotOwned.
func (o Op) OwnerTTL(c redcon.Conn, spec *lockscripts.Spec, key, token string) {
	k, err := o.Read([]byte(key))
	switch {
	case err != nil:
		WriteErr(c, err)
	case !k.Exists:
		WriteSpec(c, spec.Absent)
	case k.Value != token:
		WriteSpec(c, spec.NotOwned)
	case k.PTTL < 0 && spec.Positive:
		c.WriteInt(0)
	default:
		c.WriteInt64(ms(k.PTTL))
	}
}

// OwnerTTLAll answers an owner TTL of several keys as one Redis holding
// the quorum's state would: when each key holds token on a quorum, the
// least of the keys' TTLs (each the quorum's, engine.KeyState.PTTL), a
// key without expiry counting as the longest; with spec.Positive, the
// least positive one, 0 when none is. Otherwise spec.Absent when the keys
// that do not hold token are absent from a quorum, spec.NotOwned when one
// holds another value; NOQUORUM when a key's state cannot be known and
// none is known not to hold token. The keys are read under one operation
// context.
func (o Op) OwnerTTLAll(c redcon.Conn, spec *lockscripts.Spec, keys []string, token string) {
	ctx, cancel := Context(o.Timeout)
	defer cancel()
	least := int64(-1)
	notHeld, absent := 0, 0
	var rerr error
	for _, key := range keys {
		k, err := o.Eng.Read(ctx, key)
		p := ms(k.PTTL)
		switch {
		case err != nil:
			rerr = cmp.Or(rerr, err)
		case !k.Exists:
			notHeld++
			absent++
		case k.Value != token:
			notHeld++
		case p < 0 || p == 0 && spec.Positive:
		case least < 0 || p < least:
			least = p
		}
	}
	switch {
	case notHeld > 0 && absent == notHeld:
		WriteSpec(c, spec.Absent)
	case notHeld > 0:
		WriteSpec(c, spec.NotOwned)
	case rerr != nil:
		WriteErr(c, rerr)
	case least < 0 && spec.Positive:
		c.WriteInt(0)
	default:
		c.WriteInt64(least)
	}
}

// TimeProbe answers Symfony Lock's probe of TIME in scripts as the script
// does on a lock key: 1, once key is set to "1" for a millisecond on a
// quorum of masters (as SET of a lock key is).
func (o Op) TimeProbe(c redcon.Conn, key string) {
	w, err := o.Eng.NoteTTL(key, time.Millisecond)
	if err != nil {
		WriteErr(c, err)
		return
	}
	if _, ok := o.Majority(c, []any{"set", key, "1", "px", "1"}, w, func(r engine.Result) bool { return r.Err == nil }, false); ok {
		c.WriteInt(1)
	}
}

// AcquireAll is an acquire script's call on several keys: all or none on
// each master (engine.Client.AcquireAll), counted in o.Metrics. A granted
// acquire answers WriteOutcome's OK; one not granted may be reclaimed
// (Reacquire).
func (o Op) AcquireAll(keys []string, token string, ttl time.Duration) (engine.AcquireResult, error) {
	ctx, cancel := Context(o.Timeout)
	defer cancel()
	start := time.Now()
	r, err := o.Eng.AcquireAll(ctx, keys, token, ttl)
	o.Metrics.Acquire(err, time.Since(start))
	return r, err
}

// Reacquire is a reclaiming acquire's second call, when a quorum holds the
// keys for the caller already (lockscripts.Spec.Reclaims): each master
// where every key holds token, or a value h takes for the caller's, sets
// them to token with the new TTL, decided on the quorum as an extend is
// (engine.Client.Reacquire), and counted as one.
func (o Op) Reacquire(keys []string, token string, ttl time.Duration, h engine.Holder) (bool, error) {
	ctx, cancel := Context(o.Timeout)
	defer cancel()
	start := time.Now()
	_, renewed, err := o.Eng.Reacquire(ctx, keys, token, ttl, h)
	o.Metrics.Extend(renewed, err, time.Since(start))
	return renewed, err
}

// WriteReacquired answers Reacquire's outcome (renewed, or err) for an
// acquire script of keys keys: spec.Reclaimed where the caller took the
// keys back and the script answers an outcome.
func WriteReacquired(c redcon.Conn, spec *lockscripts.Spec, keys int, renewed bool, err error) {
	switch {
	case err != nil:
		WriteErr(c, err)
	case renewed && (keys == 1 || spec.MultiOutcome):
		WriteSpec(c, spec.Reclaimed)
	default:
		WriteOutcome(c, spec, keys, renewed, spec.NotOwned)
	}
}

// RWScript runs a read/write lock script (Symfony Lock's sorted-set
// format) on the quorum and answers as the library's script would on one
// Redis holding the quorum's state: spec.OK when it took effect on a
// quorum, else spec.NotOwned. ttl is an acquire's or an extend's TTL.
// Acquires, extends and releases are counted in o.Metrics.
func (o Op) RWScript(c redcon.Conn, spec *lockscripts.Spec, key, token string, ttl time.Duration) {
	ctx, cancel := Context(o.Timeout)
	defer cancel()
	start := time.Now()
	var ok bool
	var err error
	switch spec.Op {
	case lockscripts.OpRWAcquire:
		_, err = o.Eng.AcquireRW(ctx, key, token, ttl, spec.Shared)
		o.Metrics.Acquire(err, time.Since(start))
		ok = err == nil
		if errors.Is(err, engine.ErrNotAcquired) {
			err = nil
		}
	case lockscripts.OpRWExtend:
		_, ok, err = o.Eng.ExtendRW(ctx, key, token, ttl)
		o.Metrics.Extend(ok, err, time.Since(start))
	case lockscripts.OpRWRelease:
		var r engine.ReleaseResult
		r, err = o.Eng.ReleaseRW(ctx, key, token)
		ok = r.Released(o.Eng.Quorum())
		o.Metrics.Release(ok, err, time.Since(start))
	case lockscripts.OpRWHeld:
		ok, err = o.Eng.HeldRW(ctx, key, token)
	}
	AnswerSpec(c, spec, ok, err)
}

// PermitScript runs a permit script of a counting semaphore
// (redis-semaphore's) on the quorum, decided by the semaphore's own quorum
// (engine.PermitQuorum), and answers as the library's script would on one
// Redis holding the quorum's state: spec.OK when it took effect,
// spec.NotOwned when not (no permit free, not held, not a member),
// NOQUORUM when that cannot be known. limit (PermitLimit) and ttl are an
// acquire's or a refresh's. Acquires, refreshes and releases are counted
// in o.Metrics.
func (o Op) PermitScript(c redcon.Conn, spec *lockscripts.Spec, key, token string, limit int64, ttl time.Duration) {
	ctx, cancel := Context(o.Timeout)
	defer cancel()
	start := time.Now()
	switch spec.Op {
	case lockscripts.OpPermitRelease:
		n, err := o.Eng.ReleasePermit(ctx, key, token)
		o.Metrics.Release(n > 0, err, time.Since(start))
		AnswerSpec(c, spec, n > 0, err)
	case lockscripts.OpPermitAcquire:
		_, err := o.Eng.AcquirePermit(ctx, key, token, limit, ttl)
		o.Metrics.Acquire(err, time.Since(start))
		if errors.Is(err, engine.ErrNotAcquired) {
			AnswerSpec(c, spec, false, nil)
			return
		}
		AnswerSpec(c, spec, err == nil, err)
	case lockscripts.OpPermitRefresh:
		_, extended, err := o.Eng.ExtendPermit(ctx, key, token, limit, ttl)
		o.Metrics.Extend(extended, err, time.Since(start))
		AnswerSpec(c, spec, extended, err)
	}
}

// ReleasePermits is ZREM of a semaphore's permits: each member removed
// from every master (engine.Client.ReleasePermit), counted in o.Metrics as
// one release. It returns how many of them a quorum held (the semaphore's
// limit, and so its own quorum, is not known here), for WriteReleaseCount.
func (o Op) ReleasePermits(key string, members ...string) (int, error) {
	ctx, cancel := Context(o.Timeout)
	defer cancel()
	start := time.Now()
	n, err := o.Eng.ReleasePermit(ctx, key, members...)
	o.Metrics.Release(n > 0, err, time.Since(start))
	return n, err
}

// EndLock deletes key from every master where it holds token
// (engine.Client.Release), as Release does, without counting it: where
// the backend holds data beside the locks (proxy/mixed.go, flush.go), the
// proxy ends a lock so when the lock's mirror shows that it ended there
// (data took its place, it expired or was renamed, a flush erased it); no
// client asked for a release. It reports whether a quorum held the token.
func (o Op) EndLock(key, token string) (bool, error) {
	ctx, cancel := Context(o.Timeout)
	defer cancel()
	r, err := o.Eng.Release(ctx, key, token)
	return err == nil && r.Released(o.Eng.Quorum()), err
}
