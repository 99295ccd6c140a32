package proxy

import (
	"cmp"
	"context"
	"errors"
	"strconv"
	"strings"
	"time"

	"github.com/tidwall/redcon"

	"github.com/redlock-proxy/redlock-proxy/proxy/lockscripts"
	"github.com/redlock-proxy/redlock-proxy/redlock/engine"
)

// cmdEval runs EVAL and EVALSHA. A recognised lock script on a lock key runs
// as a quorum operation; any other script passes through to the backend.
// EVALSHA of a digest the proxy has not seen answers NOSCRIPT, never the
// backend's copy, so that a lock script cannot run on one master alone.
func cmdEval(s *Server, c redcon.Conn, st *client, args [][]byte) {
	name := strings.ToLower(string(args[0]))
	if len(args) < 3 {
		wrongArgs(c, name)
		return
	}
	nk, err := parseInt(args[2])
	switch {
	case err != nil:
		c.WriteError("ERR value is not an integer or out of range")
		return
	case nk < 0:
		c.WriteError("ERR Number of keys can't be negative")
		return
	case nk > int64(len(args)-3):
		c.WriteError("ERR Number of keys can't be greater than number of args")
		return
	}
	keys, argv := args[3:3+nk], args[3+nk:]
	var src string
	var spec *lockscripts.Spec
	if name == "evalsha" {
		e, ok := s.scripts.Get(string(args[1]))
		if !ok {
			// A known library script runs without its text; anything else,
			// or a known script on keys that are not lock keys, makes the
			// client send EVAL.
			spec = lockscripts.BySHA(string(args[1]))
			if spec == nil || !s.allLockKeys(keys) {
				c.WriteError("NOSCRIPT No matching script. Please use EVAL.")
				return
			}
		}
		if ok {
			src, spec = e.Src, e.Spec
		}
	} else {
		_, e := s.scripts.Add(args[1])
		src, spec = e.Src, e.Spec
	}
	lock := 0
	for _, k := range keys {
		if s.isLockKey(k) {
			lock++
		}
	}
	if spec != nil && lock > 0 && spec.Op != lockscripts.OpNotALock && s.oversized(c, keys, argv) {
		return
	}
	switch {
	case spec != nil && spec.Op.IsHash() && lock > 0 && s.isLockKey(keys[0]):
		s.runHashScript(c, st, spec, strs(keys), argv)
	case spec != nil && spec.Publishes() && lock > 0:
		// A release that publishes: KEYS[1] is the lock, KEYS[2] the
		// channel, which need not be a lock key.
		if len(keys) != 2 || !s.isLockKey(keys[0]) {
			c.WriteError("ERR redlock-proxy: the '" + spec.Name + "' script takes the lock key and then a channel")
			return
		}
		s.runReleasePublish(c, st, spec, string(keys[0]), string(keys[1]), argv)
	case spec != nil && lock > 0 && len(keys) > 1 && !spec.Multi:
		// On the backend it would act on one master's copy of the lock.
		c.WriteError("ERR redlock-proxy: the '" + spec.Name + "' script takes one key")
	case (spec == nil || lock == 0 || spec.Op == lockscripts.OpNotALock) && src == "":
		c.WriteError("NOSCRIPT No matching script. Please use EVAL.")
	case spec == nil && lock > 0 && s.cfg.Proxy.UnknownScripts == "refuse":
		if msg := redissonUnsupported(keys, src); msg != "" {
			c.WriteError(msg)
			return
		}
		c.WriteError(unknownScriptOnLockKey)
	case spec == nil || lock == 0 || spec.Op == lockscripts.OpNotALock:
		fwd := append([][]byte{[]byte("EVAL"), []byte(src)}, args[2:]...)
		s.forward(c, st, fwd, false)
	case lock < len(keys):
		c.WriteError("ERR redlock-proxy: the keys of a lock script must all be lock keys (proxy.lock_keys)")
	case len(keys) > 1:
		s.runMultiKeyScript(c, st, spec, strs(keys), argv)
	default:
		s.runScript(c, st, spec, string(keys[0]), argv)
	}
}

