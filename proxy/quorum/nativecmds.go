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
// LOCK.INFO): their arguments and their replies. Package proxy's
// nativecmds.go runs them on the fenced locks of the client's engine
// (engine.Client.AcquireFenced…), with what needs the session or the
// proxy's own state: leases (lease.go), waiters (lockwait.go), the lock
// keys.

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
