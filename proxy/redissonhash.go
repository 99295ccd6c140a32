package proxy

import (
	"regexp"
	"strings"

	"github.com/tidwall/redcon"

	"github.com/redlock-proxy/redlock-proxy/proxy/quorum"
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
	h, err := s.op(st).ReadHash(args[1])
	quorum.WriteHashField(c, h, err, args[2], strings.EqualFold(string(args[0]), "hexists"))
	return replied
}