// unknownScriptOnLockKey refuses a script the proxy does not recognise
// whose keys include a lock key: on the backend it would change one
// master's copy of the lock (an unlock there answers "released" while the
// lock stays on the others).
const unknownScriptOnLockKey = "ERR redlock-proxy: this script is not a lock script the proxy knows, and its keys include a lock key (proxy.lock_keys): on one master it would change that master's copy alone. Declare it in [[scripts]] to run it on the quorum, or set proxy.unknown_scripts = \"passthrough\""

// cmdOtherScript serves EVAL_RO, EVALSHA_RO, FCALL and FCALL_RO: scripts
// and functions the proxy does not recognise, passed through unless their
// keys include a lock key.
func cmdOtherScript(s *Server, c redcon.Conn, st *client, args [][]byte) {
	if len(args) >= 3 && s.cfg.Proxy.UnknownScripts == "refuse" {
		if n, err := parseInt(args[2]); err == nil && n > 0 && n <= int64(len(args)-3) {
			for _, k := range args[3 : 3+n] {
				if s.isLockKey(k) {
					c.WriteError(unknownScriptOnLockKey)
					return
				}
			}
		}
	}
	s.forward(c, st, args, false)
}

func (s *Server) allLockKeys(keys [][]byte) bool {
	for _, k := range keys {
		if !s.isLockKey(k) {
			return false
		}
	}
	return len(keys) > 0
}

func strs(b [][]byte) []string {
	out := make([]string, len(b))
	for i, x := range b {
		out[i] = string(x)
	}
	return out
}

// extendIfLeft is an extend that goes ahead only while the lock has at
// least ARGV[minArg] ms left, answering {outcome, TTL left before}: the
// lock's state is read on the quorum, then the extend is the usual
// compare-and-extend on the quorum (the lock may be lost in between, which
// the extend finds: -1).
func (s *Server) extendIfLeft(ctx context.Context, c redcon.Conn, spec *lockscripts.Spec, key, token string, argv [][]byte) {
	v, _ := arg(argv, spec.MinArg)
	least, err := strconv.ParseInt(strings.TrimSpace(v), 10, 64)
	if err != nil {
		c.WriteError("ERR redlock-proxy: the '" + spec.Name + "' script needs a number of milliseconds in ARGV[" + strconv.Itoa(spec.MinArg+1) + "]")
		return
	}
	ttl, ok := ttlArg(c, spec, argv)
	if !ok {
		return
	}
	reply := func(outcome, left int64) {
		c.WriteArray(2)
		c.WriteInt64(outcome)
		c.WriteInt64(left)
	}
	k, err := s.rl.Read(ctx, key)
	switch {
	case err != nil:
		writeErr(c, err)
		return
	case !k.Exists:
		reply(-1, -2)
		return
	}
	left := ms(k.PTTL)
	switch {
	case k.Value != token:
		reply(-1, left)
		return
	case left < least:
		reply(0, left)
		return
	}
	start := time.Now()
	_, extended, err := s.rl.Extend(ctx, key, token, ttl, engine.ExtendSet)
	s.m.Extend(extended, err, time.Since(start))
	switch {
	case err != nil:
		writeErr(c, err)
	case extended:
		reply(1, left)
	default:
		reply(-1, left)
	}
}

// runReleasePublish runs a release that publishes on channel when it
// removes the key: on the quorum, then one PUBLISH on the backend.
func (s *Server) runReleasePublish(c redcon.Conn, st *client, spec *lockscripts.Spec, key, channel string, argv [][]byte) {
	token, ok := scriptToken(c, spec, argv)
	if !ok {
		return
	}
	ctx, cancel := s.opContext()
	defer cancel()
	s.scriptRelease(ctx, c, st, spec, key, token, func() {
		// One PUBLISH on the backend, where the lock's waiters subscribe;
		// its reply is not the client's. (A failure is logged; the waiters
		// fall back on their own timeouts.)
		s.forward(nullConn{}, st, [][]byte{[]byte("PUBLISH"), []byte(channel), []byte(spec.Message(key, token))}, false)
	})
}

