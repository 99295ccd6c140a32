package proxy

import (
	"bytes"
	"errors"
	"fmt"
	"strings"

	"github.com/tidwall/redcon"

	"github.com/redlock-proxy/redlock-proxy/proxy/lockscripts"
	"github.com/redlock-proxy/redlock-proxy/proxy/wire"

	"github.com/redlock-proxy/redlock-proxy/redlock/engine"
)

// The boundary between lock state and everything else, decided here for
// every command before it runs (handle, MULTI, the subscription and
// tracking connections):
//
//   - Lock state — lock keys on the masters — changes only through quorum
//     operations, sent to every master and decided on a quorum. Nothing a
//     client sends runs on a voting master (a passthrough backend that is
//     one of the masters) unless the proxy knows every key it can write and
//     none is a lock key: commands the quorum does not serve are refused on
//     lock keys there (proxy.lock_key_commands cannot say "backend"), and
//     so are scripts and functions the proxy does not recognise, whatever
//     keys they declare, since a script can write a key it does not declare.
//     With a backend of its own, passthrough cannot reach a master at all.
//   - The proxy's own records on the masters (keys beginning
//     "redlock-proxy:": the evidence that a master kept its data, the
//     settings registry, fence counters and states) are refused to every
//     command that names them, and left out of SCAN, KEYS and RANDOMKEY.
//   - A user of proxy.users may name only the keys its patterns allow, and
//     take locks only if it may (auth.go, userRefusal): decided first, as
//     Redis checks a user's permissions before anything else.
//
// A command's keys are where the proxy reads them for the commands it
// serves (lockKeysOf), and where the backend's COMMAND reply puts them for
// the rest (keyspecs.go); one key finder, keyWhere, serves every rule.
// Commands whose keys move with their arguments are asked of the backend
// (COMMAND GETKEYS) where it matters: on a voting backend, and for a user
// with key patterns.

// Guards of the boundary. Only test binaries can switch them off
// (Config.GuardsOff); each has a test that shows what it prevents.
const (
	// guardReserved: the proxy's records are refused to clients.
	guardReserved = "reserved-keys"
	// guardBackendLockKeys: commands the quorum does not serve are
	// refused on lock keys while the backend votes.
	guardBackendLockKeys = "backend-lock-keys"
	// guardBackendScripts: scripts and functions the proxy does not
	// recognise are refused while the backend votes.
	guardBackendScripts = "backend-scripts"
)

// reservedPrefix begins the proxy's own keys on the masters.
var reservedPrefix = []byte(engine.FenceStatePrefix)

func isReserved(k []byte) bool { return bytes.HasPrefix(k, reservedPrefix) }

// errReserved answers a command that names one of the proxy's records.
const errReserved = "ERR redlock-proxy: keys beginning with '" + engine.FenceStatePrefix + "' are reserved for the proxy's own records"

// boundary is what the boundary needs to know of the configuration, set
// once (a reload changes none of it).
type boundary struct {
	// refuseKeys: commands the quorum does not serve are refused on lock
	// keys (proxy.lock_key_commands, or a voting backend).
	refuseKeys bool
	// voting: the backend is one of the masters, by address or, found at
	// start, by run_id.
	voting bool
	// mixed: a backend of its own takes the commands on lock keys the
	// quorum does not serve: it holds data beside the locks (mixed.go).
	mixed bool
	// The guards, on unless a test switched them off.
	reserved, backendKeys, backendScripts bool
}

func newBoundary(cfg Config) boundary {
	off := func(g string) bool {
		for _, o := range cfg.GuardsOff {
			if o == g {
				return true
			}
		}
		return false
	}
	b := boundary{voting: cfg.backendVotes(), reserved: !off(guardReserved),
		backendKeys: !off(guardBackendLockKeys), backendScripts: !off(guardBackendScripts)}
	b.refuseKeys = cfg.refusesLockKeyCommands() && (b.backendKeys || !b.voting)
	b.mixed = !b.voting && !b.refuseKeys
	return b
}

// backendVotes reports whether the passthrough backend is one of the
// masters.
func (s *Server) backendVotes() bool { return s.bnd.voting }

