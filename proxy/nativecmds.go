package proxy

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/tidwall/redcon"

	"github.com/redlock-proxy/redlock-proxy/proxy/quorum"
	"github.com/redlock-proxy/redlock-proxy/proxy/wire"
	"github.com/redlock-proxy/redlock-proxy/redlock/engine"
)

// The native lock commands: LOCK.ACQUIRE, LOCK.RELEASE, LOCK.EXTEND and
// LOCK.INFO. Their locks are ordinary lock keys holding the token (GET and
// the unlock scripts see them), with a fencing number and a hold count kept
// beside them on every master (engine.FenceKeys).

// acquireOpts are the parsed arguments of LOCK.ACQUIRE.
type acquireOpts struct {
	key       string
	ttl       time.Duration // 0 with lease
	lease     bool          // bound to the client's connection
	token     string        // "" when the proxy generates it
	wait      time.Duration // 0: answer at once
	reentrant bool
}

// parseAcquire reads LOCK.ACQUIRE key (ttl_ms | LEASE) [TOKEN v] [WAIT ms]
// [REENTRANT]; msg is the error reply for bad arguments.
func parseAcquire(args [][]byte) (o acquireOpts, msg string) {
	if len(args) < 3 {
		return o, wrongArgsMsg("lock.acquire")
	}
	o.key = string(args[1])
	if strings.EqualFold(string(args[2]), "lease") {
		o.lease = true
	} else {
		ms, err := parseInt(args[2])
		switch {
		case err != nil:
			return o, "ERR value is not an integer or out of range"
		case ms <= 0 || ms > maxTTLms:
			return o, "ERR invalid expire time in 'lock.acquire' command"
		}
		o.ttl = time.Duration(ms) * time.Millisecond
	}
	tokenSet, waitSet := false, false
	for i := 3; i < len(args); i++ {
		switch opt := strings.ToLower(string(args[i])); {
		case opt == "token" && !tokenSet && i+1 < len(args):
			i++
			o.token, tokenSet = string(args[i]), true
			if o.token == "" {
				return o, "ERR redlock-proxy: TOKEN must not be empty"
			}
		case opt == "wait" && !waitSet && i+1 < len(args):
			i++
			ms, err := parseInt(args[i])
			switch {
			case err != nil:
				return o, "ERR timeout is not an integer or out of range"
			case ms < 0:
				return o, "ERR timeout is negative"
			case ms > maxTTLms:
				return o, "ERR timeout is out of range"
			}
			o.wait, waitSet = time.Duration(ms)*time.Millisecond, true
		case opt == "reentrant" && !o.reentrant:
			o.reentrant = true
		default:
			return o, "ERR syntax error"
		}
	}
	if o.reentrant && !tokenSet {
		return o, "ERR redlock-proxy: REENTRANT needs TOKEN (the holder's own token)"
	}
	return o, ""
}

// maxTTLms bounds TTLs and waits (about 12 days), far below overflow.
const maxTTLms = 1 << 30

func wrongArgsMsg(name string) string {
	return "ERR wrong number of arguments for '" + name + "' command"
}

// nativeKey checks that key may carry a native lock, and answers the error
// if not.
func (s *Server) nativeKey(c redcon.Conn, key []byte) bool {
	switch {
	case isReserved(key):
		c.WriteError(errReserved)
	case !s.isLockKey(key):
		c.WriteError("ERR redlock-proxy: '" + quorum.Echo(key) + "' is not a lock key (proxy.lock_keys)")
	default:
		return true
	}
	return false
}

// newToken is a random token for a grant whose client sent none.
func newToken() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// cmdLockAcquire answers [token, fencing number, validity ms], or a null
// array when not granted (after WAIT, if given).
func cmdLockAcquire(s *Server, c redcon.Conn, st *client, args [][]byte) route {
	o, msg := parseAcquire(args)
	if msg != "" {
		c.WriteError(msg)
		return replied
	}
	if !s.nativeKey(c, args[1]) || s.oversized(c, args[1:]) {
		return replied
	}
	if o.token == "" {
		o.token = newToken()
	}
	if o.lease {
		s.acquireLease(c, st, o)
		return replied
	}
	g, err := s.acquireNative(s.eng(st), c, o)
	if errors.Is(err, errWaiterGone) {
		return replied
	}
	if g != nil && o.wait > 0 && clientGone(c) {
		s.undoGrant(s.eng(st), o.key, g) // granted after the client left: nobody will use or release it
		return replied
	}
	writeGrant(c, g, err)
	return replied
}

// undoGrant gives back the hold a grant added: one hold, so that a
// reentrant grant leaves the holds that other grants of the token added
// (its holder may be another connection).
func (s *Server) undoGrant(rl *engine.Client, key string, g *engine.FenceGrant) {
	ctx, cancel := s.opContext()
	defer cancel()
	if r, err := rl.ReleaseFenced(ctx, key, g.Token); err == nil && r.Freed {
		s.waits.wake(key)
	}
}

// clientGone reports whether c's client has closed its connection.
func clientGone(c redcon.Conn) bool {
	cc, ok := c.NetConn().(*wire.Conn)
	return ok && cc.PeerClosed()
}

func writeGrant(c redcon.Conn, g *engine.FenceGrant, err error) {
	switch {
	case err != nil && !errors.Is(err, engine.ErrNotAcquired):
		nativeErr(c, err)
	case g == nil:
		c.WriteRaw([]byte("*-1\r\n")) // as BLPOP answers a timeout
	default:
		c.WriteArray(3)
		c.WriteBulkString(g.Token)
		c.WriteInt64(g.Fence)
		c.WriteInt64(max(g.Validity.Milliseconds(), 1)) // granted: some validity is left
	}
}