// scriptRelease releases key for token on the quorum and writes the
// script's reply; released, if not nil, runs first when a quorum removed
// the key.
func (s *Server) scriptRelease(ctx context.Context, c redcon.Conn, st *client, spec *lockscripts.Spec, key, token string, released func()) {
	start := time.Now()
	q := s.rl.Quorum()
	r, err := s.rl.Release(ctx, key, token)
	s.m.Release(r.Released(q), err, time.Since(start))
	if r.Deleted > 0 {
		st.releasedLease(key, token)
	}
	switch {
	case err != nil:
		writeErr(c, err)
	case r.Released(q):
		if released != nil {
			released()
		}
		writeSpec(c, spec.OK)
	case r.Absent >= q:
		writeSpec(c, spec.Absent)
	default:
		writeSpec(c, spec.NotOwned)
	}
}

// scriptToken reads a recognised script's token (none for an inspect) and
// checks the database it selects, answering the error when either is
// wrong: what every script operation checks before it runs.
func scriptToken(c redcon.Conn, spec *lockscripts.Spec, argv [][]byte) (string, bool) {
	token, ok := arg(argv, spec.TokenArg)
	if !ok && spec.Op != lockscripts.OpInspect {
		c.WriteError("ERR redlock-proxy: the '" + spec.Name + "' script needs ARGV[" + strconv.Itoa(spec.TokenArg+1) + "]")
		return "", false
	}
	return token, databaseZero(c, spec, argv)
}

// databaseZero reports whether a script that SELECTs a database first
// (spec.DBArg) selects database 0, the only one served, and refuses it
// otherwise, as SELECT is refused. A value that is not a number makes the
// script's protected SELECT fail, and the script runs in database 0.
func databaseZero(c redcon.Conn, spec *lockscripts.Spec, argv [][]byte) bool {
	if spec.DBArg == 0 {
		return true
	}
	v, ok := arg(argv, spec.DBArg-1)
	if !ok {
		c.WriteError("ERR redlock-proxy: the '" + spec.Name + "' script needs ARGV[" + strconv.Itoa(spec.DBArg) + "]")
		return false
	}
	if n, err := strconv.ParseFloat(strings.TrimSpace(string(v)), 64); err == nil && n != 0 {
		c.WriteError("ERR redlock-proxy serves database 0 only")
		return false
	}
	return true
}

// runMultiKeyScript runs a script over several keys, all or none: an
// acquire, extend or release answers the number of keys it acted on, or,
// with spec.MultiOutcome, its outcome as one key's script answers it; an
// owner TTL answers the least of the keys' TTLs.
func (s *Server) runMultiKeyScript(c redcon.Conn, st *client, spec *lockscripts.Spec, keys []string, argv [][]byte) {
	token, ok := scriptToken(c, spec, argv)
	if !ok {
		return
	}
	ctx, cancel := s.opContext()
	defer cancel()
	switch spec.Op {
	case lockscripts.OpAcquire:
		s.scriptAcquire(ctx, c, spec, keys, token, argv)
	case lockscripts.OpExtend:
		s.scriptExtendAll(ctx, c, spec, keys, token, argv)
	case lockscripts.OpRelease:
		s.scriptReleaseAll(ctx, c, st, spec, keys, token)
	case lockscripts.OpOwnerTTL:
		s.ownerTTLAll(ctx, c, spec, keys, token)
	default:
		c.WriteError("ERR redlock-proxy: the '" + spec.Name + "' script takes one key")
	}
}

