package proxy

import (
	"bytes"
	"errors"
	"strconv"
	"sync"

	"github.com/tidwall/redcon"

	"github.com/redlock-proxy/redlock-proxy/proxy/backend"
	"github.com/redlock-proxy/redlock-proxy/proxy/lockscripts"
	"github.com/redlock-proxy/redlock-proxy/proxy/wire"
	"github.com/redlock-proxy/redlock-proxy/redlock/engine"
)

// Data beside locks. With a backend of the proxy's own that takes the
// commands on lock keys the quorum does not serve (proxy.lock_key_commands
// resolving to "backend": every key a lock key, the default there), a key
// may be a lock one moment and data the next — a rate limiter's
// `SET k 0 EX 60 NX` then `INCR k`, a cache's `SET NX EX` then `GET`, an
// idempotency key's `SET NX` then `DEL`. One rule keeps the two apart and
// answers as one Redis would:
//
//   - The backend holds the application's whole keyspace. A lock taken by
//     SET … NX or SETNX is written there too — its mirror, with the same
//     value and TTL — first, by the same SET NX: so a key that holds data
//     is not granted as a lock (Redis's NX), and data commands that follow
//     act on it as on the lock's value (INCR keeps its TTL).
//   - The quorum decides who holds a lock, as always: the acquire is
//     granted only when the backend took the mirror *and* a quorum of
//     masters took the lock, and the mirror is taken back otherwise.
//     Releases and extends by the recognised scripts act on both.
//   - Reads (GET, PTTL, TTL, EXISTS) answer from the backend, and where it
//     holds nothing from the quorum: a lock without a mirror (LOCK.*,
//     multi-key scripts, Redisson's, a semaphore, one whose mirror was
//     lost); when no quorum answers, the backend's "absent" stands, so a
//     data read never fails because masters are down. A "not held" read
//     never leads to a second holder: an acquire needs both.
//   - Deletes and expiries (DEL, UNLINK, GETDEL, the EXPIRE family,
//     PERSIST) are answered by the backend (for the data or the mirror),
//     and the lock, if a quorum holds one, goes too or gets the same TTL;
//     a RENAME the backend carried out ends the locks of both keys. With no
//     quorum, a key that a master that answered holds as a lock answers
//     NOQUORUM (the lock stays: "deleted" would say the key is free); a key
//     no master holds — data never reaches one — keeps the backend's
//     answer. In a
//     transaction the backend runs them; once it commits, its DEL, UNLINK,
//     GETDEL and RENAME end the locks too. Every other command, plain SET
//     included, runs on the backend alone and can never change a master.
//
// Mixed mode never changes what reaches the masters: only the proxy's
// quorum operations write them, as in every configuration.

// mixed reports whether the backend holds data beside the locks (above).
func (s *Server) mixed() bool { return s.bnd.mixed }

// mirrorReleaseScript deletes a lock's mirror if it still holds the token:
// 1; 0 when the key is absent, -1 when it holds something else.
const mirrorReleaseScript = `local v = redis.call('get', KEYS[1])
if v == ARGV[1] then return redis.call('del', KEYS[1]) end
if not v then return 0 end
return -1`

// mirrorExtendScript renews a lock's mirror if it holds the token: to
// ARGV[2] ms, or by ARGV[2] ms more with ARGV[3] = "add"; a mirror that
// was lost is written again, unless data took its place.
const mirrorExtendScript = `local v = redis.call('get', KEYS[1])
if v == ARGV[1] then
  if ARGV[3] == 'add' then
    local left = redis.call('pttl', KEYS[1])
    if left > 0 then return redis.call('pexpire', KEYS[1], left + tonumber(ARGV[2])) end
    return 0
  end
  return redis.call('pexpire', KEYS[1], ARGV[2])
end
if not v then return redis.call('set', KEYS[1], ARGV[1], 'px', ARGV[2], 'nx') and 1 or 0 end
return 0`

// backendCall runs one command of the proxy's own on the backend and reads
// its reply as a value (wire.ParseValue): a reply error is a
// wire.ErrorReply error.
func (s *Server) backendCall(st *client, args ...string) (any, error) {
	b := make([][]byte, len(args))
	for i, a := range args {
		b[i] = []byte(a)
	}
	return s.backendValue(st, b)
}

