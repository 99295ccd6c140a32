package quorum

import (
	"errors"
	"strconv"
	"strings"
	"time"

	"github.com/tidwall/redcon"

	"github.com/redlock-proxy/redlock-proxy/proxy/lockscripts"
	"github.com/redlock-proxy/redlock-proxy/redlock/engine"
)

// Redisson's RLock (docs/clients.md#redisson): the lock is a hash whose
// field, "<client id>:<thread id>", counts the holder's holds; contenders
// are told the lock's PTTL and wait on the channel KEYS[2] for the unlock
// message. Here are each of its scripts' arguments, engine calls (the hash
// lock, redlock/engine/hashlock.go) and replies, as the script answers on
// one Redis holding the quorum's state. Package proxy's redisson.go checks
// the keys are lock keys, reads the TTL and publishes the unlock message on
// the backend, between the quorum step and the reply.

// HashKeys answers, when keys is not the number of keys spec's script
// takes, the error, and reports whether it is. Redisson's batched renewal
// takes any number.
func HashKeys(c redcon.Conn, spec *lockscripts.Spec, keys int) bool {
	need := map[lockscripts.Op]int{lockscripts.OpHashAcquire: 1, lockscripts.OpHashExtend: 1, lockscripts.OpHashRelease: 2, lockscripts.OpHashForceUnlock: 2}[spec.Op]
	if spec.Op == lockscripts.OpHashRelease && spec.Form == lockscripts.HashPublishLatch {
		need = 3
	}
	if spec.Op == lockscripts.OpHashExtendBatch || keys == need {
		return true
	}
	c.WriteError("ERR redlock-proxy: the '" + spec.Name + "' script takes " + strconv.Itoa(need) + " keys")
	return false
}

// HashHolder reads a hash-lock script's holder and checks the database it
// selects (ScriptToken); a forced unlock has no holder, only the database.
func HashHolder(c redcon.Conn, db int, spec *lockscripts.Spec, argv [][]byte) (string, bool) {
	if spec.Op == lockscripts.OpHashForceUnlock {
		return "", SelectsDatabase(c, db, spec, argv)
	}
	return ScriptToken(c, db, spec, argv)
}

// PublishCommand reads the command an unlock publishes with: PUBLISH, or
// the one in ARGV[i+1] (PUBLISH or SPUBLISH).
func PublishCommand(c redcon.Conn, spec *lockscripts.Spec, argv [][]byte, i int) (string, bool) {
	if spec.Op == lockscripts.OpHashRelease && spec.Form == lockscripts.HashPublishFixed {
		return "publish", true
	}
	v, _ := Arg(argv, i)
	switch strings.ToLower(v) {
	case "publish", "spublish":
		return strings.ToLower(v), true
	}
	c.WriteError("ERR redlock-proxy: the '" + spec.Name + "' script publishes with PUBLISH or SPUBLISH in ARGV[" + strconv.Itoa(i+1) + "]")
	return "", false
}

// HashLatch reads a release's latch (from Redisson 3.24): the key KEYS[3]
// and how long it keeps the outcome, ARGV[5] ms. "" for a release without
// one.
func HashLatch(c redcon.Conn, spec *lockscripts.Spec, keys []string, argv [][]byte) (string, int64, bool) {
	if spec.Form != lockscripts.HashPublishLatch {
		return "", 0, true
	}
	v, _ := Arg(argv, 4)
	n, ok := lockscripts.ParseInt(v)
	if !ok || n <= 0 {
		c.WriteError("ERR redlock-proxy: the '" + spec.Name + "' script needs the latch's time in ARGV[5]")
		return "", 0, false
	}
	return keys[2], n, true
}

// HashHolders reads the batched renewal's holders: ARGV[i+1] holds KEYS[i].
func HashHolders(c redcon.Conn, spec *lockscripts.Spec, keys int, argv [][]byte) ([]string, bool) {
	if len(argv) < keys+1 {
		c.WriteError("ERR redlock-proxy: the '" + spec.Name + "' script needs a holder in ARGV for each key")
		return nil, false
	}
	out := make([]string, keys)
	for i, b := range argv[1 : keys+1] {
		out[i] = string(b)
	}
	return out, true
}

// AcquireHash takes one hold of the hash lock key for holder
// (engine.Client.AcquireHash), counted in o.Metrics.
func (o Op) AcquireHash(key, holder string, ttl time.Duration) (engine.HashResult, error) {
	ctx, cancel := Context(o.Timeout)
	defer cancel()
	start := time.Now()
	r, err := o.Eng.AcquireHash(ctx, key, holder, ttl)
	o.Metrics.Acquire(err, time.Since(start))
	return r, err
}

