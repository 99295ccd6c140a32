package proxy

import (
	"errors"
	"strconv"
	"strings"
	"time"

	"github.com/tidwall/redcon"

	"github.com/redlock-proxy/redlock-proxy/proxy/lockscripts"
	"github.com/redlock-proxy/redlock-proxy/proxy/quorum"
	"github.com/redlock-proxy/redlock-proxy/proxy/wire"
	"github.com/redlock-proxy/redlock-proxy/redlock/engine"
)

// cmdEval runs EVAL and EVALSHA. A recognised lock script on a lock key runs
// as a quorum operation; any other script passes through to the backend.
// EVALSHA of a digest the proxy has not seen answers NOSCRIPT, never the
// backend's copy, so that a lock script cannot run on one master alone.
func cmdEval(s *Server, c redcon.Conn, st *client, args [][]byte) route {
	keys, argv, ok := evalKeys(c, args)
	if !ok {
		return replied
	}
	src, spec, ok := s.evalScript(c, args, keys)
	if !ok {
		return replied
	}
	lock := s.countLockKeys(keys)
	if spec == nil || lock == 0 || spec.Op == lockscripts.OpNotALock {
		s.runOtherScript(c, st, spec, lock, src, args, keys)
		return replied
	}
	if !s.oversized(c, keys, argv) {
		s.runLockScript(c, st, spec, lock, src, args, keys, argv)
	}
	return replied
}

// evalKeys splits EVAL's and EVALSHA's arguments after the script into its
// KEYS and ARGV, answering Redis's error for a bad number of keys (ok false).
func evalKeys(c redcon.Conn, args [][]byte) (keys, argv [][]byte, ok bool) {
	nk, err := parseInt(args[2])
	switch {
	case err != nil:
		c.WriteError("ERR value is not an integer or out of range")
		return nil, nil, false
	case nk < 0:
		c.WriteError("ERR Number of keys can't be negative")
		return nil, nil, false
	case nk > int64(len(args)-3):
		c.WriteError("ERR Number of keys can't be greater than number of args")
		return nil, nil, false
	}
	return args[3 : 3+nk], args[3+nk:], true
}

// evalScript is the script that EVAL sends (noted, for a later EVALSHA) or
// that EVALSHA names: its text and, if the proxy recognises it, its spec.
// A library script the proxy knows by its digest alone runs without its
// text (src "") on lock keys; any other digest it has not seen answers
// NOSCRIPT (ok false), which makes the client send EVAL.
func (s *Server) evalScript(c redcon.Conn, args, keys [][]byte) (src string, spec *lockscripts.Spec, ok bool) {
	if !strings.EqualFold(string(args[0]), "evalsha") {
		_, e := s.scripts.Add(args[1])
		return e.Src, e.Spec, true
	}
	if e, ok := s.scripts.Get(string(args[1])); ok {
		return e.Src, e.Spec, true
	}
	spec = lockscripts.BySHA(string(args[1]))
	if spec == nil || !s.allLockKeys(keys) {
		c.WriteError("NOSCRIPT No matching script. Please use EVAL.")
		return "", nil, false
	}
	return "", spec, true
}

// countLockKeys is how many of keys are lock keys.
func (s *Server) countLockKeys(keys [][]byte) int {
	n := 0
	for _, k := range keys {
		if s.isLockKey(k) {
			n++
		}
	}
	return n
}

// runLockScript runs a recognised lock script (spec) whose keys include
// lock keys (lock of them) on the quorum.
func (s *Server) runLockScript(c redcon.Conn, st *client, spec *lockscripts.Spec, lock int, src string, args, keys, argv [][]byte) {
	switch {
	case spec.Op.IsHash() && s.isLockKey(keys[0]):
		s.runHashScript(c, st, spec, strs(keys), argv)
	case spec.Publishes():
		// A release that publishes: KEYS[1] is the lock, KEYS[2] the
		// channel, which need not be a lock key.
		if len(keys) != 2 || !s.isLockKey(keys[0]) {
			c.WriteError("ERR redlock-proxy: the '" + spec.Name + "' script takes the lock key and then a channel")
			return
		}
		s.runReleasePublish(c, st, spec, string(keys[0]), string(keys[1]), argv)
	case len(keys) > 1 && !spec.Multi:
		// On the backend it would act on one master's copy of the lock.
		c.WriteError("ERR redlock-proxy: the '" + spec.Name + "' script takes one key")
	case spec.Op == lockscripts.OpTimeProbe:
		s.timeProbe(c, st, keys, src, args)
	case lock < len(keys):
		c.WriteError("ERR redlock-proxy: the keys of a lock script must all be lock keys (proxy.lock_keys)")
	case len(keys) > 1:
		s.runMultiKeyScript(c, st, spec, strs(keys), argv)
	default:
		s.runScript(c, st, spec, string(keys[0]), argv)
	}
}