// refusal is the boundary's verdict on a command of the client st (e:
// its entry in the command table, or nil): "" to let it run, else the
// error to answer. Its user's permissions first (auth.go), as Redis checks
// ACLs before it runs a command; then the proxy's records and lock keys.
// It allocates only to refuse: plain passthrough asks it of every command.
func (s *Server) refusal(st *client, e *command, args [][]byte) string {
	if len(args) < 2 {
		return ""
	}
	if msg := s.userRefusal(st, e, args); msg != "" {
		return msg
	}
	if msg := s.reservedRefusal(e, args); msg != "" {
		return msg
	}
	return s.lockKeyRefusal(e, args)
}

// keyWhere is the key finder: it returns the first key a command (e: its
// entry in the command table, or nil) names for which f is true, or nil.
// The keys of the commands the proxy serves are where it reads them
// (lockKeysOf), the others' where the backend's COMMAND reply puts them
// (anyKey); those of a command whose keys move with its arguments are
// asked of the backend (COMMAND GETKEYS) only when movable is true.
func (s *Server) keyWhere(e *command, args [][]byte, movable bool, f func([]byte) bool) ([]byte, error) {
	if e != nil {
		if !e.keys() {
			return nil, nil
		}
		if e.served() {
			for _, k := range e.keysOf(args) {
				if f(k) {
					return k, nil
				}
			}
			return nil, nil
		}
	}
	return s.anyKey(args, movable, f)
}

// reservedRefusal refuses a command that names one of the proxy's
// records. The keys of a command whose keys move with its arguments are
// asked of the backend only where the records are: on a voting backend.
func (s *Server) reservedRefusal(e *command, args [][]byte) string {
	if !s.bnd.reserved {
		return ""
	}
	if found, _ := s.keyWhere(e, args, s.bnd.voting, isReserved); found != nil {
		return errReserved
	}
	return ""
}

// takesLock reports whether a command (e: its entry in the command
// table, or nil) is a lock operation: a write of a lock key on the quorum
// (SET, SETNX, DEL, PEXPIRE…, GETEX with options, ZREM of a semaphore's
// permits), a recognised script that writes one (any but those that only
// read), or LOCK.ACQUIRE, RELEASE and EXTEND. Reads of lock keys are not.
func (s *Server) takesLock(e *command, args [][]byte) bool {
	if e == nil || len(args) < 2 {
		return false
	}
	if s.mixed() && !s.mixedLockOp(e.name, args) {
		return false // data, where the backend holds data beside the locks (mixed.go)
	}
	switch e.name {
	case "get", "exists", "pttl", "ttl", "lock.info", "eval_ro", "evalsha_ro", "fcall", "fcall_ro":
		return false // reads, or not run on the quorum
	case "getex":
		if len(args) < 3 {
			return false // GETEX without options is GET
		}
	case "zrem":
		return s.permitKeyOf(e.name, args) != nil
	case "eval", "evalsha":
		if sp := s.scriptSpec(e.name, args); sp == nil || !sp.Op.ChangesLocks() {
			return false // not a lock script: the boundary and cmdEval decide where it runs
		}
	}
	if !e.served() {
		return false
	}
	for _, k := range e.keysOf(args) {
		if s.isLockKey(k) {
			return true
		}
	}
	return false
}

// scriptSpec is the recognised script an EVAL or EVALSHA runs, or nil.
func (s *Server) scriptSpec(name string, args [][]byte) *lockscripts.Spec {
	if name == "evalsha" {
		if e, ok := s.scripts.Get(string(args[1])); ok {
			return e.Spec
		}
		return lockscripts.BySHA(string(args[1]))
	}
	_, e := s.scripts.Add(args[1])
	return e.Spec
}

