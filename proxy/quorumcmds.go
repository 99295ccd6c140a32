package proxy

import (
	"context"
	"errors"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/tidwall/redcon"

	"github.com/redlock-proxy/redlock-proxy/proxy/quorum"
	"github.com/redlock-proxy/redlock-proxy/proxy/wire"
	"github.com/redlock-proxy/redlock-proxy/redlock/engine"
)

// op is st's call on the quorum (package quorum): the engine of its
// database, the bound of one operation (opTimeout) and
// proxy.max_lock_value.
func (s *Server) op(st *client) quorum.Op {
	return quorum.Op{Eng: s.eng(st), Timeout: s.opTimeout(), MaxValue: int(s.cfg.Proxy.MaxLockValue), Metrics: s.m}
}

// opTimeout bounds one quorum operation: every master has the node
// timeout, retries add their delays; this is a backstop against a hang.
// It reads only fields no reload changes: a copy of the whole section
// would read the credentials a Reload writes meanwhile.
func (s *Server) opTimeout() time.Duration {
	r := &s.cfg.Redlock
	return r.NodeTimeout.Duration*time.Duration(r.RetryCount+2) + r.RetryDelay.Duration*time.Duration(r.RetryCount+1)
}

// opContext is the context of one quorum operation (quorum.Context),
// ending after opTimeout.
func (s *Server) opContext() (context.Context, context.CancelFunc) {
	return quorum.Context(s.opTimeout())
}

func cmdSet(s *Server, c redcon.Conn, st *client, args [][]byte) route {
	o, msg := quorum.ParseSet(args)
	if msg != "" {
		c.WriteError(msg)
		return replied
	}
	if !o.NX && s.mixed() {
		return toBackend // data (mixed.go)
	}
	if s.oversized(c, args[1:]) {
		return replied
	}
	if s.mixed() && !s.mirrorTaken(st, c, args, o.Get, "") {
		return replied // the key holds data, or the backend failed
	}
	if !o.NX {
		w, err := s.eng(st).NoteTTL(string(args[1]), o.TTL(time.Now()))
		if err != nil {
			quorum.WriteErr(c, err)
			return replied
		}
		// Set unless refused: XX on an absent key answers nil; a value too
		// long to answer (SET … GET) changes nothing.
		s.op(st).BroadcastMajority(c, quorum.ToAny(args), w, func(r engine.Result) bool {
			return r.Err == nil && !quorum.IsLarge(r.Val) || r.Err == redis.Nil && !o.XX
		}, o.Get)
		return replied
	}
	ttl := o.TTL(time.Now())
	if o.Expire != "" && ttl <= 0 {
		s.setNXPast(st, c, args[1], o.Get)
		return replied
	}
	s.acquire(st, c, string(args[1]), string(args[2]), ttl, o.Get, func(ok bool) {
		if ok {
			c.WriteString("OK")
		} else {
			c.WriteNull()
		}
	})
	return replied
}

// setNXPast answers SET … NX with an absolute expiry already past (PXAT,
// EXAT) as Redis does, without writing anything: Redis stores the key and
// drops it at once when it is absent (OK; with GET, nil: no old value), and
// leaves it when it exists (nil; with GET, its value). As a lock it would
// have no validity, so nothing is stored on any master; whether the key is
// absent is read from the quorum, as GET reads it, and NOQUORUM answers
// where that cannot be known.
func (s *Server) setNXPast(st *client, c redcon.Conn, key []byte, get bool) {
	k, typ, err := s.op(st).ReadAnyType(key)
	if outcome, counted := quorum.WriteSetNXPast(c, k, typ, err, get); counted {
		s.m.Acquire(outcome, 0)
	}
}

// cmdSetNX is SET NX with no expiry, answered 1 or 0.
func cmdSetNX(s *Server, c redcon.Conn, st *client, args [][]byte) route {
	if s.oversized(c, args[1:]) {
		return replied
	}
	if s.mixed() && !s.mirrorTaken(st, c, [][]byte{[]byte("set"), args[1], args[2], []byte("nx")}, false, "0") {
		return replied
	}
	s.acquire(st, c, string(args[1]), string(args[2]), 0, false, func(ok bool) {
		if ok {
			c.WriteInt(1)
		} else {
			c.WriteInt(0)
		}
	})
	return replied
}

// acquire runs a quorum acquire and answers through reply, or with the
// previous value for SET … NX GET.
func (s *Server) acquire(st *client, c redcon.Conn, key, value string, ttl time.Duration, get bool, reply func(ok bool)) {
	r, err := s.acquireOne(s.op(st), key, value, ttl)
	if err != nil && s.mixed() {
		s.mirrorRelease(st, key, value) // taken first (mirrorTaken)
	}
	quorum.WriteAcquired(c, r, err, get, int(s.cfg.Proxy.MaxLockValue), reply)
}

