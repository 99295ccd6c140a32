package proxy

import (
	"bytes"
	"strings"
	"time"

	"github.com/tidwall/redcon"

	"github.com/redlock-proxy/redlock-proxy/proxy/lockscripts"
	"github.com/redlock-proxy/redlock-proxy/proxy/quorum"
)

// Counting semaphores: redis-semaphore's Semaphore keeps its permits in a
// sorted set, "semaphore:<name>", of its holders' identifiers. Its acquire
// and refresh scripts run as quorum operations on it
// (engine.Client.AcquirePermit, ExtendPermit), decided by the semaphore's
// own quorum (engine.PermitQuorum: more than N·limit/(limit+1) masters, not
// a majority); its release, ZREM of the identifier, removes it from every
// master. Every other sorted-set command on such a key is refused: on the
// backend it would read or change one master's copy of the permits. The
// permit operations (lockscripts.OpPermitAcquire…) are recognised, and
// declared in [[scripts]], in package lockscripts.

// semaphorePrefix begins the key of every redis-semaphore Semaphore (and
// MultiSemaphore); the library adds it to the name it is given.
var semaphorePrefix = []byte("semaphore:")

// isPermitKey reports whether key is a semaphore's permits: a lock key of
// redis-semaphore's form.
func (s *Server) isPermitKey(key []byte) bool {
	return bytes.HasPrefix(key, semaphorePrefix) && s.isLockKey(key)
}

// runPermitScript runs a permit script on the quorum
// (quorum.Op.PermitScript), once an acquire's or a refresh's number of
// permits and TTL (within redlock.max_lock_ttl) are read.
func (s *Server) runPermitScript(st *client, c redcon.Conn, spec *lockscripts.Spec, key, token string, argv [][]byte) {
	var limit int64
	var ttl time.Duration
	if spec.Op != lockscripts.OpPermitRelease {
		var ok bool
		if limit, ok = quorum.PermitLimit(c, spec, argv); !ok {
			return
		}
		if ttl, ok = s.ttlArg(c, spec, argv); !ok {
			return
		}
	}
	s.op(st).PermitScript(c, spec, key, token, limit, ttl)
}

// sortedSetCommands are the sorted-set commands with a key: of a
// semaphore's permits, ZREM gives permits back on the quorum and the
// others are refused; of any other key they pass through.
var sortedSetCommands = []string{"zadd", "zcard", "zcount", "zdiff", "zdiffstore", "zincrby",
	"zinter", "zintercard", "zinterstore", "zlexcount", "zmpop", "zmscore", "zpopmax", "zpopmin",
	"zrandmember", "zrange", "zrangebylex", "zrangebyscore", "zrangestore", "zrank", "zrem",
	"zremrangebylex", "zremrangebyrank", "zremrangebyscore", "zrevrange", "zrevrangebylex",
	"zrevrangebyscore", "zrevrank", "zscan", "zscore", "zunion", "zunionstore",
	"bzpopmax", "bzpopmin", "bzmpop"}

// blocking reports whether a sorted-set command may block (BZPOPMIN…):
// it runs on the client's own backend connection.
func blocking(name string) bool { return strings.HasPrefix(name, "bz") }

// permitKeyOf returns the first key of a sorted-set command that is a
// semaphore's permits, or nil.
func (s *Server) permitKeyOf(name string, args [][]byte) []byte {
	for _, k := range sortedSetKeys(name, args) {
		if s.isPermitKey(k) {
			return k
		}
	}
	return nil
}

// sortedSetKeys is the keys of a sorted-set command.
func sortedSetKeys(name string, args [][]byte) [][]byte {
	counted := func(i int) [][]byte { // numkeys at args[i], the keys after it
		if i >= len(args) {
			return nil
		}
		n, err := parseInt(args[i])
		if err != nil || n < 1 || n > int64(len(args)-i-1) {
			return nil
		}
		return args[i+1 : i+1+int(n)]
	}
	switch {
	case len(args) < 2:
		return nil
	case name == "zdiff" || name == "zinter" || name == "zintercard" || name == "zunion" || name == "zmpop":
		return counted(1)
	case name == "bzmpop":
		return counted(2)
	case name == "zdiffstore" || name == "zinterstore" || name == "zunionstore":
		return append([][]byte{args[1]}, counted(2)...)
	case name == "zrangestore" && len(args) > 2:
		return args[1:3]
	case name == "bzpopmin" || name == "bzpopmax":
		return args[1 : len(args)-1] // the last is the timeout
	}
	return args[1:2]
}

// cmdSortedSet serves the sorted-set commands (sortedSetCommands). ZREM of
// a semaphore's permits removes each member from every master, and
// answers how many of them a quorum held (the semaphore's limit, and so
// its own quorum, is not known here: the set is read as any key is);
// NOQUORUM when that is not known. Any other sorted-set command on a
// semaphore's permits is refused. Other keys: passed through (blocking
// ones on the client's own connection).
func cmdSortedSet(s *Server, c redcon.Conn, st *client, args [][]byte) route {
	name := strings.ToLower(string(args[0]))
	key := s.permitKeyOf(name, args)
	switch {
	case key == nil && blocking(name):
		return toOwnConn
	case key == nil:
		return toBackend
	case name != "zrem":
		c.WriteError("ERR redlock-proxy: '" + strings.ToUpper(name) + "' of a semaphore's permits (" + quorum.Echo(key) + ") would act on one master's copy; a semaphore lives on a quorum of masters: its scripts take and renew permits, ZREM gives them back, EXISTS, PTTL and DEL answer for the whole")
	case len(args) < 3:
		wrongArgs(c, name)
	case s.oversized(c, args[1:]):
	default:
		n, err := s.op(st).ReleasePermits(string(args[1]), strs(args[2:])...)
		quorum.WriteReleaseCount(c, n, err)
	}
	return replied
}