// acquireNative runs one fenced acquire, or, with WAIT, waits its turn
// among this proxy's waiters for the key (see lockwait.go). A reentrant
// WAIT whose token already holds the key is granted at once, ahead of the
// waiters: they wait for that token's holds to end anyway, and a nested
// lock would otherwise wait for itself.
func (s *Server) acquireNative(rl *engine.Client, c redcon.Conn, o acquireOpts) (*engine.FenceGrant, error) {
	if o.wait <= 0 {
		g, _, err := s.fencedOnce(rl, o)
		return g, err
	}
	if o.reentrant {
		ctx, cancel := s.opContext()
		start := time.Now()
		r, err := rl.ReenterFenced(ctx, o.key, o.token, o.ttl)
		cancel()
		if r.Grant != nil {
			s.m.Acquire(err, time.Since(start))
			return r.Grant, nil
		}
	}
	gone := func() bool { return clientGone(c) }
	return s.waits.acquire(o.key, o.wait, s.cfg.Proxy.LockWaitPoll.Duration, gone, func() (*engine.FenceGrant, time.Duration, error) {
		return s.fencedOnce(rl, o)
	})
}

// fencedOnce is one fenced acquire, counted in the acquire metrics.
func (s *Server) fencedOnce(rl *engine.Client, o acquireOpts) (*engine.FenceGrant, time.Duration, error) {
	ctx, cancel := s.opContext()
	defer cancel()
	start := time.Now()
	r, err := rl.AcquireFenced(ctx, o.key, o.token, o.ttl, o.reentrant)
	s.m.Acquire(err, time.Since(start))
	return r.Grant, r.RetryIn, err
}

// cmdLockRelease gives back one hold of the token: 1 when a quorum held
// it, else 0. The last hold frees the key, and a waiter at this proxy is
// woken.
func cmdLockRelease(s *Server, c redcon.Conn, st *client, args [][]byte) route {
	if !s.nativeKey(c, args[1]) || s.oversized(c, args[1:]) {
		return replied
	}
	ok, freed, err := s.releaseNative(s.eng(st), string(args[1]), string(args[2]))
	if ls := st.leases.Load(); ls != nil && freed {
		ls.drop(s.dbOf(st).n, string(args[1]), string(args[2]))
	}
	switch {
	case err != nil:
		nativeErr(c, err)
	case ok:
		c.WriteInt(1)
	default:
		c.WriteInt(0)
	}
	return replied
}

func (s *Server) releaseNative(rl *engine.Client, key, token string) (released, freed bool, err error) {
	ctx, cancel := s.opContext()
	defer cancel()
	start := time.Now()
	r, err := rl.ReleaseFenced(ctx, key, token)
	s.m.Release(r.Released, err, time.Since(start))
	if r.Freed {
		s.waits.wake(key)
	}
	return r.Released, r.Freed, err
}

// cmdLockExtend sets the lock's TTL: the new validity in ms, or 0 when the
// token does not hold it on a quorum.
func cmdLockExtend(s *Server, c redcon.Conn, st *client, args [][]byte) route {
	ms, err := parseInt(args[3])
	switch {
	case err != nil:
		c.WriteError("ERR value is not an integer or out of range")
		return replied
	case ms <= 0 || ms > maxTTLms:
		c.WriteError("ERR invalid expire time in 'lock.extend' command")
		return replied
	}
	if !s.nativeKey(c, args[1]) || s.oversized(c, args[1:]) {
		return replied
	}
	v, ok, err := s.extendNative(s.eng(st), string(args[1]), string(args[2]), time.Duration(ms)*time.Millisecond)
	switch {
	case err != nil:
		nativeErr(c, err)
	case ok:
		c.WriteInt64(max(v.Milliseconds(), 1))
	default:
		c.WriteInt(0)
	}
	return replied
}

func (s *Server) extendNative(rl *engine.Client, key, token string, ttl time.Duration) (time.Duration, bool, error) {
	ctx, cancel := s.opContext()
	defer cancel()
	start := time.Now()
	v, ok, err := rl.ExtendFenced(ctx, key, token, ttl)
	s.m.Extend(ok, err, time.Since(start))
	return v, ok, err
}

// cmdLockInfo answers a flat map: token, fence, validity, holds (the
// quorum's view: nil, 0, -2, 0 when no token holds a quorum), then
// "masters", one flat map per master in configuration order: master (its
// index), token, pttl, fence, holds, counter, voting; a master that did not
// answer has error instead of the fields after master.
func cmdLockInfo(s *Server, c redcon.Conn, st *client, args [][]byte) route {
	if !s.nativeKey(c, args[1]) || s.oversized(c, args[1:]) {
		return replied
	}
	ctx, cancel := s.opContext()
	defer cancel()
	info, err := s.eng(st).InfoFenced(ctx, string(args[1]))
	if err != nil {
		nativeErr(c, err)
		return replied
	}
	wire.WriteMap(c, 5) // field-value pairs, as HGETALL: an array of them in RESP2
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
		c.WriteInt(b2i(m.Trusted))
	}
	return replied
}

// ms is a duration in ms; the negative codes (-1, -2) stay as they are.
func ms(d time.Duration) int64 {
	if d < 0 {
		return int64(d)
	}
	return d.Milliseconds()
}

// nativeErr answers an error of a native command: the masters' own error
// when every master that failed answered with one (a key of another type,
// a fencing counter that is not a number), else as quorum.WriteErr does.
func nativeErr(c redcon.Conn, err error) {
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
	quorum.WriteErr(c, err)
}

func writeOptString(c redcon.Conn, s *string) {
	if s == nil {
		c.WriteNull()
		return
	}
	c.WriteBulkString(*s)
}