// acquireOne runs a quorum acquire of one key (quorum.Op.Acquire, which
// counts it) and logs one refused for want of a quorum.
func (s *Server) acquireOne(op quorum.Op, key, value string, ttl time.Duration) (engine.AcquireResult, error) {
	r, err := op.Acquire(key, value, ttl)
	if errors.Is(err, engine.ErrNoQuorum) {
		s.log.Debug().Str("key", key).Err(err).Msg("acquire refused: no quorum")
	}
	return r, err
}

func cmdGet(s *Server, c redcon.Conn, st *client, args [][]byte) route {
	if s.mixed() && s.backendFirst(st, c, args, func(v any) bool { return v != nil }) {
		return replied
	}
	s.quorumGet(st, c, args)
	return replied
}

// quorumGet answers GET of a lock key (args) from the quorum.
func (s *Server) quorumGet(st *client, c redcon.Conn, args [][]byte) {
	if s.oversized(c, args[1:]) {
		return
	}
	k, typ, err := s.op(st).ReadAnyType(args[1])
	quorum.WriteGet(c, k, typ, err, s.mixed())
}

func cmdPTTL(s *Server, c redcon.Conn, st *client, args [][]byte) route {
	name := strings.ToLower(string(args[0]))
	if s.mixed() && s.backendFirst(st, c, args, func(v any) bool { n, _ := v.(int64); return n != -2 }) {
		return replied
	}
	if s.oversized(c, args[1:]) {
		return replied
	}
	k, _, err := s.op(st).ReadAnyType(args[1])
	quorum.WritePTTL(c, k, err, name == "ttl", s.mixed())
	return replied
}

// cmdExists counts the keys whose value is held by a quorum.
func cmdExists(s *Server, c redcon.Conn, st *client, args [][]byte) route {
	locks, rest, ok := s.splitLockKeys(c, args[1:])
	if !ok {
		return replied
	}
	n := int64(0)
	for _, key := range locks {
		if s.mixed() {
			v, err := s.backendCall(st, "exists", string(key))
			if err != nil {
				backendAnswer(c, nil, err)
				return replied
			}
			if v == int64(1) {
				n++
				continue
			}
		}
		k, _, err := s.op(st).ReadAnyType(key)
		held, err := quorum.Exists(k, err, s.mixed())
		if err != nil {
			quorum.WriteErr(c, err)
			return replied
		}
		if held {
			n++
		}
	}
	s.addPassthroughCount(c, st, args[0], rest, n)
	return replied
}

// addPassthroughCount answers n plus what the backend counts for the keys
// that are not lock keys.
func (s *Server) addPassthroughCount(c redcon.Conn, st *client, cmd []byte, rest [][]byte, n int64) {
	if len(rest) > 0 {
		var cc wire.Capture
		s.forward(&cc, st, append([][]byte{cmd}, rest...), false)
		b := cc.Raw
		switch {
		case cc.Err != "":
			c.WriteError(cc.Err)
			return
		case len(b) > 3 && b[0] == '-':
			c.WriteError(string(b[1 : len(b)-2]))
			return
		case len(b) > 3 && b[0] == ':':
			m, _ := parseInt(b[1 : len(b)-2])
			n += m
		}
	}
	c.WriteInt64(n)
}

// splitLockKeys splits the keys of a command that names several (EXISTS,
// DEL, UNLINK) into the lock keys, each a quorum operation of its own, and
// the rest, which pass through. It answers the refusal and reports false
// when a lock key among them exceeds proxy.max_lock_value: every one is
// checked before any is sent.
func (s *Server) splitLockKeys(c redcon.Conn, keys [][]byte) (locks, rest [][]byte, ok bool) {
	for _, key := range keys {
		if s.isLockKey(key) {
			locks = append(locks, key)
		} else {
			rest = append(rest, key)
		}
	}
	for i := range locks {
		if s.oversized(c, locks[i:i+1]) {
			return nil, nil, false
		}
	}
	return locks, rest, true
}

// cmdDel deletes each lock key on every master and counts it as deleted
// when a quorum deleted it.
func cmdDel(s *Server, c redcon.Conn, st *client, args [][]byte) route {
	locks, rest, ok := s.splitLockKeys(c, args[1:])
	if !ok {
		return replied
	}
	n := int64(0)
	for _, key := range locks {
		onBackend := false
		if s.mixed() {
			v, err := s.backendCall(st, string(args[0]), string(key))
			if err != nil {
				backendAnswer(c, nil, err)
				return replied
			}
			onBackend = v == int64(1)
			if !s.mayLock(st) { // its data alone: a user who may not take locks ends none
				if onBackend {
					n++
				}
				continue
			}
		}
		ok, ones, err := s.op(st).Ones(nil, args[0], key)
		if ok || err != nil {
			st.releasedLease(string(key), "") // it may be gone: the client removed it
		}
		deleted, err := quorum.Deleted(ok, ones, err, s.mixed(), onBackend)
		if err != nil {
			quorum.WriteErr(c, err)
			return replied
		}
		if deleted {
			n++
		}
	}
	s.addPassthroughCount(c, st, args[0], rest, n)
	return replied
}