// lockKeyRefusal is the error for a command (e: its entry in the command
// table, or nil) that names a lock key the quorum does not serve it for,
// or "" when it names none, is served by the quorum, or such commands go
// to the backend (proxy.lock_key_commands, with a backend of its own).
func (s *Server) lockKeyRefusal(e *command, args [][]byte) string {
	if !s.bnd.refuseKeys || len(args) < 2 || e != nil && !e.has(fBackendKeys) {
		return "" // the proxy's own commands, and those of the quorum
	}
	if e != nil && e.has(fHash) && len(args) == 3 && redissonHolder.Match(args[2]) {
		return "" // redissonhash.go
	}
	if e != nil && e.has(fSorted) && s.permitKeyOf(e.name, args) != nil {
		return "" // a semaphore's permits: semaphore.go serves or refuses it
	}
	if e == nil && (strings.EqualFold(string(args[0]), "sort") || strings.EqualFold(string(args[0]), "sort_ro")) {
		if msg := s.sortRefusal(args); msg != "" {
			return msg
		}
	}
	key, err := s.anyKey(args, true, s.isLockKey)
	switch {
	case errors.Is(err, errBackendUnreachable):
		return "ERR redlock-proxy: passthrough backend unreachable" // as forward answers
	case err != nil:
		s.log.Warn().Err(err).Msg("the keys of a command are not known")
		return fmt.Sprintf("ERR redlock-proxy: the keys of '%s' are not known (the backend's COMMAND failed), and it may name a lock key", nameOf(e, args[0]))
	case key != nil && s.bnd.voting:
		return fmt.Sprintf("ERR redlock-proxy: '%s' of lock key '%s' is not served by the quorum: on the backend, a voting master, it would read or change that master's copy alone. Give the proxy a backend of its own (proxy.backend), or locks keys of their own (proxy.lock_keys)", nameOf(e, args[0]), key)
	case key != nil:
		return fmt.Sprintf("ERR redlock-proxy: '%s' of lock key '%s' is not served by the quorum: on the backend it would act on the backend's key, not on the lock. Give locks keys of their own (proxy.lock_keys), or set proxy.lock_key_commands = \"backend\"", nameOf(e, args[0]), key)
	}
	return ""
}

// sortRefusal refuses SORT and SORT_RO with a BY or GET pattern on a
// voting backend: the pattern reads keys that neither COMMAND GETKEYS nor
// the proxy can name beforehand, lock keys and the proxy's records among
// them. ("BY nosort" and "GET #" read nothing.)
func (s *Server) sortRefusal(args [][]byte) string {
	if !s.bnd.voting {
		return ""
	}
	for i := 2; i+1 < len(args); i++ {
		o, v := strings.ToLower(string(args[i])), string(args[i+1])
		if o == "by" && !strings.EqualFold(v, "nosort") || o == "get" && v != "#" {
			return "ERR redlock-proxy: SORT with a BY or GET pattern reads keys the proxy cannot name beforehand, and the backend is a voting master; sort without patterns, or give the proxy a backend of its own (proxy.backend)"
		}
	}
	return ""
}

// scriptRefusal is the error for a script the proxy does not recognise
// (EVAL, EVALSHA, EVAL_RO, EVALSHA_RO) or a function (FCALL, FCALL_RO)
// whose declared keys are keys: on a voting backend it is refused
// whatever they are, since a script can write a key it does not declare;
// elsewhere when they include a lock key, unless proxy.unknown_scripts
// says "passthrough". "" lets it run on the backend.
func (s *Server) scriptRefusal(keys [][]byte) string {
	if s.bnd.voting && s.bnd.backendScripts {
		return unknownScriptOnVotingBackend
	}
	if s.bnd.voting || s.cfg.unknownScripts() == "passthrough" {
		return "" // the guard is off (tests), or the operator's choice
	}
	for _, k := range keys {
		if s.isLockKey(k) {
			return unknownScriptOnLockKey
		}
	}
	return ""
}

// unknownScriptOnLockKey refuses a script the proxy does not recognise
// whose keys include a lock key, with a backend of its own: there it
// would act on the backend's key, not on the lock (an unlock there answers
// "not held" while the lock stays on the quorum).
const unknownScriptOnLockKey = "ERR redlock-proxy: this script is not a lock script the proxy knows, and its keys include a lock key (proxy.lock_keys): on the backend it would act on the backend's key, not on the lock. Declare it in [[scripts]] to run it on the quorum, or set proxy.unknown_scripts = \"passthrough\""

// unknownScriptOnVotingBackend refuses a script or function the proxy
// does not recognise while the backend is a voting master.
const unknownScriptOnVotingBackend = "ERR redlock-proxy: this script is not one the proxy knows, and the backend is a voting master: a script can write keys it does not declare, locks among them, on that master alone. Declare a lock script in [[scripts]] to run it on the quorum, or give the proxy a backend of its own (proxy.backend) for other scripts and functions"