// WriteHashAcquired answers an acquire: nil when taken, else the holder's
// PTTL, which Redisson waits for the unlock message before it tries again.
func WriteHashAcquired(c redcon.Conn, r engine.HashResult, err error) {
	switch {
	case err == nil:
		c.WriteNull()
	case !errors.Is(err, engine.ErrNotAcquired):
		WriteErr(c, err)
	default:
		c.WriteInt64(hashPTTL(r.PTTL))
	}
}

// hashPTTL is a refused acquire's reply: the holder's PTTL, at least 1 ms
// when no copy told it (a split vote: try again soon).
func hashPTTL(p time.Duration) int64 {
	if p < 0 {
		return int64(p)
	}
	return max(ms(p), 1)
}

// ExtendHash renews holder's hash lock key (engine.Client.ExtendHash),
// counted in o.Metrics.
func (o Op) ExtendHash(key, holder string, ttl time.Duration) (bool, error) {
	ctx, cancel := Context(o.Timeout)
	defer cancel()
	start := time.Now()
	_, extended, err := o.Eng.ExtendHash(ctx, key, holder, ttl)
	o.Metrics.Extend(extended, err, time.Since(start))
	return extended, err
}

// WriteDone answers a write that says whether it took effect (a hash
// lock's renewal or forced unlock, an expiry of a lock key): 1 when it
// took effect on a quorum, else 0, or the error.
func WriteDone(c redcon.Conn, ok bool, err error) {
	switch {
	case err != nil:
		WriteErr(c, err)
	case ok:
		c.WriteInt(1)
	default:
		c.WriteInt(0)
	}
}

// ForceUnlockHash deletes the hash lock key whoever holds it, counted in
// o.Metrics as a release. When it did, the unlock message is published.
func (o Op) ForceUnlockHash(key string) (bool, error) {
	start := time.Now()
	deleted, err := o.Count(nil, []byte("DEL"), []byte(key))
	o.Metrics.Release(deleted, err, time.Since(start))
	return deleted, err
}

// ReleaseHash gives back one of holder's holds of the hash lock key
// (engine.Client.ReleaseHash), counted in o.Metrics. With a latch
// (HashLatch) the outcome is kept there on every master for latchMS ms,
// as the script sets it, and a retried release with the same latch
// answers it again without giving back another hold; the latch is
// answered once a quorum has it.
func (o Op) ReleaseHash(key, holder string, ttl time.Duration, latch string, latchMS int64) (engine.HashRelease, error) {
	ctx, cancel := Context(o.Timeout)
	defer cancel()
	start := time.Now()
	r, err := o.Eng.ReleaseHash(ctx, key, holder, ttl, latch)
	o.Metrics.Release(r.Held, err, time.Since(start))
	if err != nil || r.Latched || !r.Held || latch == "" {
		return r, err
	}
	out := int64(0)
	if r.Freed {
		out = 1
	}
	q, n := o.Eng.Quorum(), 0
	o.Eng.Broadcast(ctx, latch, func([]engine.Result) bool { n++; return n >= q }, "set", latch, out, "px", latchMS)
	return r, nil
}

// HashUnlocked reports whether a release freed the lock: the last hold
// was given back, and the unlock message is to be published.
func HashUnlocked(r engine.HashRelease, err error) bool {
	return err == nil && !r.Latched && r.Held && r.Freed
}

// WriteHashReleased answers a release: 1 when it freed the lock, 0 when
// holds are left, nil when the holder held none; a latched outcome as the
// latch holds it (nil when that is not a number).
func WriteHashReleased(c redcon.Conn, r engine.HashRelease, err error) {
	switch {
	case err != nil:
		WriteErr(c, err)
	case r.Latched && r.LatchNil:
		c.WriteNull()
	case r.Latched:
		c.WriteInt64(r.LatchVal)
	case !r.Held:
		c.WriteNull()
	case r.Freed:
		c.WriteInt64(1)
	default:
		c.WriteInt64(0)
	}
}

// ExtendHashBatch is Redisson's batched renewal: each master renews the
// keys in one step, in order, as the script does, each key decided on the
// quorum (engine.Client.ExtendHashBatch); holders[i] holds keys[i]. Each
// key's renewal is counted in o.Metrics.
func (o Op) ExtendHashBatch(keys, holders []string, ttl time.Duration) ([]bool, error) {
	ctx, cancel := Context(o.Timeout)
	defer cancel()
	start := time.Now()
	out, err := o.Eng.ExtendHashBatch(ctx, keys, holders, ttl)
	for _, ok := range out {
		o.Metrics.Extend(ok, err, time.Since(start))
	}
	return out, err
}

// WriteHashBatch answers the batched renewal: 1 or 0 per key. A key whose
// renewal is not decided makes the whole answer the error (NOQUORUM),
// which Redisson tries again.
func WriteHashBatch(c redcon.Conn, out []bool, err error) {
	if err != nil {
		WriteErr(c, err)
		return
	}
	c.WriteArray(len(out))
	for _, ok := range out {
		if ok {
			c.WriteInt(1)
		} else {
			c.WriteInt(0)
		}
	}
}
