package quorum

import (
	"errors"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/tidwall/redcon"

	"github.com/redlock-proxy/redlock-proxy/proxy/wire"
	"github.com/redlock-proxy/redlock-proxy/redlock/engine"
)

// The native lock commands (LOCK.ACQUIRE, LOCK.RELEASE, LOCK.EXTEND,
// LOCK.INFO): their arguments, their calls on the fenced locks of the
// client's engine (Op.AcquireFenced…, engine.Client.AcquireFenced…) and
// their replies. Package proxy's nativecmds.go calls them, with what needs
// the session or the proxy's own state: leases (lease.go), waiters
// (lockwait.go, woken by a release that frees the key), the lock keys.

// LockAcquire is LOCK.ACQUIRE's arguments.
type LockAcquire struct {
	Key       string
	TTL       time.Duration // 0 with Lease
	Lease     bool          // bound to the client's connection
	Token     string        // "" when the proxy generates it
	Wait      time.Duration // 0: answer at once
	Reentrant bool
}

// MaxTTLms bounds the native commands' TTLs and waits (about 12 days),
// far below overflow.
const MaxTTLms = 1 << 30

// ParseLockAcquire reads LOCK.ACQUIRE key (ttl_ms | LEASE) [TOKEN v]
// [WAIT ms] [REENTRANT] (args[0] is the command's name); msg is the error
// reply for bad arguments.
func ParseLockAcquire(args [][]byte) (o LockAcquire, msg string) {
	if len(args) < 3 {
		return o, "ERR wrong number of arguments for 'lock.acquire' command"
	}
	o.Key = string(args[1])
	if strings.EqualFold(string(args[2]), "lease") {
		o.Lease = true
	} else {
		ms, err := ParseInt(args[2])
		switch {
		case err != nil:
			return o, "ERR value is not an integer or out of range"
		case ms <= 0 || ms > MaxTTLms:
			return o, "ERR invalid expire time in 'lock.acquire' command"
		}
		o.TTL = time.Duration(ms) * time.Millisecond
	}
	tokenSet, waitSet := false, false
	for i := 3; i < len(args); i++ {
		switch opt := strings.ToLower(string(args[i])); {
		case opt == "token" && !tokenSet && i+1 < len(args):
			i++
			o.Token, tokenSet = string(args[i]), true
			if o.Token == "" {
				return o, "ERR redlock-proxy: TOKEN must not be empty"
			}
		case opt == "wait" && !waitSet && i+1 < len(args):
			i++
			ms, err := ParseInt(args[i])
			switch {
			case err != nil:
				return o, "ERR timeout is not an integer or out of range"
			case ms < 0:
				return o, "ERR timeout is negative"
			case ms > MaxTTLms:
				return o, "ERR timeout is out of range"
			}
			o.Wait, waitSet = time.Duration(ms)*time.Millisecond, true
		case opt == "reentrant" && !o.Reentrant:
			o.Reentrant = true
		default:
			return o, "ERR syntax error"
		}
	}
	if o.Reentrant && !tokenSet {
		return o, "ERR redlock-proxy: REENTRANT needs TOKEN (the holder's own token)"
	}
	return o, ""
}

// ParseLockExtend reads LOCK.EXTEND's TTL in ms; msg is the error reply
// when it is not a valid one.
func ParseLockExtend(arg []byte) (ttl time.Duration, msg string) {
	ms, err := ParseInt(arg)
	switch {
	case err != nil:
		return 0, "ERR value is not an integer or out of range"
	case ms <= 0 || ms > MaxTTLms:
		return 0, "ERR invalid expire time in 'lock.extend' command"
	}
	return time.Duration(ms) * time.Millisecond, ""
}

