package proxy

import (
	"errors"
	"regexp"
	"strings"

	"github.com/redis/go-redis/v9"
	"github.com/tidwall/redcon"

	"github.com/redlock-proxy/redlock-proxy/proxy/quorum"
	"github.com/redlock-proxy/redlock-proxy/redlock/engine"
)

// Redisson reads its lock with HGET and HEXISTS of the holder's field,
// "<client UUID>:<thread id>" (getHoldCount, isHeldByThread). Of a lock
// key, with such a field, they answer as one Redis holding the quorum's
// state would (engine.Client.ReadHash). Other hash commands, and these
// with other fields, pass through as they are: an application's hashes
// are not locks, even where proxy.lock_keys matches them.

// redissonHolder matches the hash field of a Redisson lock's holder.
var redissonHolder = regexp.MustCompile(`^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}:[0-9]+$`)

// cmdHashRead serves HGET and HEXISTS.
func cmdHashRead(s *Server, c redcon.Conn, st *client, args [][]byte) route {
	if len(args) != 3 || !s.isLockKey(args[1]) || !redissonHolder.Match(args[2]) {
		return toBackend
	}
	if s.oversized(c, args[1:]) {
		return replied
	}
	ctx, cancel := s.opContext()
	defer cancel()
	h, err := s.eng(st).ReadHash(ctx, string(args[1]))
	switch {
	case err != nil:
		quorum.WriteErr(c, err)
		return replied
	case h.Type != "hash" && h.Type != "none":
		c.WriteError(quorum.WrongType)
		return replied
	}
	v, ok := h.Fields[string(args[2])]
	switch {
	case strings.EqualFold(string(args[0]), "hexists") && ok:
		c.WriteInt(1)
	case strings.EqualFold(string(args[0]), "hexists"):
		c.WriteInt(0)
	case ok:
		c.WriteBulkString(v)
	default:
		c.WriteNull()
	}
	return replied
}

// isWrongType reports whether a quorum read failed because the masters
// hold a key of another type than the read's.
func isWrongType(err error) bool {
	var re redis.Error
	return errors.As(err, &re) && strings.HasPrefix(re.Error(), "WRONGTYPE")
}

// readAnyType is Server.read for EXISTS and PTTL, which answer for a key
// of any type: a lock that is a hash is read as one.
func (s *Server) readAnyType(st *client, key []byte) (engine.KeyState, string, error) {
	k, err := s.read(st, key)
	if err == nil || !isWrongType(err) {
		return k, "string", err
	}
	ctx, cancel := s.opContext()
	defer cancel()
	h, err := s.eng(st).ReadHash(ctx, string(key))
	return engine.KeyState{Exists: h.Type != "none", PTTL: h.PTTL}, h.Type, err
}