// anyKey returns the first key a command names (where the backend's
// COMMAND reply puts them) for which f is true, or nil. The keys of a
// command whose keys move with its arguments are asked of the backend
// (COMMAND GETKEYS) only when movable is true; otherwise such a command
// is taken to name none.
func (s *Server) anyKey(args [][]byte, movable bool, f func([]byte) bool) ([]byte, error) {
	specs, err := s.keyTab.load(s)
	if err != nil {
		return nil, err
	}
	sp, ok := specOf(specs, args[0], nil)
	if ok && sp.subs && len(args) > 1 {
		sp, ok = specOf(specs, args[0], args[1])
	}
	switch {
	case !ok:
		return nil, nil // unknown to the backend: it answers the error itself
	case sp.movable && !movable:
		return nil, nil
	case sp.movable:
		keys, err := s.movableKeys(args)
		for _, k := range keys {
			if f(k) {
				return k, nil
			}
		}
		return nil, err
	case sp.first <= 0 || sp.first >= len(args):
		return nil, nil
	}
	last := sp.last
	if last < 0 {
		last += len(args)
	}
	for i := sp.first; i <= min(last, len(args)-1); i += max(sp.step, 1) {
		if f(args[i]) {
			return args[i], nil
		}
	}
	return nil, nil
}

// checkBackendIdentity finds a backend configured as one of its own that
// is in fact one of the masters, under another address (a host name and
// an IP address, two interfaces): its run_id is a master's. Such a backend
// is treated as the voting backend it is, and the operator is told.
func (s *Server) checkBackendIdentity() {
	if s.bnd.voting {
		return
	}
	v, err := s.backendValue(nil, [][]byte{[]byte("info"), []byte("server")})
	if err != nil {
		s.log.Warn().Err(err).Msg("could not read the backend's run_id; it is taken to be the Redis of its own that proxy.backend names")
		return
	}
	info, _ := v.(string)
	run := infoField(info, "run_id")
	if run == "" {
		return
	}
	for _, m := range s.rl.Status() {
		if m.RunID == run {
			s.log.Error().Str("backend", s.be.Addr()).Str("master", m.Addr).
				Msg("proxy.backend is one of the masters under another address: it is treated as a voting backend (commands on lock keys and unknown scripts refused); give the proxy a Redis of its own")
			s.bnd.voting = true
			s.bnd.refuseKeys = s.bnd.refuseKeys || s.bnd.backendKeys
			s.bnd.mixed = false
			return
		}
	}
}

// infoField reads one field of an INFO reply.
func infoField(info, name string) string {
	for _, line := range strings.Split(info, "\n") {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), name+":"); ok {
			return v
		}
	}
	return ""
}

// cmdKeyspace serves SCAN, KEYS and RANDOMKEY: on a voting backend, whose
// keys include the proxy's records, the records are left out of the
// reply (a SCAN page may then hold fewer keys, as SCAN allows); RANDOMKEY
// asks again when it draws one, and answers nil when it draws only
// records. Elsewhere they pass through.
func cmdKeyspace(s *Server, c redcon.Conn, st *client, args [][]byte) route {
	if !s.bnd.voting && len(args) > 1 && !strings.EqualFold(string(args[0]), "randomkey") {
		return s.ownKeyspace(c, st, args) // keyspace.go
	}
	if !s.bnd.voting || !s.bnd.reserved {
		return toBackend
	}
	name := strings.ToLower(string(args[0]))
	for try := 0; ; try++ {
		v, err := s.backendValue(st, args)
		var er wire.ErrorReply
		switch {
		case errors.As(err, &er):
			c.WriteError(string(er))
			return replied
		case err != nil:
			c.WriteError("ERR redlock-proxy: passthrough backend failed")
			return replied
		}
		switch name {
		case "randomkey":
			k, ok := v.(string)
			switch {
			case !ok:
				c.WriteNull()
			case !isReserved([]byte(k)):
				c.WriteBulkString(k)
			case try < 16:
				continue
			default:
				c.WriteNull()
			}
		case "keys":
			writeKeys(c, v)
		default: // scan: [cursor, keys]
			a, _ := v.([]any)
			if len(a) != 2 {
				c.WriteAny(v)
				return replied
			}
			c.WriteArray(2)
			c.WriteAny(a[0])
			writeKeys(c, a[1])
		}
		return replied
	}
}

// writeKeys writes an array of keys without the proxy's records.
func writeKeys(c redcon.Conn, v any) {
	a, _ := v.([]any)
	n := 0
	for _, k := range a {
		if ks, ok := k.(string); !ok || !isReserved([]byte(ks)) {
			n++
		}
	}
	c.WriteArray(n)
	for _, k := range a {
		if ks, ok := k.(string); ok && !isReserved([]byte(ks)) {
			c.WriteBulkString(ks)
		} else if !ok {
			c.WriteAny(k)
		}
	}
}