// writeOutcome answers an acquire, extend or release of keys that took
// effect (ok) or not: the script's own reply (notOK when it did not), or,
// for a multi-key script that answers a count, the number of keys.
func writeOutcome(c redcon.Conn, spec *lockscripts.Spec, keys int, ok bool, notOK string) {
	switch {
	case keys > 1 && !spec.MultiOutcome && ok:
		c.WriteInt(keys)
	case keys > 1 && !spec.MultiOutcome:
		c.WriteInt(0)
	case ok:
		writeSpec(c, spec.OK)
	default:
		writeSpec(c, notOK)
	}
}

// scriptAcquire takes keys for token on a quorum (one key: SET NX; more:
// all or none on each master) and answers the script's reply. When a
// quorum holds them for the caller already (spec.Reclaims), the caller
// takes them again: each master where every key holds its token (or a
// value that starts with its prefix) sets them to token with the new TTL,
// decided on the quorum as an extend is (engine.Reacquire).
func (s *Server) scriptAcquire(ctx context.Context, c redcon.Conn, spec *lockscripts.Spec, keys []string, token string, argv [][]byte) {
	ttl, ok := ttlArg(c, spec, argv)
	if !ok {
		return
	}
	var r engine.AcquireResult
	var err error
	if len(keys) == 1 {
		r, err = s.acquireRaw(keys[0], token, ttl)
	} else {
		start := time.Now()
		r, err = s.rl.AcquireAll(ctx, keys, token, ttl)
		s.m.Acquire(err, time.Since(start))
	}
	switch {
	case err == nil:
		writeOutcome(c, spec, len(keys), true, "")
	case !errors.Is(err, engine.ErrNotAcquired):
		writeErr(c, err)
	case r.Prev != nil && spec.Reclaims(argv, *r.Prev):
		h, _ := spec.Holder(argv)
		start := time.Now()
		_, renewed, err := s.rl.Reacquire(ctx, keys, token, ttl, h)
		s.m.Extend(renewed, err, time.Since(start))
		if err != nil {
			writeErr(c, err)
			return
		}
		writeOutcome(c, spec, len(keys), renewed, spec.NotOwned)
	default:
		writeOutcome(c, spec, len(keys), false, spec.NotOwned)
	}
}

// scriptExtendAll renews keys on every master where all of them hold the
// token, decided on the quorum (engine.ExtendAll).
func (s *Server) scriptExtendAll(ctx context.Context, c redcon.Conn, spec *lockscripts.Spec, keys []string, token string, argv [][]byte) {
	ttl, ok := ttlArg(c, spec, argv)
	if !ok {
		return
	}
	start := time.Now()
	r, extended, err := s.rl.ExtendAll(ctx, keys, token, ttl)
	s.m.Extend(extended, err, time.Since(start))
	switch {
	case err != nil:
		writeErr(c, err)
	case !extended && r.Absent >= s.rl.Quorum():
		writeOutcome(c, spec, len(keys), false, spec.Absent)
	default:
		writeOutcome(c, spec, len(keys), extended, spec.NotOwned)
	}
}

// scriptReleaseAll deletes keys from the masters where they hold the
// token. A count (node-redlock's scripts) is decided key by key, each key
// deleted wherever it holds the token (engine.ReleaseAll); an outcome
// (spec.MultiOutcome) all or none, as one Redis running such a script
// does: a master deletes the keys only where every one holds the token,
// and the lock was held when a quorum did (engine.ReleaseEvery).
func (s *Server) scriptReleaseAll(ctx context.Context, c redcon.Conn, st *client, spec *lockscripts.Spec, keys []string, token string) {
	start := time.Now()
	if !spec.MultiOutcome {
		n, err := s.rl.ReleaseAll(ctx, keys, token)
		s.m.Release(n > 0, err, time.Since(start))
		for _, k := range keys {
			st.releasedLease(k, token)
		}
		if err != nil {
			writeErr(c, err)
			return
		}
		c.WriteInt(n)
		return
	}
	q := s.rl.Quorum()
	r, err := s.rl.ReleaseEvery(ctx, keys, token)
	s.m.Release(r.Released(q), err, time.Since(start))
	if r.Deleted > 0 {
		for _, k := range keys {
			st.releasedLease(k, token)
		}
	}
	switch {
	case err != nil:
		writeErr(c, err)
	case r.Released(q):
		writeSpec(c, spec.OK)
	case r.Absent >= q:
		writeSpec(c, spec.Absent)
	default:
		writeSpec(c, spec.NotOwned)
	}
}

