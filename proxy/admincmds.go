package proxy

import (
	"slices"
	"strings"

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

// adminSubcommands lists, for the admin commands that have subcommands, those
// that erase or reconfigure; the others (CONFIG GET, ACL WHOAMI, …) pass.
var adminSubcommands = map[string][]string{
	"config": {"set", "rewrite"},
	"acl":    {"setuser", "deluser", "load", "save"},
	"module": {"load", "loadex", "unload"},
}

// cmdAdmin serves FLUSHALL, FLUSHDB, DEBUG, and the subcommands of CONFIG,
// ACL and MODULE in adminSubcommands; ACL WHOAMI, LIST and USERS answer
// for the proxy's users (cmdACL).
func cmdAdmin(s *Server, c redcon.Conn, st *client, args [][]byte) {
	name := strings.ToLower(string(args[0]))
	if name == "acl" && len(args) > 1 && aclAnswered(args[1]) {
		cmdACL(s, c, st, args)
		return
	}
	if subs, ok := adminSubcommands[name]; ok && (len(args) < 2 || !slices.Contains(subs, strings.ToLower(string(args[1])))) {
		s.forward(c, st, args, false)
		return
	}
	if !s.backendVotes() && s.mixed() && s.mayLock(st) && (name == "flushdb" || name == "flushall") && !st.multi {
		s.flushWithLocks(c, st, args, name == "flushall") // flush.go
		return
	}
	if !s.backendVotes() || s.off(guardAdmin) {
		s.forward(c, st, args, false)
		return
	}
	what := strings.ToUpper(echo(args[0]))
	if len(args) > 1 && adminSubcommands[name] != nil {
		what += " " + strings.ToUpper(echo(args[1]))
	}
	c.WriteError("ERR redlock-proxy: '" + what + "' would erase or reconfigure a voting master (the passthrough backend is one of redlock.masters); run it on the master itself if you mean it, or give the proxy a backend of its own (proxy.backend)")
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
func cmdACL(s *Server, c redcon.Conn, st *client, args [][]byte) {
	sub := strings.ToLower(string(args[1]))
	if len(args) != 2 {
		c.WriteError("ERR wrong number of arguments for 'acl|" + sub + "' command")
		return
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
}
