package proxy

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"time"

	"github.com/tidwall/redcon"

	"github.com/redlock-proxy/redlock-proxy/proxy/quorum"
	"github.com/redlock-proxy/redlock-proxy/proxy/wire"
	"github.com/redlock-proxy/redlock-proxy/redlock/engine"
)

// The native lock commands: LOCK.ACQUIRE, LOCK.RELEASE, LOCK.EXTEND and
// LOCK.INFO. Their locks are ordinary lock keys holding the token (GET and
// the unlock scripts see them), with a fencing number and a hold count kept
// beside them on every master (engine.FenceKeys). Their arguments, their
// calls on the quorum and their replies are package quorum's
// (quorum/nativecmds.go: Op.AcquireFenced, Op.ReleaseFenced…); here is
// the session's part: leases (lease.go), waiters (lockwait.go: a release
// that frees the key wakes the head waiter), the lock keys.

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
	o, msg := quorum.ParseLockAcquire(args)
	if msg != "" {
		c.WriteError(msg)
		return replied
	}
	if !s.nativeKey(c, args[1]) || s.oversized(c, args[1:]) {
		return replied
	}
	if o.Token == "" {
		o.Token = newToken()
	}
	if o.Lease {
		s.acquireLease(c, st, o)
		return replied
	}
	op := s.op(st)
	g, err := s.acquireNative(op, c, o)
	if errors.Is(err, errWaiterGone) {
		return replied
	}
	if g != nil && o.Wait > 0 && clientGone(c) {
		s.undoGrant(op, o.Key, g) // granted after the client left: nobody will use or release it
		return replied
	}
	quorum.WriteGrant(c, g, err)
	return replied
}

// undoGrant gives back the hold a grant added (quorum.Op.UndoGrant): one
// hold, so that a reentrant grant leaves the holds that other grants of
// the token added (its holder may be another connection). When that frees
// the key, a waiter is woken.
func (s *Server) undoGrant(op quorum.Op, key string, g *engine.FenceGrant) {
	if r, err := op.UndoGrant(key, g); err == nil && r.Freed {
		s.waits.wake(key)
	}
}

// clientGone reports whether c's client has closed its connection.
func clientGone(c redcon.Conn) bool {
	cc, ok := c.NetConn().(*wire.Conn)
	return ok && cc.PeerClosed()
}

// acquireNative runs one fenced acquire, or, with WAIT, waits its turn
// among this proxy's waiters for the key (see lockwait.go). A reentrant
// WAIT whose token already holds the key is granted at once, ahead of the
// waiters: they wait for that token's holds to end anyway, and a nested
// lock would otherwise wait for itself.
func (s *Server) acquireNative(op quorum.Op, c redcon.Conn, o quorum.LockAcquire) (*engine.FenceGrant, error) {
	if o.Wait <= 0 {
		r, err := op.AcquireFenced(o)
		return r.Grant, err
	}
	if o.Reentrant {
		if g, _ := op.ReenterFenced(o); g != nil {
			return g, nil
		}
	}
	gone := func() bool { return clientGone(c) }
	return s.waits.acquire(o.Key, o.Wait, s.cfg.Proxy.LockWaitPoll.Duration, gone, func() (*engine.FenceGrant, time.Duration, error) {
		r, err := op.AcquireFenced(o)
		return r.Grant, r.RetryIn, err
	})
}

// cmdLockRelease gives back one hold of the token: 1 when a quorum held
// it, else 0. The last hold frees the key, and a waiter at this proxy is
// woken.
func cmdLockRelease(s *Server, c redcon.Conn, st *client, args [][]byte) route {
	if !s.nativeKey(c, args[1]) || s.oversized(c, args[1:]) {
		return replied
	}
	key, token := string(args[1]), string(args[2])
	r, err := s.op(st).ReleaseFenced(key, token)
	if r.Freed {
		s.waits.wake(key)
		if ls := st.leases.Load(); ls != nil {
			ls.drop(s.dbOf(st).n, key, token)
		}
	}
	quorum.WriteLockReleased(c, r.Released, err)
	return replied
}

// cmdLockExtend sets the lock's TTL: the new validity in ms, or 0 when the
// token does not hold it on a quorum.
func cmdLockExtend(s *Server, c redcon.Conn, st *client, args [][]byte) route {
	ttl, msg := quorum.ParseLockExtend(args[3])
	if msg != "" {
		c.WriteError(msg)
		return replied
	}
	if !s.nativeKey(c, args[1]) || s.oversized(c, args[1:]) {
		return replied
	}
	v, ok, err := s.op(st).ExtendFenced(string(args[1]), string(args[2]), ttl)
	quorum.WriteLockExtended(c, v, ok, err)
	return replied
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
	info, err := s.op(st).InfoFenced(string(args[1]))
	quorum.WriteLockInfo(c, info, err)
	return replied
}
