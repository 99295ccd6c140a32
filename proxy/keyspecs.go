package proxy

import (
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/redlock-proxy/redlock-proxy/proxy/wire"
)

// Commands that name a lock key but are not served by the quorum
// (proxy.lock_key_commands).
//
// Of a lock key, the quorum serves the commands of lockCommands and
// Redisson's HGET and HEXISTS of a holder's field (hashcmds.go). Any other
// command that names one (INCR, APPEND, RENAME, HSET, ZADD, WATCH, a
// blocking pop, MSET of several keys…) would read or change the backend's
// copy of the key alone: one master, whose copy the others then do not
// share. With lock_key_commands = "refuse" (the default unless
// proxy.lock_keys holds "*") such a command is refused before it reaches
// the backend; in MULTI, the transaction is then aborted, as Redis aborts
// one with a command it refused when queued.
//
// A command's keys are where the backend's COMMAND reply says they are
// (first, last and step; a container command's subcommands by their own
// entries), read once. For the commands whose keys move with their
// arguments (SORT … STORE, ZUNIONSTORE, XREAD, LMPOP…), the backend names
// them: COMMAND GETKEYS. Pub/sub commands name channels, not keys.

// keySpec is where a command's keys are.
type keySpec struct {
	first, last, step int
	movable           bool
	subs              bool // a container: its subcommands have the keys
}

// keyTable is the key specs of the backend's commands, by lower-case name
// ("name" or "name|subcommand"), read once from the backend.
type keyTable struct {
	specs atomic.Pointer[map[string]keySpec]
	mu    sync.Mutex // loads one at a time
}

// lockKeyRefusal is the error for a command (e: its entry in the command
// table, or nil) that names a lock key the quorum does not serve it for,
// or "" when it names none, is served by the quorum, or such commands go
// to the backend (proxy.lock_key_commands). It allocates only to refuse:
// plain passthrough asks it of every command.
func (s *Server) lockKeyRefusal(e *command, args [][]byte) string {
	if !s.refuseLockKeyCmds || len(args) < 2 || e != nil && !e.backendKeys {
		return "" // the proxy's own commands, and those of the quorum
	}
	if e != nil && (e.name == "hget" || e.name == "hexists") && len(args) == 3 && redissonHolder.Match(args[2]) {
		return "" // hashcmds.go
	}
	if e != nil && e.sorted && s.permitKeyOf(e.name, args) != nil {
		return "" // a semaphore's permits: semaphore.go serves or refuses it
	}
	key, err := s.lockKeyIn(args)
	switch {
	case errors.Is(err, errBackendUnreachable):
		return "ERR redlock-proxy: passthrough backend unreachable" // as forward answers
	case err != nil:
		s.log.Warn().Err(err).Msg("the keys of a command are not known")
		return fmt.Sprintf("ERR redlock-proxy: the keys of '%s' are not known (the backend's COMMAND failed), and it may name a lock key (proxy.lock_key_commands = \"refuse\")", nameOf(e, args[0]))
	case key != nil:
		return fmt.Sprintf("ERR redlock-proxy: '%s' of lock key '%s' is not served by the quorum: on the backend it would read or change one master's copy alone. Give locks keys of their own (proxy.lock_keys), or set proxy.lock_key_commands = \"backend\"", nameOf(e, args[0]), key)
	}
	return ""
}

// namesLockKey reports whether a command the quorum does not serve would
// be refused for naming a lock key (see lockKeyRefusal).
func (s *Server) namesLockKey(e *command, args [][]byte) bool {
	return s.refuseLockKeyCmds && s.lockKeyRefusal(e, args) != ""
}