// AcquireFenced is one fenced acquire of a.Key for a.Token with a.TTL,
// reentrant when a.Reentrant says so (engine.Client.AcquireFenced),
// counted in o.Metrics. A refused one's RetryIn says when the holder's
// copies would expire.
func (o Op) AcquireFenced(a LockAcquire) (engine.FenceResult, error) {
	ctx, cancel := Context(o.Timeout)
	defer cancel()
	start := time.Now()
	r, err := o.Eng.AcquireFenced(ctx, a.Key, a.Token, a.TTL, a.Reentrant)
	o.Metrics.Acquire(err, time.Since(start))
	return r, err
}

// ReenterFenced grants a.Key again to a.Token when the token holds it
// already (engine.Client.ReenterFenced): a reentrant acquire that waits
// (WAIT) is granted ahead of the waiters this way. It is counted in
// o.Metrics as an acquire only when granted: a refused one goes on to
// wait its turn, whose acquires are counted.
func (o Op) ReenterFenced(a LockAcquire) (*engine.FenceGrant, error) {
	ctx, cancel := Context(o.Timeout)
	defer cancel()
	start := time.Now()
	r, err := o.Eng.ReenterFenced(ctx, a.Key, a.Token, a.TTL)
	if r.Grant != nil {
		o.Metrics.Acquire(err, time.Since(start))
	}
	return r.Grant, err
}

// ReleaseFenced gives back one hold of key by token
// (engine.Client.ReleaseFenced), counted in o.Metrics: r.Released when a
// quorum held the token, r.Freed when that was its last hold and the key
// is free (the caller wakes whoever waits for it).
func (o Op) ReleaseFenced(key, token string) (engine.FenceRelease, error) {
	ctx, cancel := Context(o.Timeout)
	defer cancel()
	start := time.Now()
	r, err := o.Eng.ReleaseFenced(ctx, key, token)
	o.Metrics.Release(r.Released, err, time.Since(start))
	return r, err
}

// UndoGrant gives back the hold a grant g of key added, and that alone,
// so that a reentrant grant leaves the holds other grants of its token
// added (engine.Client.ReleaseFenced). It is not counted: no client asked
// for it (the grant's client left before it was answered).
func (o Op) UndoGrant(key string, g *engine.FenceGrant) (engine.FenceRelease, error) {
	ctx, cancel := Context(o.Timeout)
	defer cancel()
	return o.Eng.ReleaseFenced(ctx, key, g.Token)
}

// ReleaseFencedAll gives back every hold of key by token at once
// (engine.Client.ReleaseFencedAll): a lease's release when its client has
// gone. It is not counted: no client asked for it.
func (o Op) ReleaseFencedAll(key, token string) (engine.FenceRelease, error) {
	ctx, cancel := Context(o.Timeout)
	defer cancel()
	return o.Eng.ReleaseFencedAll(ctx, key, token)
}

// ExtendFenced sets key's TTL to ttl where token holds it
// (engine.Client.ExtendFenced), counted in o.Metrics: the new validity,
// and whether a quorum extended it.
func (o Op) ExtendFenced(key, token string, ttl time.Duration) (time.Duration, bool, error) {
	ctx, cancel := Context(o.Timeout)
	defer cancel()
	start := time.Now()
	v, ok, err := o.Eng.ExtendFenced(ctx, key, token, ttl)
	o.Metrics.Extend(ok, err, time.Since(start))
	return v, ok, err
}

// InfoFenced reads key's fenced lock on every master
// (engine.Client.InfoFenced), for WriteLockInfo.
func (o Op) InfoFenced(key string) (engine.FenceInfo, error) {
	ctx, cancel := Context(o.Timeout)
	defer cancel()
	return o.Eng.InfoFenced(ctx, key)
}

// WriteGrant answers LOCK.ACQUIRE: [token, fencing number, validity ms],
// or a null array when not granted (after WAIT, if given).
func WriteGrant(c redcon.Conn, g *engine.FenceGrant, err error) {
	switch {
	case err != nil && !errors.Is(err, engine.ErrNotAcquired):
		WriteNativeErr(c, err)
	case g == nil:
		c.WriteRaw([]byte("*-1\r\n")) // as BLPOP answers a timeout
	default:
		c.WriteArray(3)
		c.WriteBulkString(g.Token)
		c.WriteInt64(g.Fence)
		c.WriteInt64(max(g.Validity.Milliseconds(), 1)) // granted: some validity is left
	}
}