// runOtherScript serves a script that does not run on the quorum: one the
// proxy does not recognise (spec nil), a library's script that is not a
// lock operation, or a lock script on keys none of which is a lock key.
// It runs on the backend where the boundary lets it.
func (s *Server) runOtherScript(c redcon.Conn, st *client, spec *lockscripts.Spec, lock int, src string, args, keys [][]byte) {
	switch {
	case spec != nil && lock > 0 && len(keys) > 1 && !spec.Multi:
		// A library's script that is not a lock operation, on a lock
		// key among others: refused as a lock script would be.
		c.WriteError("ERR redlock-proxy: the '" + spec.Name + "' script takes one key")
	case src == "":
		// Known by its digest alone: the backend needs its text.
		c.WriteError("NOSCRIPT No matching script. Please use EVAL.")
	case spec == nil:
		s.forwardUnknownScript(c, st, lock, src, args, keys)
	case spec.Op == lockscripts.OpTimeProbe:
		s.timeProbe(c, st, keys, src, args)
	case lock > 0 && s.bnd.voting && s.bnd.backendScripts:
		// Not a lock operation, on a lock key. What the script writes is its own affair: not on a voter's lock.
		c.WriteError("ERR redlock-proxy: the '" + spec.Name + "' script is not a lock script, and its keys include a lock key (proxy.lock_keys): on the backend, a voting master, it would act on that master's copy of the lock alone. Give the proxy a backend of its own (proxy.backend)")
	default:
		// A library's script on keys that are not lock keys writes only
		// the keys it declares (recognition is by its tokens, so it is the
		// library's code): it runs on the backend.
		s.forwardScript(c, st, src, args)
	}
}

// forwardUnknownScript passes a script the proxy does not recognise to the
// backend, unless the boundary refuses it (scriptRefusal); on a lock key,
// a Redisson lock the proxy does not support says so.
func (s *Server) forwardUnknownScript(c redcon.Conn, st *client, lock int, src string, args, keys [][]byte) {
	msg := s.scriptRefusal(keys)
	if r := redissonUnsupported(keys, src); msg != "" && r != "" && lock > 0 {
		msg = r
	}
	if msg != "" {
		c.WriteError(msg)
		return
	}
	s.forwardScript(c, st, src, args)
}

// forwardScript runs a script on the backend by its text (the client may
// have sent EVALSHA of a digest the backend has not seen).
func (s *Server) forwardScript(c redcon.Conn, st *client, src string, args [][]byte) {
	fwd := append([][]byte{[]byte("EVAL"), []byte(src)}, args[2:]...)
	s.forward(c, st, fwd, false)
}

// timeProbe answers Symfony Lock's probe of TIME in scripts as the script
// does: 1, once KEYS[1] is set to "1" for a millisecond. A lock key is set
// on every master (as SET of a lock key is), not on the backend alone.
func (s *Server) timeProbe(c redcon.Conn, st *client, keys [][]byte, src string, args [][]byte) {
	switch {
	case len(keys) == 0:
		c.WriteError("ERR redlock-proxy: the 'Symfony TIME probe' script takes a key")
	case !s.isLockKey(keys[0]):
		s.forwardScript(c, st, src, args)
	default:
		s.op(st).TimeProbe(c, string(keys[0]))
	}
}

