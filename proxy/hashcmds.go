package proxy

import (
	"errors"
	"slices"
	"strings"

	"github.com/redis/go-redis/v9"
	"github.com/tidwall/redcon"

	"github.com/redlock-proxy/redlock-proxy/redlock"
)

// Hash commands of lock keys. A lock may be a hash (Redisson's RLock,
// redisson.go): its reads answer as one Redis holding the quorum's state
// would (redlock.Client.ReadHash); writes would change one master's copy
// alone and are refused. Of a key that is not a lock key, they pass
// through as they are.

// hashReads and hashWrites are the hash commands of the command table.
var (
	hashReads  = []string{"hget", "hexists", "hgetall", "hlen", "hmget", "hkeys", "hvals", "hstrlen"}
	hashWrites = []string{"hset", "hsetnx", "hmset", "hincrby", "hincrbyfloat", "hdel", "hgetdel", "hgetex", "hsetex",
		"hexpire", "hpexpire", "hexpireat", "hpexpireat", "hpersist", "httl", "hpttl", "hexpiretime", "hpexpiretime",
		"hrandfield", "hscan"}
)

func isHashCommand(name string) bool {
	return slices.Contains(hashReads, name) || slices.Contains(hashWrites, name)
}

// cmdHashWrite refuses a hash command on a lock key that the proxy does
// not run on the quorum.
func cmdHashWrite(s *Server, c redcon.Conn, st *client, args [][]byte) {
	if len(args) < 2 || !s.isLockKey(args[1]) {
		s.forward(c, st, args, false)
		return
	}
	c.WriteError("ERR redlock-proxy: " + strings.ToUpper(string(args[0])) + " of a lock key is not served: on one master it would change that master's copy of the lock alone (the lock scripts change it on the quorum)")
}

// cmdHashRead answers a hash read of a lock key from the quorum.
func cmdHashRead(s *Server, c redcon.Conn, st *client, args [][]byte) {
	name := strings.ToLower(string(args[0]))
	need := map[string]int{"hget": 3, "hexists": 3, "hmget": 3, "hstrlen": 3}[name]
	if need == 0 {
		need = 2
	}
	if len(args) < need || (name != "hmget" && len(args) > need) {
		wrongArgs(c, name)
		return
	}
	if !s.isLockKey(args[1]) {
		s.forward(c, st, args, false)
		return
	}
	ctx, cancel := s.opContext()
	defer cancel()
	h, err := s.rl.ReadHash(ctx, string(args[1]))
	switch {
	case err != nil:
		writeErr(c, err)
		return
	case h.Type != "hash" && h.Type != "none":
		c.WriteError(wrongType)
		return
	}
	field := func(i int) (string, bool) {
		v, ok := h.Fields[string(args[i])]
		return v, ok
	}
	names := make([]string, 0, len(h.Fields))
	for f := range h.Fields {
		names = append(names, f)
	}
	slices.Sort(names)
	switch name {
	case "hget":
		if v, ok := field(2); ok {
			c.WriteBulkString(v)
		} else {
			c.WriteNull()
		}
	case "hexists":
		if _, ok := field(2); ok {
			c.WriteInt(1)
		} else {
			c.WriteInt(0)
		}
	case "hstrlen":
		v, _ := field(2)
		c.WriteInt(len(v))
	case "hlen":
		c.WriteInt(len(names))
	case "hmget":
		c.WriteArray(len(args) - 2)
		for i := 2; i < len(args); i++ {
			if v, ok := field(i); ok {
				c.WriteBulkString(v)
			} else {
				c.WriteNull()
			}
		}
	case "hkeys", "hvals":
		c.WriteArray(len(names))
		for _, f := range names {
			if name == "hkeys" {
				c.WriteBulkString(f)
			} else {
				c.WriteBulkString(h.Fields[f])
			}
		}
	case "hgetall":
		writeMap(c, len(names))
		for _, f := range names {
			c.WriteBulkString(f)
			c.WriteBulkString(h.Fields[f])
		}
	}
}

const wrongType = "WRONGTYPE Operation against a key holding the wrong kind of value"

// isWrongType reports whether a quorum read failed because the masters
// hold a key of another type than the read's.
func isWrongType(err error) bool {
	var re redis.Error
	return errors.As(err, &re) && strings.HasPrefix(re.Error(), "WRONGTYPE")
}

// readAnyType is Server.read for EXISTS and PTTL, which answer for a key
// of any type: a lock that is a hash is read as one.
func (s *Server) readAnyType(key []byte) (redlock.KeyState, string, error) {
	k, err := s.read(key)
	if err == nil || !isWrongType(err) {
		return k, "string", err
	}
	ctx, cancel := s.opContext()
	defer cancel()
	h, err := s.rl.ReadHash(ctx, string(key))
	return redlock.KeyState{Exists: h.Type != "none", PTTL: h.PTTL}, h.Type, err
}