// mirrorRelease takes a lock's mirror back where it still holds token, and
// reports what the backend held: 1 the token (deleted), 0 nothing (or it
// failed), -1 something else. Failures are logged: the mirror then lives
// until its TTL, and only keeps the key from being acquired for that long,
// as the lock would have.
func (s *Server) mirrorRelease(st *client, key, token string) int {
	v, err := s.backendCall(st, "eval", mirrorReleaseScript, "1", key, token)
	var er wire.ErrorReply
	switch {
	case errors.As(err, &er): // another type
		return -1
	case err != nil:
		s.log.Debug().Err(err).Str("key", key).Msg("a lock's mirror on the backend was not taken back")
		return 0
	}
	n, _ := v.(int64)
	return int(n)
}

// mirrorExtend renews a lock's mirror after the quorum extended the lock.
func (s *Server) mirrorExtend(st *client, key, token string, ttlMS int64, add bool) {
	mode := "set"
	if add {
		mode = "add"
	}
	if _, err := s.backendCall(st, "eval", mirrorExtendScript, "1", key, token, strconv.FormatInt(ttlMS, 10), mode); err != nil {
		s.log.Debug().Err(err).Str("key", key).Msg("a lock's mirror on the backend was not renewed")
	}
}

// backendAnswer writes a value read by backendCall to the client, in its
// protocol: strings as bulk strings, integers, nil, arrays, errors.
func backendAnswer(c redcon.Conn, v any, err error) {
	var er wire.ErrorReply
	switch {
	case errors.As(err, &er):
		c.WriteError(string(er))
	case err != nil:
		c.WriteError("ERR redlock-proxy: passthrough backend failed")
	case v == nil:
		c.WriteNull()
	default:
		switch x := v.(type) {
		case string:
			c.WriteBulkString(x)
		case int64:
			c.WriteInt64(x)
		default:
			c.WriteAny(x)
		}
	}
}

// mirrorTaken writes a lock's mirror on the backend before the quorum
// acquire, with the client's own SET … NX (set, the command), and reports
// whether the acquire goes on. When the backend refuses — the key holds
// data, or another lock's mirror — the client is answered as Redis
// answers a SET NX over an existing key: nil, the value for SET … NX
// GET, or refused (refused, when not empty: SETNX's 0).
func (s *Server) mirrorTaken(st *client, c redcon.Conn, set [][]byte, get bool, refused string) bool {
	v, err := s.backendValue(st, set)
	switch {
	case err != nil:
		backendAnswer(c, nil, err)
		return false
	case get && v != nil: // SET … NX GET: the old value; nothing was set
		s.m.Acquire(engine.ErrHeld, 0)
		backendAnswer(c, v, nil)
		return false
	case !get && v == nil:
		s.m.Acquire(engine.ErrHeld, 0) // held, as the quorum would have found
		if refused != "" {
			c.WriteInt(0)
		} else {
			c.WriteNull()
		}
		return false
	}
	return true
}

// mixedLockOp reports whether a command the quorum serves is a lock
// operation where the backend holds data beside the locks: an acquire (SET
// … NX, SETNX), a lock script the proxy recognises, the proxy's own
// LOCK.*. The others (GET, SET, DEL, EXPIRE…, other scripts) are data
// commands there, which a transaction may queue.
func (s *Server) mixedLockOp(name string, args [][]byte) bool {
	switch name {
	case "set":
		return hasNX(args)
	case "setnx", "lock.acquire", "lock.release", "lock.extend", "lock.info":
		return true
	case "eval", "evalsha":
		sp := s.scriptSpec(name, args)
		return sp != nil && sp.Op != lockscripts.OpNotALock
	}
	return false
}

// mirrorTakeScript sets a lock's mirror to the token with a TTL of ARGV[2]
// ms, over the mirror of the holder's earlier token (a library's
// reacquire), unless data holds the key: ARGV[3] is that earlier value.
const mirrorTakeScript = `local v = redis.call('get', KEYS[1])
if not v or v == ARGV[3] or v == ARGV[1] then return redis.call('set', KEYS[1], ARGV[1], 'px', ARGV[2]) end
return 0`

// mirrorTake writes the mirror of a lock the holder took again.
func (s *Server) mirrorTake(st *client, key, token string, ttlMS int64) {
	held, _ := s.backendCall(st, "get", key)
	prev, _ := held.(string)
	if _, err := s.backendCall(st, "eval", mirrorTakeScript, "1", key, token, strconv.FormatInt(ttlMS, 10), prev); err != nil {
		s.log.Debug().Err(err).Str("key", key).Msg("a lock's mirror on the backend was not written")
	}
}

