package proxy

import (
	"errors"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/tidwall/redcon"

	"github.com/redlock-proxy/redlock-proxy/proxy/quorum"
	"github.com/redlock-proxy/redlock-proxy/proxy/wire"
	"github.com/redlock-proxy/redlock-proxy/redlock/engine"
)

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
		s.broadcastMajority(st, c, toAny(args), w, func(r engine.Result) bool {
			return r.Err == nil && !isLarge(r.Val) || r.Err == redis.Nil && !o.XX
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
	k, typ, err := s.readAnyType(st, key)
	switch {
	case err != nil:
		s.m.Acquire(err, 0)
		quorum.WriteErr(c, err)
	case !k.Exists:
		s.m.Acquire(engine.ErrValiditySpent, 0)
		if get {
			c.WriteNull()
		} else {
			c.WriteString("OK")
		}
	case get && typ != "string":
		c.WriteError(wrongType)
	default:
		s.m.Acquire(engine.ErrNotAcquired, 0)
		if get {
			c.WriteBulkString(k.Value)
		} else {
			c.WriteNull()
		}
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
	r, err := s.acquireRaw(st, key, value, ttl)
	if err != nil && s.mixed() {
		s.mirrorRelease(st, key, value) // taken first (mirrorTaken)
	}
	switch {
	case err != nil && !errors.Is(err, engine.ErrNotAcquired):
		quorum.WriteErr(c, err)
	case !get:
		reply(err == nil)
	case err == nil:
		c.WriteNull() // NX GET: the key was absent and is now set
	case r.PrevTooLarge != nil:
		c.WriteError(quorum.TooLargeReply(r.PrevTooLarge.Len, int(s.cfg.Proxy.MaxLockValue)))
	case r.Prev != nil:
		c.WriteBulkString(*r.Prev)
	default:
		// Not granted, yet no value holds a quorum: a single Redis would
		// never be in this state, and nil would claim the key was set.
		c.WriteError("TRYAGAIN redlock-proxy: no value holds a quorum of masters; lock not acquired")
	}
}

// acquireRaw runs a quorum acquire and counts its outcome.
func (s *Server) acquireRaw(st *client, key, value string, ttl time.Duration) (engine.AcquireResult, error) {
	ctx, cancel := s.opContext()
	defer cancel()
	start := time.Now()
	r, err := s.eng(st).AcquireGet(ctx, key, value, ttl)
	s.m.Acquire(err, time.Since(start))
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
	k, typ, err := s.readAnyType(st, args[1])
	switch {
	case err != nil && s.mixed():
		c.WriteNull() // the data's answer stands: masters down do not fail a read
	case err != nil:
		quorum.WriteErr(c, err)
	case typ != "string" && k.Exists:
		c.WriteError(wrongType)
	case k.Exists:
		c.WriteBulkString(k.Value)
	default:
		c.WriteNull()
	}
}

func (s *Server) read(st *client, key []byte) (engine.KeyState, error) {
	ctx, cancel := s.opContext()
	defer cancel()
	return s.eng(st).Read(ctx, string(key))
}

func cmdPTTL(s *Server, c redcon.Conn, st *client, args [][]byte) route {
	name := strings.ToLower(string(args[0]))
	if s.mixed() && s.backendFirst(st, c, args, func(v any) bool { n, _ := v.(int64); return n != -2 }) {
		return replied
	}
	if s.oversized(c, args[1:]) {
		return replied
	}
	k, _, err := s.readAnyType(st, args[1])
	switch {
	case err != nil && s.mixed():
		c.WriteInt(-2) // the data's answer stands: masters down do not fail a read
	case err != nil:
		quorum.WriteErr(c, err)
	case k.PTTL < 0:
		c.WriteInt64(int64(k.PTTL))
	case name == "ttl":
		c.WriteInt64((k.PTTL.Milliseconds() + 500) / 1000) // rounded as Redis rounds
	default:
		c.WriteInt64(k.PTTL.Milliseconds())
	}
	return replied
}

// cmdExists counts the keys whose value is held by a quorum.
func cmdExists(s *Server, c redcon.Conn, st *client, args [][]byte) route {
	if s.oversizedKey(c, args[1:]) {
		return replied
	}
	n := int64(0)
	var rest [][]byte
	for _, key := range args[1:] {
		if !s.isLockKey(key) {
			rest = append(rest, key)
			continue
		}
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
		k, _, err := s.readAnyType(st, key)
		if err != nil && s.mixed() {
			continue // the data's answer stands: masters down do not fail a read
		}
		if err != nil {
			quorum.WriteErr(c, err)
			return replied
		}
		if k.Exists {
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

// cmdDel deletes each lock key on every master and counts it as deleted
// when a quorum deleted it.
func cmdDel(s *Server, c redcon.Conn, st *client, args [][]byte) route {
	if s.oversizedKey(c, args[1:]) {
		return replied
	}
	n := int64(0)
	var rest [][]byte
	for _, key := range args[1:] {
		if !s.isLockKey(key) {
			rest = append(rest, key)
			continue
		}
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
		ok, ones, err := s.broadcastOnes(st, nil, args[0], key)
		if ok || err != nil {
			st.releasedLease(string(key), "") // it may be gone: the client removed it
		}
		switch {
		case s.mixed() && err != nil && ones > 0:
			// A lock on the masters that answered, not ended on a
			// quorum: "deleted" would tell the client the key is free.
			quorum.WriteErr(c, err)
			return replied
		case s.mixed():
			// The backend's count; the lock, if a quorum holds one, goes
			// too. A lock without a mirror on the backend (a semaphore,
			// LOCK.*) counts where the quorum deleted it. Where no master
			// that answered held the key (data never reaches a master),
			// a quorum that cannot be reached leaves the data's answer
			// standing.
			if onBackend || ok {
				n++
			}
		case err != nil:
			quorum.WriteErr(c, err)
			return replied
		case ok:
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
		switch {
		case s.mixed() && err != nil && ones > 0:
			quorum.WriteErr(c, err) // a lock on the masters that answered, its TTL not written on a quorum
		case s.mixed(): // the backend's answer, or a lock's without a mirror; the lock, if any, follows
			c.WriteInt(b2i(onBackend || ok && err == nil))
		case err != nil:
			quorum.WriteErr(c, err)
		case ok:
			c.WriteInt(1)
		default:
			c.WriteInt(0)
		}
	}
	if s.oversized(c, args[1:]) {
		return replied
	}
	var w *engine.TTLWrite
	if name != "persist" {
		n, err := parseInt(args[2])
		if err != nil {
			c.WriteError("ERR value is not an integer or out of range")
			return replied
		}
		if w, err = s.eng(st).NoteTTL(string(args[1]), quorum.ExpireTTL(name, n, time.Now())); err != nil {
			if s.mixed() {
				answer(false, 0, nil) // longer than any lock may live: the backend's key alone
				return replied
			}
			quorum.WriteErr(c, err)
			return replied
		}
	}
	answer(s.broadcastOnes(st, w, args...))
	return replied
}

func cmdSetEx(s *Server, c redcon.Conn, st *client, args [][]byte) route {
	if s.mixed() {
		return toBackend // data (mixed.go)
	}
	if s.oversized(c, args[1:]) {
		return replied
	}
	n, err := parseInt(args[2])
	switch {
	case err != nil:
		c.WriteError("ERR value is not an integer or out of range")
		return replied
	case n <= 0:
		c.WriteError("ERR invalid expire time in '" + strings.ToLower(quorum.Echo(args[0])) + "' command")
		return replied
	}
	w, err := s.eng(st).NoteTTL(string(args[1]), quorum.ExpireTTL(strings.ToLower(string(args[0])), n, time.Now()))
	if err != nil {
		quorum.WriteErr(c, err)
		return replied
	}
	s.broadcastMajority(st, c, toAny(args), w, func(r engine.Result) bool { return r.Err == nil }, false)
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
	s.broadcastMajority(st, c, toAny(args), w, func(r engine.Result) bool { return r.Err == nil && !isLarge(r.Val) }, true)
	return replied
}

func cmdGetDel(s *Server, c redcon.Conn, st *client, args [][]byte) route {
	if s.mixed() {
		v, err := s.backendValue(st, args)
		if v != nil && s.mayLock(st) { // and the lock, if a quorum holds one
			_, ones, qerr := s.broadcastOnes(st, nil, []byte("del"), args[1])
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
	s.broadcastMajority(st, c, toAny(args), nil, nil, true)
	return replied
}
