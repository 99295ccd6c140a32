package proxy

import (
	"slices"
	"strings"

	"github.com/redlock-proxy/redlock-proxy/proxy/quorum"
	"github.com/tidwall/redcon"
)

// Admin commands that erase or reconfigure the server they run on. Passed
// through to a backend that is one of the masters (the default backend is
// the first), they would act on a voter behind the quorum's back: after
// FLUSHALL it keeps voting with every lock it held forgotten, and a second
// client is granted a lock still held. They are refused then; with a
// backend of its own (proxy.backend, not a master) they pass through.

// guardAdmin: admin commands that would erase or reconfigure a voting
// master are refused; off, they pass through to it.
const guardAdmin = "admin-commands"

// cmdAdmin serves FLUSHALL, FLUSHDB, DEBUG, and the subcommands of CONFIG,
// ACL and MODULE that erase or reconfigure (their rows' adminSubs); ACL
// WHOAMI, LIST and USERS answer for the proxy's users (cmdACL).
func cmdAdmin(s *Server, c redcon.Conn, st *client, args [][]byte) route {
	name := strings.ToLower(string(args[0]))
	if name == "acl" && len(args) > 1 && aclAnswered(args[1]) {
		return cmdACL(s, c, st, args)
	}
	subs := commands[name].adminSubs
	if subs != nil && (len(args) < 2 || !slices.Contains(subs, strings.ToLower(string(args[1])))) {
		return toBackend
	}
	if !s.backendVotes() && s.mixed() && s.mayLock(st) && (name == "flushdb" || name == "flushall") && !st.multi {
		s.flushWithLocks(c, st, args, name == "flushall") // flush.go
		return replied
	}
	if !s.backendVotes() || s.off(guardAdmin) {
		return toBackend
	}
	what := strings.ToUpper(quorum.Echo(args[0]))
	if len(args) > 1 && subs != nil {
		what += " " + strings.ToUpper(quorum.Echo(args[1]))
	}
	c.WriteError("ERR redlock-proxy: '" + what + "' would erase or reconfigure a voting master (the passthrough backend is one of redlock.masters); run it on the master itself if you mean it, or give the proxy a backend of its own (proxy.backend)")
	return replied
}

// aclAnswered reports whether the proxy answers an ACL subcommand itself:
// WHOAMI, LIST and USERS, which name the proxy's users (proxy.password and
// proxy.users), not the backend's. The others pass through as above.
func aclAnswered(sub []byte) bool {
	switch strings.ToLower(string(sub)) {
	case "whoami", "list", "users":
		return true
	}
	return false
}

// cmdACL answers ACL WHOAMI (the connection's user), ACL USERS (every
// user's name, sorted) and ACL LIST (a line per user, in Redis's format)
// for the proxy's users, as Redis answers them for its own.
func cmdACL(s *Server, c redcon.Conn, st *client, args [][]byte) route {
	sub := strings.ToLower(string(args[1]))
	if len(args) != 2 {
		c.WriteError("ERR wrong number of arguments for 'acl|" + sub + "' command")
		return replied
	}
	a := s.auth.Load()
	switch sub {
	case "whoami":
		if st.user == "" {
			c.WriteBulkString(defaultUser)
		} else {
			c.WriteBulkString(st.user)
		}
	case "users":
		c.WriteArray(len(a.names))
		for _, n := range a.names {
			c.WriteBulkString(n)
		}
	default: // list
		lines := a.aclList()
		c.WriteArray(len(lines))
		for _, l := range lines {
			c.WriteBulkString(l)
		}
	}
	return replied
}