// queuedEnd is a command queued in MULTI that may end the locks of its
// keys: its place in the transaction, its name and the keys.
type queuedEnd struct {
	at   int
	name string
	keys []string
}

// noteQueued counts a command queued in MULTI, and remembers, where the
// backend holds data beside the locks, those that end locks on one Redis:
// DEL, UNLINK and GETDEL of their keys, RENAME and RENAMENX of both. The
// transaction runs on the backend, on the locks' mirrors; once it commits,
// Server.endLocks ends the locks on the quorum too, by each command's
// reply.
func (s *Server) noteQueued(st *client, name string, args [][]byte) {
	at := st.multiN
	st.multiN++
	if !s.mixed() || len(args) < 2 {
		return
	}
	switch name {
	case "del", "unlink":
	case "getdel":
		args = args[:2]
	case "rename", "renamenx":
		if len(args) != 3 {
			return
		}
	default:
		return
	}
	q := queuedEnd{at: at, name: name}
	for _, k := range args[1:] {
		if s.isLockKey(k) {
			q.keys = append(q.keys, string(k))
		}
	}
	if len(q.keys) > 0 {
		st.multiEnds = append(st.multiEnds, q)
	}
}

// endLocks ends on the quorum the locks that a committed transaction's
// commands ended on the backend (noteQueued): a DEL's, UNLINK's or
// GETDEL's keys, a RENAME's or RENAMENX's that renamed. reply is EXEC's.
func (s *Server) endLocks(st *client, ends []queuedEnd, reply []byte) {
	if !s.mayLock(st) {
		return // a user who may not take locks ends none
	}
	v, err := wire.ParseValue(reply)
	results, ok := v.([]any)
	if err != nil || !ok {
		return // aborted (WATCH) or failed: nothing ran
	}
	for _, q := range ends {
		if q.at >= len(results) {
			continue
		}
		switch r := results[q.at]; q.name {
		case "rename", "renamenx":
			if r != "OK" && r != int64(1) {
				continue
			}
		}
		s.deleteLocks(st, q.keys)
	}
}

// deleteLocks deletes keys on the quorum after a transaction that deleted
// them on the backend committed. Failures leave a lock to its TTL: it keeps
// its key from being acquired for that long, as the lock would have.
func (s *Server) deleteLocks(st *client, keys []string) {
	for _, k := range keys {
		if _, err := s.op(st).Count(nil, []byte("del"), []byte(k)); err != nil {
			s.log.Debug().Err(err).Str("key", k).Msg("a lock deleted in a transaction was not deleted on the quorum")
		}
		st.releasedLease(k, "")
	}
}

// mixedData reports whether a command of the proxy's table is a data
// command on a lock key where the backend holds data beside the locks:
// writes that take no lock (SET without NX, SETEX, PSETEX, GETEX) run on
// the backend as they are. (Reads ask the backend first: Server.backendFirst.)
func mixedData(e *command, args [][]byte) bool {
	if e == nil || len(args) < 2 {
		return false
	}
	switch e.name {
	case "setex", "psetex", "getex":
		return true
	case "set":
		return !hasNX(args)
	}
	return false
}

// mirrorState reports what the backend holds at a lock's key: 1 the
// token (the lock's mirror), 0 nothing (renamed, expired there, or lost
// when the backend restarted empty; or the backend failed), -1 something
// else (data took the lock's place: a plain SET, APPEND, a RENAME onto it…).
func (s *Server) mirrorState(st *client, key, token string) int {
	v, err := s.backendCall(st, "get", key)
	var er wire.ErrorReply
	switch {
	case errors.As(err, &er): // another type
		return -1
	case err != nil || v == nil:
		return 0
	case v == token:
		return 1
	}
	return -1
}

// backendFirst runs a read (args, the client's command) on the backend and
// answers from there when present reports that the backend holds the key,
// or when it fails; otherwise the quorum answers (a lock without a mirror:
// a semaphore, LOCK.*, Redisson's, one whose mirror was lost), and it
// reports false.
func (s *Server) backendFirst(st *client, c redcon.Conn, args [][]byte, present func(any) bool) bool {
	v, err := s.backendShared(st, args)
	if err != nil || present(v) {
		backendAnswer(c, v, err)
		return true
	}
	return false
}

