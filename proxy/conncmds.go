package proxy

import (
	"math"
	"strconv"
	"strings"

	"github.com/redlock-proxy/redlock-proxy/proxy/quorum"
	"github.com/redlock-proxy/redlock-proxy/proxy/wire"
	"github.com/tidwall/redcon"
)

func cmdPing(s *Server, c redcon.Conn, st *client, args [][]byte) route {
	switch len(args) {
	case 1:
		c.WriteString("PONG")
	case 2:
		c.WriteBulk(args[1])
	default:
		wrongArgs(c, "ping")
	}
	return replied
}

func cmdEcho(s *Server, c redcon.Conn, st *client, args [][]byte) route {
	c.WriteBulk(args[1])
	return replied
}

func cmdQuit(s *Server, c redcon.Conn, st *client, args [][]byte) route {
	c.WriteString("OK")
	if ss, ok := c.(*session); ok {
		ss.quit = true
	}
	c.Close()
	return replied
}

// cmdSelect selects a database (databases.go): the backend's for data,
// the masters' for locks. A client with a backend connection of its own
// (after WATCH, a blocking command, or subscribed in RESP3) has it SELECT
// too.
func cmdSelect(s *Server, c redcon.Conn, st *client, args [][]byte) route {
	n, err := parseInt(args[1])
	if err != nil {
		c.WriteError("ERR value is not an integer or out of range")
		return replied
	}
	if n < 0 || n > math.MaxInt32 {
		c.WriteError("ERR DB index is out of range")
		return replied
	}
	d, refused, err := s.database(int(n))
	switch {
	case err != nil:
		s.log.Warn().Err(err).Msg("passthrough backend unreachable")
		c.WriteError("ERR redlock-proxy: passthrough backend unreachable")
		return replied
	case refused != "":
		c.WriteError(refused)
		return replied
	}
	if st.sub != nil && st.sub.resp3 {
		// Its own connection answers, in order with its other replies.
		if ss, ok := c.(*session); ok {
			ss.waitIdle()
			if s.sendSub(ss, st, args) {
				st.db = d
			}
			return replied
		}
	}
	if st.pinned != nil {
		reply, err := st.pinned.Do(args, s.passthroughTimeout())
		if err != nil {
			st.pinned.Close()
			st.lostPinned()
			c.WriteError(errPinnedLost)
			return replied
		}
		if len(reply) > 0 && reply[0] == '-' {
			c.WriteRaw(reply)
			return replied
		}
	}
	st.db = d
	c.WriteString("OK")
	return replied
}

func cmdAuth(s *Server, c redcon.Conn, st *client, args [][]byte) route {
	switch {
	case len(args) < 2 || len(args) > 3:
		c.WriteError("ERR syntax error")
	case !s.authRequired() && len(args) == 2:
		c.WriteError("ERR AUTH <password> called without any password configured for the default user. Are you sure your configuration is correct?")
	case !s.authRequired():
		c.WriteString("OK") // the default user has no password: any password is accepted, as on Redis
	default:
		user, ok := s.checkAuth(args[1:])
		if !ok {
			c.WriteError(wrongPass)
			return replied
		}
		st.authed, st.user = true, user
		c.WriteString("OK")
	}
	return replied
}

// cmdReset gives the connection a fresh state, as Redis's RESET does, and
// releases what it held: its pinned backend connection, and its leases (as
// closing it would).
func cmdReset(s *Server, c redcon.Conn, st *client, args [][]byte) route {
	if st.pinned != nil {
		st.pinned.Close()
	}
	if ls := st.leases.Load(); ls != nil {
		ls.closeAll(true) // the leases release their locks on their own goroutines
	}
	*st = client{id: st.id}
	setResp3(c, false) // RESET goes back to RESP2, as on Redis
	c.WriteString("RESET")
	return replied
}