// lockKeyIn returns the first lock key a command names, or nil.
func (s *Server) lockKeyIn(args [][]byte) ([]byte, error) {
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
	case sp.movable:
		keys, err := s.movableKeys(args)
		for _, k := range keys {
			if s.isLockKey(k) {
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
		if s.isLockKey(args[i]) {
			return args[i], nil
		}
	}
	return nil, nil
}

// specOf looks up the spec of command name, or of its subcommand sub when
// sub is not nil ("name|sub"), in any case and without allocating.
func specOf(specs map[string]keySpec, name, sub []byte) (keySpec, bool) {
	var buf [64]byte
	b := buf[:0]
	if len(name)+1+len(sub) > len(buf) {
		b = nil
	}
	b = appendLower(b, name)
	if sub != nil {
		b = appendLower(append(b, '|'), sub)
	}
	sp, ok := specs[string(b)]
	return sp, ok
}

func appendLower(b, s []byte) []byte {
	for _, c := range s {
		if c >= 'A' && c <= 'Z' {
			c += 'a' - 'A'
		}
		b = append(b, c)
	}
	return b
}

// movableKeys asks the backend which keys a command names.
func (s *Server) movableKeys(args [][]byte) ([][]byte, error) {
	v, err := s.backendValue(append([][]byte{[]byte("command"), []byte("getkeys")}, args...))
	if err != nil {
		var er wire.ErrorReply
		if errors.As(err, &er) {
			return nil, nil // no keys, or arguments the backend refuses: it answers the command itself
		}
		return nil, err
	}
	a, _ := v.([]any)
	keys := make([][]byte, 0, len(a))
	for _, k := range a {
		if ks, ok := k.(string); ok {
			keys = append(keys, []byte(ks))
		}
	}
	return keys, nil
}

// backendValue runs one command on a pooled backend connection and reads
// its reply as a value; an error reply is a wire.ErrorReply error. A
// pooled connection the backend closed meanwhile is replaced once by a new
// one.
func (s *Server) backendValue(args [][]byte) (any, error) {
	bc, err := s.be.get()
	if err != nil {
		return nil, errBackendUnreachable
	}
	raw, err := bc.do(args, s.passthroughTimeout())
	if err != nil {
		bc.close()
		if bc, err = s.be.dial(); err != nil {
			return nil, errBackendUnreachable
		}
		if raw, err = bc.do(args, s.passthroughTimeout()); err != nil {
			bc.close()
			return nil, err
		}
	}
	v, err := wire.ParseValue(raw)
	s.be.put(bc)
	if err != nil {
		return nil, err
	}
	if er, ok := v.(wire.ErrorReply); ok {
		return nil, er
	}
	return v, nil
}

var errBackendUnreachable = errors.New("passthrough backend unreachable")

// load reads the backend's COMMAND reply once; a failure is tried again at
// the next command.
func (t *keyTable) load(s *Server) (map[string]keySpec, error) {
	if m := t.specs.Load(); m != nil {
		return *m, nil
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if m := t.specs.Load(); m != nil {
		return *m, nil
	}
	v, err := s.backendValue([][]byte{[]byte("command")})
	if err != nil {
		return nil, fmt.Errorf("COMMAND: %w", err)
	}
	specs := map[string]keySpec{}
	all, _ := v.([]any)
	for _, c := range all {
		addKeySpec(specs, c)
	}
	if len(specs) == 0 {
		return nil, errors.New("COMMAND: no commands in the reply")
	}
	t.specs.Store(&specs)
	return specs, nil
}

// addKeySpec adds one entry of a COMMAND reply, and its subcommands: name,
// arity, flags, first key, last key, step, …, subcommands (the tenth
// field, Redis 7).
func addKeySpec(specs map[string]keySpec, entry any) {
	f, ok := entry.([]any)
	if !ok || len(f) < 6 {
		return
	}
	name, _ := f[0].(string)
	flags, _ := f[2].([]any)
	first, _ := f[3].(int64)
	last, _ := f[4].(int64)
	step, _ := f[5].(int64)
	sp := keySpec{first: int(first), last: int(last), step: int(step)}
	for _, fl := range flags {
		switch fl {
		case "movablekeys":
			sp.movable = true
		case "pubsub":
			defer func() { specs[strings.ToLower(name)] = keySpec{} }() // channels, not keys
		}
	}
	if len(f) > 9 {
		if subs, ok := f[9].([]any); ok && len(subs) > 0 {
			sp.subs = true
			for _, sub := range subs {
				addKeySpec(specs, sub)
			}
		}
	}
	specs[strings.ToLower(name)] = sp
}
