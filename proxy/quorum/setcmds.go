package quorum

import (
	"errors"
	"time"

	"github.com/tidwall/redcon"

	"github.com/redlock-proxy/redlock-proxy/redlock/engine"
)

// Acquire is a quorum acquire of one key: SET … NX, SETNX, and an acquire
// script of one key (engine.Client.AcquireGet), counted in o.Metrics; an
// acquire not granted returns the value a quorum holds (Prev), for SET …
// NX GET and a reclaiming script. Several keys are AcquireAll's.
func (o Op) Acquire(key, value string, ttl time.Duration) (engine.AcquireResult, error) {
	ctx, cancel := Context(o.Timeout)
	defer cancel()
	start := time.Now()
	r, err := o.Eng.AcquireGet(ctx, key, value, ttl)
	o.Metrics.Acquire(err, time.Since(start))
	return r, err
}

// WriteAcquired answers a quorum acquire of SET … NX or SETNX (r, err):
// through reply whether it was granted, or with get (SET … NX GET) the
// previous value. maxValue is proxy.max_lock_value.
func WriteAcquired(c redcon.Conn, r engine.AcquireResult, err error, get bool, maxValue int, reply func(ok bool)) {
	switch {
	case err != nil && !errors.Is(err, engine.ErrNotAcquired):
		WriteErr(c, err)
	case !get:
		reply(err == nil)
	case err == nil:
		c.WriteNull() // NX GET: the key was absent and is now set
	case r.PrevTooLarge != nil:
		c.WriteError(TooLargeReply(r.PrevTooLarge.Len, maxValue))
	case r.Prev != nil:
		c.WriteBulkString(*r.Prev)
	default:
		// Not granted, yet no value holds a quorum: a single Redis would
		// never be in this state, and nil would claim the key was set.
		c.WriteError("TRYAGAIN redlock-proxy: no value holds a quorum of masters; lock not acquired")
	}
}

// WriteSetNXPast answers SET … NX with an absolute expiry already past
// from the quorum's read of the key (k, of type typ, or err), as Redis
// answers it (see proxy's setNXPast), and returns the acquire's outcome
// to count (counted false: none, a WRONGTYPE reply).
func WriteSetNXPast(c redcon.Conn, k engine.KeyState, typ string, err error, get bool) (outcome error, counted bool) {
	switch {
	case err != nil:
		WriteErr(c, err)
		return err, true
	case !k.Exists:
		if get {
			c.WriteNull()
		} else {
			c.WriteString("OK")
		}
		return engine.ErrValiditySpent, true
	case get && typ != "string":
		c.WriteError(WrongType)
		return nil, false
	}
	if get {
		c.WriteBulkString(k.Value)
	} else {
		c.WriteNull()
	}
	return engine.ErrNotAcquired, true
}