// cmdHello switches the connection to RESP2 or RESP3 and answers what
// Redis answers, in the protocol chosen.
func cmdHello(s *Server, c redcon.Conn, st *client, args [][]byte) route {
	proto := max(st.proto, 2)
	if len(args) > 1 {
		v, err := parseInt(args[1])
		if err != nil {
			c.WriteError("ERR Protocol version is not an integer or out of range")
			return replied
		}
		if v != 2 && v != 3 {
			c.WriteError("NOPROTO unsupported protocol version")
			return replied
		}
		proto = int(v)
		for i := 2; i < len(args); i++ {
			switch strings.ToLower(string(args[i])) {
			case "auth":
				if i+2 >= len(args) {
					c.WriteError("ERR Syntax error in HELLO option 'auth'")
					return replied
				}
				if s.authRequired() {
					user, ok := s.checkAuth(args[i+1 : i+3])
					if !ok {
						c.WriteError(wrongPass)
						return replied
					}
					st.user = user
				}
				st.authed = true
				i += 2
			case "setname":
				if i+1 >= len(args) {
					c.WriteError("ERR Syntax error in HELLO option 'setname'")
					return replied
				}
				i++
				if !validName(args[i]) {
					c.WriteError("ERR Client names cannot contain spaces, newlines or special characters.")
					return replied
				}
				st.name = string(args[i])
			default:
				c.WriteError("ERR Syntax error in HELLO option '" + quorum.Echo(args[i]) + "'")
				return replied
			}
		}
	}
	if proto != max(st.proto, 2) {
		if st.sub != nil {
			c.WriteError("ERR redlock-proxy: HELLO cannot change the protocol of a subscribed connection through the proxy")
			return replied
		}
		if st.pinned != nil {
			// The client's own backend connection (WATCH, MULTI, blocking
			// commands) answers in the new protocol too.
			if _, err := st.pinned.Do([][]byte{[]byte("HELLO"), []byte(strconv.Itoa(proto))}, s.passthroughTimeout()); err != nil {
				st.pinned.Close()
				st.lostPinned()
			}
		}
		st.proto = proto
		setResp3(c, proto == 3)
	}
	wire.WriteMap(c, 7)
	c.WriteBulkString("server")
	c.WriteBulkString("redis")
	c.WriteBulkString("version")
	c.WriteBulkString(redisVersion)
	c.WriteBulkString("proto")
	c.WriteInt(proto)
	c.WriteBulkString("id")
	c.WriteInt64(st.id)
	c.WriteBulkString("mode")
	c.WriteBulkString("standalone")
	c.WriteBulkString("role")
	c.WriteBulkString("master")
	c.WriteBulkString("modules")
	c.WriteArray(0)
	return replied
}

// setResp3 sets the protocol of the replies the proxy writes to c.
func setResp3(c redcon.Conn, on bool) {
	if ss, ok := c.(*session); ok {
		ss.wr.RESP3 = on
	}
}

// redisVersion is the Redis version the proxy reports: the command set it
// serves is that of Redis 7.0, and clients gate features on this number.
const redisVersion = "7.0.0"

func validName(b []byte) bool {
	for _, ch := range b {
		if ch < '!' || ch > '~' {
			return false
		}
	}
	return true
}

func cmdClient(s *Server, c redcon.Conn, st *client, args [][]byte) route {
	sub := strings.ToLower(string(args[1]))
	switch {
	case sub == "setname" && len(args) == 3:
		if !validName(args[2]) {
			c.WriteError("ERR Client names cannot contain spaces, newlines or special characters.")
			return replied
		}
		st.name = string(args[2])
		c.WriteString("OK")
	case sub == "getname" && len(args) == 2:
		if st.name == "" {
			c.WriteNull()
		} else {
			c.WriteBulkString(st.name)
		}
	case sub == "id" && len(args) == 2:
		c.WriteInt64(st.id)
	case sub == "setinfo" && len(args) == 4:
		switch strings.ToLower(string(args[2])) {
		case "lib-name":
			st.libName = string(args[3])
		case "lib-ver":
			st.libVer = string(args[3])
		default:
			c.WriteError("ERR Unrecognized option '" + quorum.Echo(args[2]) + "'")
			return replied
		}
		c.WriteString("OK")
	case sub == "info" || sub == "list":
		s.clientList(c, st, args)
	case sub == "kill":
		s.clientKill(c, st, args)
	case sub == "tracking":
		s.clientTracking(c, st, args)
	case sub == "caching" || sub == "trackinginfo" || sub == "getredir":
		// Of a client with no connection of its own: a pooled backend
		// connection answers them as Redis does for a client that does
		// not track (pooled connections never do).
		return toBackend
	case (sub == "no-evict" || sub == "no-touch") && len(args) == 3:
		c.WriteString("OK")
	case sub == "setname" || sub == "getname" || sub == "id" || sub == "setinfo":
		c.WriteError("ERR wrong number of arguments for 'client|" + quorum.Echo([]byte(sub)) + "' command")
	default:
		c.WriteError("ERR redlock-proxy: CLIENT " + strings.ToUpper(quorum.Echo([]byte(sub))) + " is not supported through the proxy")
	}
	return replied
}

// parseInt parses a Redis integer argument strictly (quorum.ParseInt).
func parseInt(b []byte) (int64, error) { return quorum.ParseInt(b) }