// ownerTTLAll answers an owner TTL of several keys as one Redis holding
// the quorum's state would: when each key holds the token on a quorum,
// the least of the keys' TTLs (each the quorum's, engine.KeyState.PTTL), a
// key without expiry counting as the longest; with spec.Positive, the
// least positive one, 0 when none is. Otherwise Absent when the keys that
// do not hold the token are absent from a quorum, NotOwned when one holds
// another value; NOQUORUM when a key's state cannot be known and none is
// known not to hold the token.
func (s *Server) ownerTTLAll(ctx context.Context, c redcon.Conn, spec *lockscripts.Spec, keys []string, token string) {
	least := int64(-1)
	notHeld, absent := 0, 0
	var rerr error
	for _, key := range keys {
		k, err := s.rl.Read(ctx, key)
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
		writeSpec(c, spec.Absent)
	case notHeld > 0:
		writeSpec(c, spec.NotOwned)
	case rerr != nil:
		writeErr(c, rerr)
	case least < 0 && spec.Positive:
		c.WriteInt(0)
	default:
		c.WriteInt64(least)
	}
}

func (s *Server) runScript(c redcon.Conn, st *client, spec *lockscripts.Spec, key string, argv [][]byte) {
	token, ok := scriptToken(c, spec, argv)
	if !ok {
		return
	}
	ctx, cancel := s.opContext()
	defer cancel()
	q := s.rl.Quorum()
	start := time.Now()
	switch spec.Op {
	case lockscripts.OpRWAcquire, lockscripts.OpRWExtend, lockscripts.OpRWRelease, lockscripts.OpRWHeld:
		s.runRWScript(ctx, c, spec, key, token, argv)
	case lockscripts.OpPermitAcquire, lockscripts.OpPermitRefresh, lockscripts.OpPermitRelease:
		s.runPermitScript(ctx, c, spec, key, token, argv)
	case lockscripts.OpRelease:
		s.scriptRelease(ctx, c, st, spec, key, token, nil)
	case lockscripts.OpExtend:
		ttl, ok := ttlArg(c, spec, argv)
		if !ok {
			return
		}
		mode := spec.Mode
		if spec.AddIf(argv) {
			mode = engine.ExtendAdd
		}
		r, extended, err := s.rl.Extend(ctx, key, token, ttl, mode)
		s.m.Extend(extended, err, time.Since(start))
		switch {
		case err != nil:
			writeErr(c, err)
		case extended:
			writeSpec(c, spec.OK)
		case r.NoTTL > 0 && spec.NoTTL != "":
			writeSpec(c, spec.NoTTL)
		case r.Absent >= q:
			writeSpec(c, spec.Absent)
		default:
			writeSpec(c, spec.NotOwned)
		}
	case lockscripts.OpAcquire:
		s.scriptAcquire(ctx, c, spec, []string{key}, token, argv)
	case lockscripts.OpExtendIfLeft:
		s.extendIfLeft(ctx, c, spec, key, token, argv)
	case lockscripts.OpInspect:
		k, err := s.rl.Read(ctx, key)
		switch {
		case err != nil:
			writeErr(c, err)
		case !k.Exists:
			c.WriteNull()
		default:
			c.WriteArray(2)
			c.WriteBulkString(k.Value)
			c.WriteInt64(ms(k.PTTL))
		}
	case lockscripts.OpOwnerTTL:
		k, err := s.rl.Read(ctx, key)
		switch {
		case err != nil:
			writeErr(c, err)
		case !k.Exists:
			writeSpec(c, spec.Absent)
		case k.Value != token:
			writeSpec(c, spec.NotOwned)
		case k.PTTL < 0 && spec.Positive:
			c.WriteInt(0)
		default:
			c.WriteInt64(ms(k.PTTL))
		}
	}
}