// cmdOtherScript serves EVAL_RO, EVALSHA_RO, FCALL and FCALL_RO: scripts
// and functions the proxy does not recognise, passed through where the
// boundary lets them (scriptRefusal).
func cmdOtherScript(s *Server, c redcon.Conn, st *client, args [][]byte) route {
	var keys [][]byte
	if len(args) >= 3 {
		if n, err := parseInt(args[2]); err == nil && n > 0 && n <= int64(len(args)-3) {
			keys = args[3 : 3+n]
		}
	}
	if msg := s.scriptRefusal(keys); msg != "" {
		c.WriteError(msg)
		return replied
	}
	return toBackend
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
// least ARGV[minArg] ms left (quorum.Op.ExtendIfLeft).
func (s *Server) extendIfLeft(st *client, c redcon.Conn, spec *lockscripts.Spec, key, token string, argv [][]byte) {
	v, _ := quorum.Arg(argv, spec.MinArg)
	least, ok := lockscripts.ParseInt(v)
	if !ok {
		c.WriteError("ERR redlock-proxy: the '" + spec.Name + "' script needs a number of milliseconds in ARGV[" + strconv.Itoa(spec.MinArg+1) + "]")
		return
	}
	ttl, ok := s.ttlArg(c, spec, argv)
	if !ok {
		return
	}
	s.op(st).ExtendIfLeft(c, key, token, least, ttl)
}

// runReleasePublish runs a release that publishes on channel when it
// removes the key: on the quorum, then one PUBLISH on the backend.
func (s *Server) runReleasePublish(c redcon.Conn, st *client, spec *lockscripts.Spec, key, channel string, argv [][]byte) {
	token, ok := quorum.ScriptToken(c, s.dbOf(st).n, spec, argv)
	if !ok {
		return
	}
	s.scriptRelease(c, st, spec, key, token, func() {
		// One PUBLISH on the backend, where the lock's waiters subscribe;
		// its reply is not the client's. (A failure is logged; the waiters
		// fall back on their own timeouts.)
		s.forward(wire.Discard{}, st, [][]byte{[]byte("PUBLISH"), []byte(channel), []byte(spec.Message(key, token))}, false)
	})
}

// scriptRelease releases key for token on the quorum and writes the
// script's reply (quorum.Op.WriteRelease); released, if not nil, runs
// first when the lock was released.
func (s *Server) scriptRelease(c redcon.Conn, st *client, spec *lockscripts.Spec, key, token string, released func()) {
	op := s.op(st)
	mirror := 0 // where the backend holds data beside the locks: 1 the mirror held the token, -1 something else
	if s.mixed() {
		mirror = s.mirrorRelease(st, key, token)
	}
	r, err := op.Release(key, token)
	if r.Deleted > 0 {
		st.releasedLease(key, token)
	}
	op.WriteRelease(c, spec, r, err, mirror, s.mixed(), released)
}

// runMultiKeyScript runs a script over several keys, all or none: an
// acquire, extend or release answers the number of keys it acted on, or,
// with spec.MultiOutcome, its outcome as one key's script answers it; an
// owner TTL answers the least of the keys' TTLs.
func (s *Server) runMultiKeyScript(c redcon.Conn, st *client, spec *lockscripts.Spec, keys []string, argv [][]byte) {
	token, ok := quorum.ScriptToken(c, s.dbOf(st).n, spec, argv)
	if !ok {
		return
	}
	switch spec.Op {
	case lockscripts.OpAcquire:
		s.scriptAcquire(st, c, spec, keys, token, argv)
	case lockscripts.OpExtend:
		s.scriptExtendAll(st, c, spec, keys, token, argv)
	case lockscripts.OpRelease:
		s.scriptReleaseAll(c, st, spec, keys, token)
	case lockscripts.OpOwnerTTL:
		s.op(st).OwnerTTLAll(c, spec, keys, token)
	default:
		c.WriteError("ERR redlock-proxy: the '" + spec.Name + "' script takes one key")
	}
}

// scriptAcquire takes keys for token on a quorum (one key: SET NX; more:
// all or none on each master) and answers the script's reply. When a
// quorum holds them for the caller already (spec.Reclaims), the caller
// takes them again: each master where every key holds its token (or a
// value that starts with its prefix) sets them to token with the new TTL,
// decided on the quorum as an extend is (engine.Reacquire).
func (s *Server) scriptAcquire(st *client, c redcon.Conn, spec *lockscripts.Spec, keys []string, token string, argv [][]byte) {
	ttl, ok := s.ttlArg(c, spec, argv)
	if !ok {
		return
	}
	if i := spec.ReclaimArg(); i >= 0 {
		if _, ok := spec.Holder(argv); !ok {
			c.WriteError("ERR redlock-proxy: the '" + spec.Name + "' script needs a length, an integer, in ARGV[" + strconv.Itoa(i+1) + "]")
			return
		}
	}
	h, reclaims := spec.Holder(argv)
	mirrored := false
	if len(keys) == 1 && s.mixed() {
		// The lock's mirror on the backend first (mixed.go): a key that
		// holds data, or another holder's lock, is not acquired there.
		v, err := s.backendCall(st, "set", keys[0], token, "nx", "px", strconv.FormatInt(ttl.Milliseconds(), 10))
		if err == nil && v == nil {
			held, _ := s.backendCall(st, "get", keys[0])
			if hv, ok := held.(string); !ok || !reclaims || !h.Holds(hv) {
				s.m.Acquire(engine.ErrHeld, 0)
				quorum.WriteOutcome(c, spec, 1, false, spec.NotOwned)
				return
			}
		}
		mirrored = err == nil && v != nil
	}
	op := s.op(st)
	var r engine.AcquireResult
	var err error
	if len(keys) == 1 {
		r, err = s.acquireOne(op, keys[0], token, ttl)
	} else {
		r, err = op.AcquireAll(keys, token, ttl)
	}
	unmirror := func() {
		if mirrored {
			s.mirrorRelease(st, keys[0], token)
		}
	}
	switch {
	case err == nil:
		quorum.WriteOutcome(c, spec, len(keys), true, "")
	case !errors.Is(err, engine.ErrNotAcquired):
		unmirror()
		quorum.WriteErr(c, err)
	case reclaims && (r.Prev == nil || h.Holds(*r.Prev)):
		// Each master decides as the script does; the quorum, as an
		// extend.
		renewed, err := op.Reacquire(keys, token, ttl, h)
		if renewed && len(keys) == 1 && s.mixed() {
			s.mirrorTake(st, keys[0], token, ttl.Milliseconds())
		} else if !renewed {
			unmirror()
		}
		quorum.WriteReacquired(c, spec, len(keys), renewed, err)
	default:
		unmirror()
		quorum.WriteOutcome(c, spec, len(keys), false, spec.NotOwned)
	}
}

// scriptExtendAll renews keys on every master where all of them hold the
// token, decided on the quorum (quorum.Op.ExtendAll).
func (s *Server) scriptExtendAll(st *client, c redcon.Conn, spec *lockscripts.Spec, keys []string, token string, argv [][]byte) {
	ttl, ok := s.ttlArg(c, spec, argv)
	if !ok {
		return
	}
	op := s.op(st)
	r, extended, err := op.ExtendAll(keys, token, ttl)
	op.WriteExtendAll(c, spec, len(keys), r, extended, err)
}

// scriptReleaseAll deletes keys from the masters where they hold the
// token: key by key for a count (quorum.Op.ReleaseAll), all or none for an
// outcome (spec.MultiOutcome, quorum.Op.ReleaseEvery).
func (s *Server) scriptReleaseAll(c redcon.Conn, st *client, spec *lockscripts.Spec, keys []string, token string) {
	op := s.op(st)
	if !spec.MultiOutcome {
		n, err := op.ReleaseAll(keys, token)
		for _, k := range keys {
			st.releasedLease(k, token)
			if s.mixed() {
				s.mirrorRelease(st, k, token)
			}
		}
		quorum.WriteReleaseCount(c, n, err)
		return
	}
	r, err := op.ReleaseEvery(keys, token)
	if r.Deleted > 0 {
		for _, k := range keys {
			st.releasedLease(k, token)
		}
	}
	op.WriteRelease(c, spec, r, err, 0, false, nil)
}

// runScript runs a recognised lock script of one key on the quorum: the
// script's operation in package quorum, with the session's part (leases,
// mixed mode's mirrors) here; read/write locks in rwlock.go and
// semaphores in semaphore.go.
func (s *Server) runScript(c redcon.Conn, st *client, spec *lockscripts.Spec, key string, argv [][]byte) {
	token, ok := quorum.ScriptToken(c, s.dbOf(st).n, spec, argv)
	if !ok {
		return
	}
	switch spec.Op {
	case lockscripts.OpRWAcquire, lockscripts.OpRWExtend, lockscripts.OpRWRelease, lockscripts.OpRWHeld:
		s.runRWScript(st, c, spec, key, token, argv)
	case lockscripts.OpPermitAcquire, lockscripts.OpPermitRefresh, lockscripts.OpPermitRelease:
		s.runPermitScript(st, c, spec, key, token, argv)
	case lockscripts.OpRelease:
		s.scriptRelease(c, st, spec, key, token, nil)
	case lockscripts.OpExtend:
		s.scriptExtend(c, st, spec, key, token, argv)
	case lockscripts.OpAcquire:
		s.scriptAcquire(st, c, spec, []string{key}, token, argv)
	case lockscripts.OpExtendIfLeft:
		s.extendIfLeft(st, c, spec, key, token, argv)
	case lockscripts.OpInspect:
		s.op(st).Inspect(c, key)
	case lockscripts.OpOwnerTTL:
		s.op(st).OwnerTTL(c, spec, key, token)
	}
}

// scriptExtend renews key for token on the quorum (quorum.Op.Extend), the
// TTL set as the script sets it. In mixed mode the lock's mirror decides
// first whether the lock is still there, and is renewed after it.
func (s *Server) scriptExtend(c redcon.Conn, st *client, spec *lockscripts.Spec, key, token string, argv [][]byte) {
	ttl, ok := s.ttlArg(c, spec, argv)
	if !ok {
		return
	}
	mode := spec.Mode
	if spec.AddIf(argv) {
		mode = engine.ExtendAdd
	}
	op := s.op(st)
	if s.mixed() {
		// The application's keyspace decides whether the lock is still
		// there, as on one Redis; the quorum, whether it is extended.
		switch m := s.mirrorState(st, key, token); {
		case m == -1:
			_, _ = op.EndLock(key, token) // data took its place: the lock ended
			quorum.WriteSpec(c, spec.NotOwned)
			return
		case m == 0 && mode != engine.ExtendClaim:
			_, _ = op.EndLock(key, token) // renamed, expired or lost there: ended
			quorum.WriteSpec(c, spec.Absent)
			return
		}
	}
	r, extended, err := op.Extend(key, token, ttl, mode)
	if extended && s.mixed() {
		s.mirrorExtend(st, key, token, ttl.Milliseconds(), mode == engine.ExtendAdd)
	}
	op.WriteExtend(c, spec, r, extended, err)
}

// ttlArg reads a script's TTL argument (quorum.ScriptTTL). A TTL above
// redlock.max_lock_ttl is refused here, before anything is sent (the
// quorum's reads included).
func (s *Server) ttlArg(c redcon.Conn, spec *lockscripts.Spec, argv [][]byte) (time.Duration, bool) {
	ttl, ok := quorum.ScriptTTL(c, spec, argv)
	if ok {
		if err := s.rl.CheckTTL(ttl); err != nil {
			quorum.WriteErr(c, err)
			return 0, false
		}
	}
	return ttl, ok
}

// cmdScript answers SCRIPT LOAD, EXISTS and FLUSH from the proxy's own cache,
// which is what EVALSHA looks in; other subcommands pass through.
func cmdScript(s *Server, c redcon.Conn, st *client, args [][]byte) route {
	switch strings.ToLower(string(args[1])) {
	case "load":
		if len(args) != 3 {
			c.WriteError("ERR wrong number of arguments for 'script|load' command")
			return replied
		}
		sha, _ := s.scripts.Add(args[2])
		c.WriteBulkString(sha)
	case "exists":
		if len(args) < 3 {
			c.WriteError("ERR wrong number of arguments for 'script|exists' command")
			return replied
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
		return toBackend
	default:
		return toBackend
	}
	return replied
}
