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
// ACL and MODULE in adminSubcommands.
func cmdAdmin(s *Server, c redcon.Conn, st *client, args [][]byte) {
	name := strings.ToLower(string(args[0]))
	if subs, ok := adminSubcommands[name]; ok && (len(args) < 2 || !slices.Contains(subs, strings.ToLower(string(args[1])))) {
		s.forward(c, st, args, false)
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