// cmdExpire runs PEXPIRE, EXPIRE, PEXPIREAT, EXPIREAT and PERSIST on every
// master: 1 when a quorum applied it.
func cmdExpire(s *Server, c redcon.Conn, st *client, args [][]byte) route {
	name := strings.ToLower(string(args[0]))
	onBackend := false
	if s.mixed() {
		// The backend's key (data, or a lock's mirror) first; then the
		// lock, if a quorum holds one.
		v, err := s.backendValue(st, args)
		if err != nil {
			backendAnswer(c, nil, err)
			return replied
		}
		onBackend = v == int64(1)
		if !onBackend {
			// The backend's 0: a key it holds keeps its TTL, and so does
			// the lock, if any; a key it does not hold may be a lock
			// without a mirror, which the quorum answers for.
			if held, err := s.backendCall(st, "exists", string(args[1])); err != nil || held == int64(1) || !s.mayLock(st) {
				backendAnswer(c, v, err)
				return replied
			}
		}
	}
	if s.mixed() && !s.mayLock(st) {
		c.WriteInt(1) // its data alone: a user who may not take locks changes none
		return replied
	}
	answer := func(ok bool, ones int, err error) {
		quorum.WriteExpire(c, ok, ones, err, s.mixed(), onBackend)
	}
	if s.oversized(c, args[1:]) {
		return replied
	}
	var w *engine.TTLWrite
	if name != "persist" {
		ttl, msg := quorum.ParseExpire(name, args[2], time.Now())
		if msg != "" {
			c.WriteError(msg)
			return replied
		}
		var err error
		if w, err = s.eng(st).NoteTTL(string(args[1]), ttl); err != nil {
			if s.mixed() {
				answer(false, 0, nil) // longer than any lock may live: the backend's key alone
				return replied
			}
			quorum.WriteErr(c, err)
			return replied
		}
	}
	answer(s.op(st).Ones(w, args...))
	return replied
}

func cmdSetEx(s *Server, c redcon.Conn, st *client, args [][]byte) route {
	if s.mixed() {
		return toBackend // data (mixed.go)
	}
	if s.oversized(c, args[1:]) {
		return replied
	}
	ttl, msg := quorum.ParseSetEx(args, time.Now())
	if msg != "" {
		c.WriteError(msg)
		return replied
	}
	w, err := s.eng(st).NoteTTL(string(args[1]), ttl)
	if err != nil {
		quorum.WriteErr(c, err)
		return replied
	}
	s.op(st).BroadcastMajority(c, quorum.ToAny(args), w, func(r engine.Result) bool { return r.Err == nil }, false)
	return replied
}

// cmdGetEx runs GETEX of a lock key on every master, as SET does: a TTL
// written on one master alone would let it vote for another holder while
// the others still hold the lock.
func cmdGetEx(s *Server, c redcon.Conn, st *client, args [][]byte) route {
	if s.mixed() {
		return toBackend // data (mixed.go)
	}
	if s.oversized(c, args[1:]) {
		return replied
	}
	ttl, msg := quorum.ParseGetEx(args[2:], time.Now())
	if msg == quorum.ErrSyntax {
		c.WriteError(msg)
		return replied
	}
	var w *engine.TTLWrite
	if msg == "" {
		var err error
		if w, err = s.eng(st).NoteTTL(string(args[1]), ttl); err != nil {
			quorum.WriteErr(c, err)
			return replied
		}
	}
	// A bad expiry value is Redis's error only where the key holds a
	// string; absent, GETEX answers nil: the masters answer it, and
	// refuse to write anything. A nil reply: nothing was set; a value too
	// long to answer changes nothing.
	s.op(st).BroadcastMajority(c, quorum.ToAny(args), w, func(r engine.Result) bool { return r.Err == nil && !quorum.IsLarge(r.Val) }, true)
	return replied
}

func cmdGetDel(s *Server, c redcon.Conn, st *client, args [][]byte) route {
	if s.mixed() {
		v, err := s.backendValue(st, args)
		if v != nil && s.mayLock(st) { // and the lock, if a quorum holds one
			_, ones, qerr := s.op(st).Ones(nil, []byte("del"), args[1])
			st.releasedLease(string(args[1]), "")
			if qerr != nil && ones > 0 {
				quorum.WriteErr(c, qerr) // a lock on the masters that answered, not ended on a quorum (cmdDel)
				return replied
			}
		}
		backendAnswer(c, v, err)
		return replied
	}
	if s.oversized(c, args[1:]) {
		return replied
	}
	s.op(st).BroadcastMajority(c, quorum.ToAny(args), nil, nil, true)
	return replied
}
