package proxy

import (
	"errors"
	"fmt"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redlock-proxy/redlock-proxy/proxy/backend"
	"github.com/redlock-proxy/redlock-proxy/proxy/wire"
)

// Where a command's keys are, for the boundary (boundary.go) and the
// permissions of client users: where the backend's COMMAND reply says they
// are (first, last and step; a container command's subcommands by their
// own entries), read once. For the commands whose keys move with their
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
	// The last load that failed, and when: the loads of the next
	// loadRetry answer its error at once, so that a command whose keys
	// are looked up several times waits for a stalled backend once.
	failed   error
	failedAt time.Time
}

// loadRetry is how long a failed load of the key specs is not tried again.
const loadRetry = time.Second

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
	v, err := s.backendValue(nil, append([][]byte{[]byte("command"), []byte("getkeys")}, args...))
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
// one; a backend that did not answer in time is not asked again (a stalled
// backend would make the caller wait twice).
func (s *Server) backendValue(st *client, args [][]byte) (any, error) {
	if s.cl != nil {
		return s.clusterValue(args, false) // clusterroute.go
	}
	be := s.dbOf(st).be
	bc, err := be.Get()
	if err != nil {
		return nil, errBackendUnreachable
	}
	raw, err := bc.Do(args, s.passthroughTimeout())
	if err != nil {
		bc.Close()
		if errors.Is(err, os.ErrDeadlineExceeded) {
			return nil, err
		}
		if bc, err = be.Dial(); err != nil {
			return nil, errBackendUnreachable
		}
		if raw, err = bc.Do(args, s.passthroughTimeout()); err != nil {
			bc.Close()
			return nil, err
		}
	}
	v, err := wire.ParseResult(raw)
	be.Put(bc) // after the parse: raw may be the connection's buffer
	return v, err
}

// errBackendUnreachable fails a command for which no backend connection
// could be had, on one Redis or a cluster.
var errBackendUnreachable = backend.ErrUnreachable

// load reads the backend's COMMAND reply once (Serve starts it); a
// failure is tried again after loadRetry.
func (t *keyTable) load(s *Server) (map[string]keySpec, error) {
	if m := t.specs.Load(); m != nil {
		return *m, nil
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if m := t.specs.Load(); m != nil {
		return *m, nil
	}
	if t.failed != nil && time.Since(t.failedAt) < loadRetry {
		return nil, t.failed
	}
	v, err := s.backendValue(nil, [][]byte{[]byte("command")})
	if err != nil {
		t.failed, t.failedAt = fmt.Errorf("COMMAND: %w", err), time.Now()
		return nil, t.failed
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