func arg(argv [][]byte, i int) (string, bool) {
	if i < 0 || i >= len(argv) {
		return "", false
	}
	return string(argv[i]), true
}

// ttlArg reads a script's TTL argument; Lua would fail on a non-number too.
// Negative values are kept: PEXPIRE with one ends the key, as on Redis;
// an acquire's TTL must be positive, its expiry time in the future.
func ttlArg(c redcon.Conn, spec *lockscripts.Spec, argv [][]byte) (time.Duration, bool) {
	v, ok := arg(argv, spec.TTLArg)
	n, err := strconv.ParseInt(v, 10, 64)
	limit := int64(1<<62) / int64(spec.TTLUnit)
	if !ok || err != nil || n > limit || n < -limit || (spec.Op.PositiveTTL() && n <= 0) {
		c.WriteError("ERR redlock-proxy: the '" + spec.Name + "' script needs a TTL in ARGV[" + strconv.Itoa(spec.TTLArg+1) + "]")
		return 0, false
	}
	if spec.Absolute {
		// A Unix time (PXAT, PEXPIREAT), read against the proxy's clock:
		// the TTL is what is left of it now.
		at := time.UnixMilli(n)
		if spec.TTLUnit == time.Second {
			at = time.Unix(n, 0)
		}
		ttl := time.Until(at)
		if ttl <= 0 && spec.Op.PositiveTTL() {
			c.WriteError("ERR redlock-proxy: the '" + spec.Name + "' script's expiry time in ARGV[" + strconv.Itoa(spec.TTLArg+1) + "] has passed")
			return 0, false
		}
		return ttl.Round(time.Millisecond), true
	}
	return time.Duration(n) * spec.TTLUnit, true
}

// cmdScript answers SCRIPT LOAD, EXISTS and FLUSH from the proxy's own cache,
// which is what EVALSHA looks in; other subcommands pass through.
func cmdScript(s *Server, c redcon.Conn, st *client, args [][]byte) {
	if len(args) < 2 {
		wrongArgs(c, "script")
		return
	}
	switch strings.ToLower(string(args[1])) {
	case "load":
		if len(args) != 3 {
			c.WriteError("ERR wrong number of arguments for 'script|load' command")
			return
		}
		sha, _ := s.scripts.Add(args[2])
		c.WriteBulkString(sha)
	case "exists":
		if len(args) < 3 {
			c.WriteError("ERR wrong number of arguments for 'script|exists' command")
			return
		}
		c.WriteArray(len(args) - 2)
		for _, sha := range args[2:] {
			if _, ok := s.scripts.Get(string(sha)); ok || lockscripts.BySHA(string(sha)) != nil {
				c.WriteInt(1)
			} else {
				c.WriteInt(0)
			}
		}
	case "flush":
		s.scripts.Flush()
		s.forward(c, st, args, false)
	default:
		s.forward(c, st, args, false)
	}
}

// writeSpec writes one of a recognised script's replies; nil as the
// connection's null (RESP3's own in RESP3, as Redis answers it there).
func writeSpec(c redcon.Conn, reply string) {
	if reply == lockscripts.NilReply {
		c.WriteNull()
		return
	}
	c.WriteRaw([]byte(reply))
}

// answerSpec answers an operation that took effect (ok) or did not, in the
// script's replies, or its error.
func answerSpec(c redcon.Conn, spec *lockscripts.Spec, ok bool, err error) {
	switch {
	case err != nil:
		writeErr(c, err)
	case ok:
		writeSpec(c, spec.OK)
	default:
		writeSpec(c, spec.NotOwned)
	}
}
