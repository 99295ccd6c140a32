package proxy

import (
	"context"
	"errors"
	"fmt"
	"math"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/tidwall/redcon"

	"github.com/redlock-proxy/redlock-proxy/redlock/engine"
)

// opContext bounds one quorum operation: every master has the node timeout,
// retries add their delays; this is a backstop against a hang. It reads
// only fields no reload changes: a copy of the whole section would read the
// credentials a Reload writes meanwhile.
func (s *Server) opContext() (context.Context, context.CancelFunc) {
	r := &s.cfg.Redlock
	d := r.NodeTimeout.Duration*time.Duration(r.RetryCount+2) + r.RetryDelay.Duration*time.Duration(r.RetryCount+1)
	return newDeadlineCtx(d)
}

func cmdSet(s *Server, c redcon.Conn, st *client, args [][]byte) {
	o, msg := parseSet(args)
	if msg != "" {
		c.WriteError(msg)
		return
	}
	if !s.isLockKey(args[1]) || !o.nx && s.mixed() {
		s.forward(c, st, args, false) // data (mixed.go)
		return
	}
	if s.oversized(c, args[1:]) {
		return
	}
	if s.mixed() && !s.mirrorTaken(st, c, args, o.get, "") {
		return // the key holds data, or the backend failed
	}
	if !o.nx {
		w, err := s.eng(st).NoteTTL(string(args[1]), o.ttl(time.Now()))
		if err != nil {
			writeErr(c, err)
			return
		}
		// Set unless refused: XX on an absent key answers nil; a value too
		// long to answer (SET … GET) changes nothing.
		s.broadcastMajority(st, c, toAny(args), w, func(r engine.Result) bool {
			return r.Err == nil && !isLarge(r.Val) || r.Err == redis.Nil && !o.xx
		}, o.get)
		return
	}
	ttl := o.ttl(time.Now())
	if o.expire != "" && ttl <= 0 {
		s.setNXPast(st, c, args[1], o.get)
		return
	}
	s.acquire(st, c, string(args[1]), string(args[2]), ttl, o.get, func(ok bool) {
		if ok {
			c.WriteString("OK")
		} else {
			c.WriteNull()
		}
	})
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
		writeErr(c, err)
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
func cmdSetNX(s *Server, c redcon.Conn, st *client, args [][]byte) {
	if len(args) != 3 {
		wrongArgs(c, "setnx")
		return
	}
	if !s.isLockKey(args[1]) {
		s.forward(c, st, args, false)
		return
	}
	if s.oversized(c, args[1:]) {
		return
	}
	if s.mixed() && !s.mirrorTaken(st, c, [][]byte{[]byte("set"), args[1], args[2], []byte("nx")}, false, "0") {
		return
	}
	s.acquire(st, c, string(args[1]), string(args[2]), 0, false, func(ok bool) {
		if ok {
			c.WriteInt(1)
		} else {
			c.WriteInt(0)
		}
	})
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
		writeErr(c, err)
	case !get:
		reply(err == nil)
	case err == nil:
		c.WriteNull() // NX GET: the key was absent and is now set
	case r.PrevTooLarge != nil:
		c.WriteError(tooLargeReply(r.PrevTooLarge.Len, int(s.cfg.Proxy.MaxLockValue)))
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

func cmdGet(s *Server, c redcon.Conn, st *client, args [][]byte) {
	if len(args) != 2 {
		wrongArgs(c, "get")
		return
	}
	if !s.isLockKey(args[1]) {
		s.forward(c, st, args, false)
		return
	}
	if s.mixed() && s.backendFirst(st, c, args, func(v any) bool { return v != nil }) {
		return
	}
	s.quorumGet(st, c, args)
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
		writeErr(c, err)
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

func cmdPTTL(s *Server, c redcon.Conn, st *client, args [][]byte) {
	name := strings.ToLower(string(args[0]))
	if len(args) != 2 {
		wrongArgs(c, name)
		return
	}
	if !s.isLockKey(args[1]) {
		s.forward(c, st, args, false)
		return
	}
	if s.mixed() && s.backendFirst(st, c, args, func(v any) bool { n, _ := v.(int64); return n != -2 }) {
		return
	}
	if s.oversized(c, args[1:]) {
		return
	}
	k, _, err := s.readAnyType(st, args[1])
	switch {
	case err != nil && s.mixed():
		c.WriteInt(-2) // the data's answer stands: masters down do not fail a read
	case err != nil:
		writeErr(c, err)
	case k.PTTL < 0:
		c.WriteInt64(int64(k.PTTL))
	case name == "ttl":
		c.WriteInt64((k.PTTL.Milliseconds() + 500) / 1000) // rounded as Redis rounds
	default:
		c.WriteInt64(k.PTTL.Milliseconds())
	}
}

// cmdExists counts the keys whose value is held by a quorum.
func cmdExists(s *Server, c redcon.Conn, st *client, args [][]byte) {
	if len(args) < 2 {
		wrongArgs(c, "exists")
		return
	}
	if s.oversizedKey(c, args[1:]) {
		return
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
				return
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
			writeErr(c, err)
			return
		}
		if k.Exists {
			n++
		}
	}
	s.addPassthroughCount(c, st, args[0], rest, n)
}

// addPassthroughCount answers n plus what the backend counts for the keys
// that are not lock keys.
func (s *Server) addPassthroughCount(c redcon.Conn, st *client, cmd []byte, rest [][]byte, n int64) {
	if len(rest) > 0 {
		var cc countConn
		s.forward(&cc, st, append([][]byte{cmd}, rest...), false)
		if cc.err != "" {
			c.WriteError(cc.err)
			return
		}
		n += cc.n
	}
	c.WriteInt64(n)
}

// cmdDel deletes each lock key on every master and counts it as deleted
// when a quorum deleted it.
func cmdDel(s *Server, c redcon.Conn, st *client, args [][]byte) {
	if len(args) < 2 {
		wrongArgs(c, strings.ToLower(string(args[0])))
		return
	}
	if s.oversizedKey(c, args[1:]) {
		return
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
				return
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
			writeErr(c, err)
			return
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
			writeErr(c, err)
			return
		case ok:
			n++
		}
	}
	s.addPassthroughCount(c, st, args[0], rest, n)
}

// cmdExpire runs PEXPIRE, EXPIRE, PEXPIREAT, EXPIREAT and PERSIST on every
// master: 1 when a quorum applied it.
func cmdExpire(s *Server, c redcon.Conn, st *client, args [][]byte) {
	name := strings.ToLower(string(args[0]))
	if (name == "persist" && len(args) != 2) || (name != "persist" && len(args) < 3) {
		wrongArgs(c, name)
		return
	}
	if !s.isLockKey(args[1]) {
		s.forward(c, st, args, false)
		return
	}
	onBackend := false
	if s.mixed() {
		// The backend's key (data, or a lock's mirror) first; then the
		// lock, if a quorum holds one.
		v, err := s.backendValue(st, args)
		if err != nil {
			backendAnswer(c, nil, err)
			return
		}
		onBackend = v == int64(1)
		if !onBackend {
			// The backend's 0: a key it holds keeps its TTL, and so does
			// the lock, if any; a key it does not hold may be a lock
			// without a mirror, which the quorum answers for.
			if held, err := s.backendCall(st, "exists", string(args[1])); err != nil || held == int64(1) || !s.mayLock(st) {
				backendAnswer(c, v, err)
				return
			}
		}
	}
	if s.mixed() && !s.mayLock(st) {
		c.WriteInt(1) // its data alone: a user who may not take locks changes none
		return
	}
	answer := func(ok bool, ones int, err error) {
		switch {
		case s.mixed() && err != nil && ones > 0:
			writeErr(c, err) // a lock on the masters that answered, its TTL not written on a quorum
		case s.mixed(): // the backend's answer, or a lock's without a mirror; the lock, if any, follows
			c.WriteInt(b2i(onBackend || ok && err == nil))
		case err != nil:
			writeErr(c, err)
		case ok:
			c.WriteInt(1)
		default:
			c.WriteInt(0)
		}
	}
	if s.oversized(c, args[1:]) {
		return
	}
	var w *engine.TTLWrite
	if name != "persist" {
		n, err := parseInt(args[2])
		if err != nil {
			c.WriteError("ERR value is not an integer or out of range")
			return
		}
		if w, err = s.eng(st).NoteTTL(string(args[1]), expireTTL(name, n, time.Now())); err != nil {
			if s.mixed() {
				answer(false, 0, nil) // longer than any lock may live: the backend's key alone
				return
			}
			writeErr(c, err)
			return
		}
	}
	answer(s.broadcastOnes(st, w, args...))
}

func cmdSetEx(s *Server, c redcon.Conn, st *client, args [][]byte) {
	if len(args) != 4 {
		wrongArgs(c, strings.ToLower(string(args[0])))
		return
	}
	if !s.isLockKey(args[1]) || s.mixed() {
		s.forward(c, st, args, false) // data (mixed.go)
		return
	}
	if s.oversized(c, args[1:]) {
		return
	}
	n, err := parseInt(args[2])
	switch {
	case err != nil:
		c.WriteError("ERR value is not an integer or out of range")
		return
	case n <= 0:
		c.WriteError("ERR invalid expire time in '" + strings.ToLower(echo(args[0])) + "' command")
		return
	}
	w, err := s.eng(st).NoteTTL(string(args[1]), expireTTL(strings.ToLower(string(args[0])), n, time.Now()))
	if err != nil {
		writeErr(c, err)
		return
	}
	s.broadcastMajority(st, c, toAny(args), w, func(r engine.Result) bool { return r.Err == nil }, false)
}

// expireTTL is the TTL that EXPIRE, PEXPIRE, EXPIREAT, PEXPIREAT, SETEX or
// PSETEX with argument n sets, measured against now for the absolute ones;
// not positive when the key would expire at once. A number too large to
// be a duration is capped at the longest one.
func expireTTL(cmd string, n int64, now time.Time) time.Duration {
	sec := strings.HasPrefix(cmd, "expire") || cmd == "setex"
	if sec && n > math.MaxInt64/int64(time.Second) || !sec && n > math.MaxInt64/int64(time.Millisecond) {
		return math.MaxInt64
	}
	switch cmd {
	case "expire", "setex":
		return time.Duration(n) * time.Second
	case "pexpire", "psetex":
		return time.Duration(n) * time.Millisecond
	case "expireat":
		return time.Unix(n, 0).Sub(now)
	case "pexpireat":
		return time.UnixMilli(n).Sub(now)
	}
	return 0
}

// cmdGetEx runs GETEX of a lock key on every master, as SET does: a TTL
// written on one master alone would let it vote for another holder while
// the others still hold the lock.
func cmdGetEx(s *Server, c redcon.Conn, st *client, args [][]byte) {
	if len(args) < 2 {
		wrongArgs(c, "getex")
		return
	}
	if !s.isLockKey(args[1]) || s.mixed() {
		s.forward(c, st, args, false) // data (mixed.go)
		return
	}
	if s.oversized(c, args[1:]) {
		return
	}
	ttl, msg := parseGetEx(args[2:], time.Now())
	if msg == errSyntax {
		c.WriteError(msg)
		return
	}
	var w *engine.TTLWrite
	if msg == "" {
		var err error
		if w, err = s.eng(st).NoteTTL(string(args[1]), ttl); err != nil {
			writeErr(c, err)
			return
		}
	}
	// A bad expiry value is Redis's error only where the key holds a
	// string; absent, GETEX answers nil: the masters answer it, and
	// refuse to write anything. A nil reply: nothing was set; a value too
	// long to answer changes nothing.
	s.broadcastMajority(st, c, toAny(args), w, func(r engine.Result) bool { return r.Err == nil && !isLarge(r.Val) }, true)
}

const errSyntax = "ERR syntax error"

// parseGetEx reads GETEX's options as Redis 7 does ([EX s | PX ms | EXAT
// s | PXAT ms | PERSIST]) and returns the TTL they set (0: none), or
// Redis's own error text. As on Redis, an option may be repeated (PX 1 PX
// 2: the last counts, and only its value is read), but not mixed with
// another.
func parseGetEx(opts [][]byte, now time.Time) (time.Duration, string) {
	o, persist := "", false
	var arg []byte
	for i := 0; i < len(opts); i++ {
		switch a := setOption(opts[i]); {
		case a == "persist" && o == "":
			persist = true
		case (a == "ex" || a == "px" || a == "exat" || a == "pxat") && !persist && (o == "" || o == a) && i+1 < len(opts):
			o, arg = a, opts[i+1]
			i++
		default:
			return 0, errSyntax
		}
	}
	if o == "" {
		return 0, ""
	}
	n, err := parseInt(arg)
	if err != nil {
		return 0, "ERR value is not an integer or out of range"
	}
	if n <= 0 {
		return 0, "ERR invalid expire time in 'getex' command"
	}
	cmd := map[string]string{"ex": "expire", "px": "pexpire", "exat": "expireat", "pxat": "pexpireat"}[o]
	return expireTTL(cmd, n, now), ""
}

func cmdGetDel(s *Server, c redcon.Conn, st *client, args [][]byte) {
	if len(args) != 2 {
		wrongArgs(c, "getdel")
		return
	}
	if !s.isLockKey(args[1]) {
		s.forward(c, st, args, false)
		return
	}
	if s.mixed() {
		v, err := s.backendValue(st, args)
		if v != nil && s.mayLock(st) { // and the lock, if a quorum holds one
			_, ones, qerr := s.broadcastOnes(st, nil, []byte("del"), args[1])
			st.releasedLease(string(args[1]), "")
			if qerr != nil && ones > 0 {
				writeErr(c, qerr) // a lock on the masters that answered, not ended on a quorum (cmdDel)
				return
			}
		}
		backendAnswer(c, v, err)
		return
	}
	if s.oversized(c, args[1:]) {
		return
	}
	s.broadcastMajority(st, c, toAny(args), nil, nil, true)
}

func toAny(args [][]byte) []any {
	out := make([]any, len(args))
	for i, a := range args {
		out[i] = string(a)
	}
	return out
}

func isLarge(v any) bool { _, ok := v.(engine.LargeValue); return ok }

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

// broadcastMajority sends a write to every master and answers what a quorum
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
func (s *Server) broadcastMajority(st *client, c redcon.Conn, args []any, w *engine.TTLWrite, applied func(engine.Result) bool, valued bool) {
	if r, ok := s.majority(st, c, args, w, applied, valued); ok {
		s.writeResult(c, r)
	}
}

// majority is broadcastMajority's write and count: it returns the answer a
// quorum of masters gave, or writes the error (NOQUORUM, or TRYAGAIN when
// no answer holds a quorum) and reports false.
func (s *Server) majority(st *client, c redcon.Conn, args []any, w *engine.TTLWrite, applied func(engine.Result) bool, valued bool) (engine.Result, bool) {
	ctx, cancel := s.opContext()
	defer cancel()
	q := s.eng(st).Quorum()
	key := fmt.Sprint(args[1])
	s.eng(st).WaitWrites(ctx, key)
	var got []engine.Result
	if valued {
		got = s.eng(st).BroadcastValue(ctx, key, nil, args...)
	} else {
		got = s.eng(st).Broadcast(ctx, key, nil, args...)
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
		writeErr(c, s.eng(st).NoQuorum(answered, key))
		return engine.Result{}, false
	}
	c.WriteError("TRYAGAIN redlock-proxy: the masters disagree and no answer holds a quorum")
	return engine.Result{}, false
}

func (s *Server) writeResult(c redcon.Conn, r engine.Result) {
	var re redis.Error
	switch {
	case r.Err == redis.Nil:
		c.WriteNull()
	case r.Err == nil && isLarge(r.Val):
		c.WriteError(tooLargeReply(r.Val.(engine.LargeValue).Len, int(s.cfg.Proxy.MaxLockValue)))
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

// broadcastCount sends a command answering 0 or 1 to every master and
// reports whether a quorum answered 1. It answers false only when a quorum
// of 1s is out of reach even if every master that did not answer, or whose
// answer does not count (engine.Result.Counts), had answered 1; otherwise
// the error is a master's own error reply, or NOQUORUM. A write of a TTL
// on a lock key passes w (engine.NoteTTL): it took effect where a master
// answered 1.
func (s *Server) broadcastCount(st *client, w *engine.TTLWrite, args ...[]byte) (bool, error) {
	ok, _, err := s.broadcastOnes(st, w, args...)
	return ok, err
}

// broadcastOnes is broadcastCount, and also counts the masters whose
// answer (one that counts) was 1: those that held the key. Where the
// backend holds data beside the locks, a NOQUORUM with ones > 0 says that
// the key is a lock on masters that answered, which the command could not
// end on a quorum; with ones = 0 no master that answered held it.
func (s *Server) broadcastOnes(st *client, w *engine.TTLWrite, args ...[]byte) (bool, int, error) {
	ctx, cancel := s.opContext()
	defer cancel()
	q, n := s.eng(st).Quorum(), s.eng(st).Masters()
	key := string(args[1])
	s.eng(st).WaitWrites(ctx, key)
	ones, zeros := 0, 0
	var errReply error
	got := s.eng(st).Broadcast(ctx, key, func(got []engine.Result) bool {
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
		return false // wait for every master, as broadcastMajority does
	}, toAny(args)...)
	w.Done(got, func(r engine.Result) bool { v, _ := r.Val.(int64); return r.Err == nil && v == 1 })
	switch {
	case ones >= q:
		return true, ones, nil
	case errReply != nil:
		return false, ones, errReply
	case n-zeros < q: // even with every other master answering 1
		return false, ones, nil
	}
	return false, ones, s.eng(st).NoQuorum(ones+zeros, key)
}

// countConn captures an integer reply of a forwarded command.
type countConn struct {
	nullConn
	n   int64
	err string
}

func (c *countConn) WriteRaw(b []byte) {
	switch {
	case len(b) > 3 && b[0] == ':':
		c.n, _ = parseInt(b[1 : len(b)-2])
	case len(b) > 3 && b[0] == '-':
		c.err = string(b[1 : len(b)-2])
	}
}

func (c *countConn) WriteError(msg string) { c.err = msg }