// WriteLockReleased answers LOCK.RELEASE: 1 when a quorum held the token,
// else 0.
func WriteLockReleased(c redcon.Conn, released bool, err error) {
	switch {
	case err != nil:
		WriteNativeErr(c, err)
	case released:
		c.WriteInt(1)
	default:
		c.WriteInt(0)
	}
}

// WriteLockExtended answers LOCK.EXTEND: the new validity v in ms (at
// least 1), or 0 when the token does not hold the lock on a quorum.
func WriteLockExtended(c redcon.Conn, v time.Duration, extended bool, err error) {
	switch {
	case err != nil:
		WriteNativeErr(c, err)
	case extended:
		c.WriteInt64(max(v.Milliseconds(), 1))
	default:
		c.WriteInt(0)
	}
}

// WriteLockInfo answers LOCK.INFO: a flat map: token, fence, validity,
// holds (the quorum's view: nil, 0, -2, 0 when no token holds a quorum),
// then "masters", one flat map per master in configuration order: master
// (its index), token, pttl, fence, holds, counter, voting; a master that
// did not answer has error instead of the fields after master. Maps are
// RESP3's in RESP3, arrays of field-value pairs in RESP2, as HGETALL.
func WriteLockInfo(c redcon.Conn, info engine.FenceInfo, err error) {
	if err != nil {
		WriteNativeErr(c, err)
		return
	}
	wire.WriteMap(c, 5)
	c.WriteBulkString("token")
	writeOptString(c, info.Token)
	c.WriteBulkString("fence")
	c.WriteInt64(info.Fence)
	c.WriteBulkString("validity")
	c.WriteInt64(ms(info.Validity))
	c.WriteBulkString("holds")
	c.WriteInt64(info.Holds)
	c.WriteBulkString("masters")
	c.WriteArray(len(info.Masters))
	for i, m := range info.Masters {
		if m.Err != nil {
			msg := "no answer"
			var re redis.Error
			if errors.As(m.Err, &re) {
				msg = re.Error() // the master's own error reply
			}
			wire.WriteMap(c, 2)
			c.WriteBulkString("master")
			c.WriteInt(i)
			c.WriteBulkString("error")
			c.WriteBulkString(msg)
			continue
		}
		wire.WriteMap(c, 7)
		c.WriteBulkString("master")
		c.WriteInt(i)
		c.WriteBulkString("token")
		writeOptString(c, m.Token)
		c.WriteBulkString("pttl")
		c.WriteInt64(ms(m.PTTL))
		c.WriteBulkString("fence")
		c.WriteInt64(m.Fence)
		c.WriteBulkString("holds")
		c.WriteInt64(m.Holds)
		c.WriteBulkString("counter")
		c.WriteInt64(m.Counter)
		c.WriteBulkString("voting")
		if m.Trusted {
			c.WriteInt(1)
		} else {
			c.WriteInt(0)
		}
	}
}

func writeOptString(c redcon.Conn, s *string) {
	if s == nil {
		c.WriteNull()
		return
	}
	c.WriteBulkString(*s)
}

// WriteNativeErr answers an error of a native command: the masters' own
// error when every master that failed answered with one (a key of another
// type, a fencing counter that is not a number), else as WriteErr does.
func WriteNativeErr(c redcon.Conn, err error) {
	var qe *engine.QuorumError
	if errors.As(err, &qe) && len(qe.Nodes) > 0 {
		var first redis.Error
		for _, ne := range qe.Nodes {
			var re redis.Error
			if !errors.As(ne, &re) {
				first = nil
				break
			}
			if first == nil {
				first = re
			}
		}
		if first != nil {
			c.WriteError(first.Error())
			return
		}
	}
	WriteErr(c, err)
}