// sharedReqs holds the requests of backendShared for reuse.
var sharedReqs = sync.Pool{New: func() any { return new(backend.MuxReq) }}

// backendShared is backendValue on the shared backend connection (backend.Mux),
// in RESP2 as backendValue's: the reads of data beside locks, which every
// GET of a lock key makes, then go out with every other client's commands,
// one write for many, pipelined GETs included (each runs on its own,
// pipeline.go), instead of a round trip each on a pooled connection of
// their own (and, with more in flight than the pool keeps, a connection
// dialled and closed for each).
func (s *Server) backendShared(st *client, args [][]byte) (any, error) {
	if s.cl != nil {
		return s.clusterValue(args, true)
	}
	r := sharedReqs.Get().(*backend.MuxReq)
	defer sharedReqs.Put(r)
	out, got, err := s.dbOf(st).mux.Do(r, []redcon.Command{{Args: args}})
	switch {
	case got < 1 && err == nil:
		return nil, backend.ErrMuxClosed
	case got < 1:
		return nil, err
	}
	v, err := wire.ParseValue(out)
	if err != nil {
		return nil, err
	}
	if er, ok := v.(wire.ErrorReply); ok {
		return nil, er
	}
	return v, nil
}

// batchedRead reports whether a command is a GET of a lock key that may
// pass through with the plain commands around it where the backend holds
// data beside the locks: one batch, one write, on the shared connection;
// the batch's replies are then looked at (writeBatched), and a GET the
// backend answered with nil is answered by the quorum, as cmdGet does.
// Not for a client whose commands run on a backend connection of its own
// (WATCH, subscribed, tracking), and, where c is a session (nil: one that
// is known not to be), not while lock operations of its connection are in
// flight: a GET then runs beside them (pipeline.go), as any read of a lock
// key does.
func (s *Server) batchedRead(c redcon.Conn, st *client, e *command, args [][]byte) bool {
	if !s.mixed() || e == nil || e.name != "get" || len(args) != 2 || st.pinned != nil || st.sub != nil || st.multi ||
		!s.isLockKey(args[1]) {
		return false
	}
	if ss, ok := c.(*session); ok && ss.busy() {
		return false
	}
	return s.refusal(st, e, args) == ""
}

// writeBatched writes the replies (out) of a batch sent on the shared
// connection (r, its request: where each reply ends): as they are, but
// for a GET of a lock key the backend answered with nil, which the quorum
// answers (a lock without a mirror: cmdGet). The batch's other commands
// are data commands, which never change a master, so the quorum's answer
// is the one it had before them.
func (s *Server) writeBatched(c redcon.Conn, r *backend.MuxReq, batch []redcon.Command, out []byte) {
	st, _ := c.Context().(*client)
	from, start := 0, 0
	for i, cmd := range batch {
		end := r.Ends[i]
		if isNilReply(out[start:end]) && len(cmd.Args) == 2 && s.isLockKey(cmd.Args[1]) {
			if e := lookup(cmd.Args[0]); e != nil && e.name == "get" {
				c.WriteRaw(out[from:start])
				s.quorumGet(st, c, cmd.Args)
				from = end
			}
		}
		start = end
	}
	if from < len(out) {
		c.WriteRaw(out[from:])
	}
}

// isNilReply reports whether a reply is nil, in RESP2 or RESP3.
func isNilReply(b []byte) bool {
	return string(b) == "$-1\r\n" || string(b) == "_\r\n"
}

// cmdRename runs RENAME and RENAMENX on the backend. Where the backend
// holds data beside the locks, a lock renamed away, or overwritten at the
// destination, ends as on one Redis: once the backend renamed the key,
// the quorum's locks of both keys are deleted (a lock does not move; a
// failure leaves it to its TTL).
func cmdRename(s *Server, c redcon.Conn, st *client, args [][]byte) route {
	if !s.mixed() || len(args) != 3 || !s.isLockKey(args[1]) && !s.isLockKey(args[2]) {
		return toBackend
	}
	ec := &wire.Tee{Conn: c}
	s.forward(ec, st, args, false)
	renamed := bytes.HasPrefix(ec.Last, []byte("+OK")) || bytes.HasPrefix(ec.Last, []byte(":1"))
	if renamed && s.mayLock(st) {
		s.deleteLocks(st, []string{string(args[1]), string(args[2])})
	}
	return replied
}
