package proxy

import (
	"strings"

	"github.com/redlock-proxy/redlock-proxy/proxy/quorum"
	"github.com/tidwall/redcon"
)

// The command table: one row per command the proxy handles, with what
// dispatch needs to know of it (its arity, where its keys are, where it is
// served, what kind of command it is) and its handler. handle() checks the
// arity and routes from the row (serve); the boundary (boundary.go), MULTI,
// the pipeline and the docs-drift test (docs_internal_test.go) read the
// same rows. Commands without a row pass through to the backend as they
// are, after the boundary's checks.

// handler serves one command of one client: it answers it (replied), or
// says where it goes instead.
type handler func(s *Server, c redcon.Conn, st *client, args [][]byte) route

// route is what a handler did with its command.
type route uint8

const (
	replied   route = iota // answered, by the handler
	toBackend              // to pass through to the backend as it is
	toOwnConn              // the same, on the client's own backend connection
)

// where is where a command is served.
type where uint8

const (
	onQuorum  where = iota + 1 // on a lock key, by the quorum; other keys go to the backend
	answered                   // answered by the proxy
	onOwnConn                  // on the client's own backend connection (pinned to it)
	onBackend                  // passed through, with the proxy's checks or additions
	refused                    // never passed through
	adminCmd                   // refused while the backend is a voting master (admincmds.go)
)

// cmdFlag is what kind of command a row is.
type cmdFlag uint32

const (
	// fKey1: served on the quorum only when args[1] is a lock key;
	// otherwise passed through as it is (serve checks it).
	fKey1       cmdFlag = 1 << iota
	fRead               // reads data
	fWrite              // writes data
	fConnState          // changes the client connection's state
	fScript             // runs a script or a function
	fPubSub             // pub/sub (pubsub.go)
	fDataBeside         // ends locks where the backend holds data beside them (mixed.go)
	// fPassGetSet: GET, SET, HGET and HEXISTS, which pass through as
	// they are for a key that is not a lock key (plainPassthrough).
	fPassGetSet
	// fBackendKeys: the command may pass through with its keys (HGET,
	// HEXISTS, WATCH, blocking and sorted-set commands), as commands the
	// proxy has no row for do: the boundary checks them (boundary.go).
	fBackendKeys
	// fSorted: a sorted-set command, which passes through as it is unless
	// a key is a semaphore's permits (semaphore.go).
	fSorted
	// fHash: HGET and HEXISTS, which read Redisson's hash locks of a
	// holder's field (redissonhash.go).
	fHash
	// fReleases: the handler is done with its arguments when it returns
	// (it copies what it keeps, as strings), so like plain passthrough it
	// lets the client's input buffer take its next read (keepInput). SET
	// and SETNX are most lock acquires.
	fReleases
)

// command is a row of the command table.
type command struct {
	name string // lower case
	// arity as Redis's COMMAND gives it, with the name: n exactly n, -n
	// at least n. 0: not checked here (the backend checks what passes
	// through, or the answer does not depend on it).
	arity int
	// Where the keys of an onQuorum row are: first, last (-1: the last
	// argument) and step; numkeys > 0: at args[numkeys] is the count of
	// the keys that follow it (scripts). Sorted-set rows name theirs in
	// sortedSetKeys; other rows are looked up in the backend's COMMAND
	// reply (keyspecs.go).
	first, last, step, numkeys int
	where                      where
	flags                      cmdFlag
	h                          handler // nil: routed from where alone
	// adminSubs: of an admin command with subcommands, those that erase
	// or reconfigure; the others (CONFIG GET, ACL WHOAMI, …) pass.
	adminSubs []string
}

func (e *command) has(f cmdFlag) bool { return e.flags&f != 0 }

// served: one whose keys are at the row's positions, which the quorum
// serves on a lock key.
func (e *command) served() bool { return e.where == onQuorum && (e.first > 0 || e.numkeys > 0) }

// keys: the command names keys (served, or passed through with them).
func (e *command) keys() bool { return e.served() || e.has(fBackendKeys) }

// arityOK reports whether n arguments (with the name) fit the row's arity.
func (e *command) arityOK(n int) bool {
	switch {
	case e.arity > 0:
		return n == e.arity
	case e.arity < 0:
		return n >= -e.arity
	}
	return true
}

// keysOf is the keys of args at the row's positions (nil when there are
// none, or the command is short of them).
func (e *command) keysOf(args [][]byte) [][]byte {
	if e.numkeys > 0 {
		if len(args) > e.numkeys {
			if n, err := parseInt(args[e.numkeys]); err == nil && n > 0 && int(n) <= len(args)-e.numkeys-1 {
				return args[e.numkeys+1 : e.numkeys+1+int(n)]
			}
		}
		return nil
	}
	if e.first <= 0 || len(args) <= e.first {
		return nil
	}
	last := e.last
	if last < 0 {
		last += len(args)
	}
	if last >= len(args) {
		last = len(args) - 1
	}
	if e.step == 1 {
		return args[e.first : last+1]
	}
	var keys [][]byte
	for i := e.first; i <= last; i += e.step {
		keys = append(keys, args[i])
	}
	return keys
}

// Rows of a kind, for the table below.
var (
	key1  = [3]int{1, 1, 1}  // one key, args[1]
	keysN = [3]int{1, -1, 1} // every argument after the name
)

func quorumRow(name string, arity int, keys [3]int, flags cmdFlag, h handler) command {
	return command{name: name, arity: arity, first: keys[0], last: keys[1], step: keys[2], where: onQuorum, flags: flags, h: h}
}

func scriptRow(name string, arity int, h handler) command {
	return command{name: name, arity: arity, numkeys: 2, where: onQuorum, flags: fScript | fRead | fWrite, h: h}
}

// table is the command table. Commands not in it pass through to the
// backend, after the boundary's checks.
var table = []command{
	// On a lock key, the quorum (quorumcmds.go, eval.go, nativecmds.go).
	quorumRow("set", -3, key1, fKey1|fWrite|fPassGetSet|fReleases, cmdSet),
	quorumRow("setnx", 3, key1, fKey1|fWrite|fReleases, cmdSetNX),
	quorumRow("get", 2, key1, fKey1|fRead|fPassGetSet, cmdGet),
	quorumRow("getdel", 2, key1, fKey1|fRead|fWrite, cmdGetDel),
	quorumRow("getex", -2, key1, fKey1|fRead|fWrite, cmdGetEx),
	quorumRow("setex", 4, key1, fKey1|fWrite, cmdSetEx),
	quorumRow("psetex", 4, key1, fKey1|fWrite, cmdSetEx),
	quorumRow("pttl", 2, key1, fKey1|fRead, cmdPTTL),
	quorumRow("ttl", 2, key1, fKey1|fRead, cmdPTTL),
	quorumRow("pexpire", -3, key1, fKey1|fWrite, cmdExpire),
	quorumRow("expire", -3, key1, fKey1|fWrite, cmdExpire),
	quorumRow("pexpireat", -3, key1, fKey1|fWrite, cmdExpire),
	quorumRow("expireat", -3, key1, fKey1|fWrite, cmdExpire),
	quorumRow("persist", 2, key1, fKey1|fWrite, cmdExpire),
	quorumRow("exists", -2, keysN, fRead, cmdExists),
	quorumRow("del", -2, keysN, fWrite, cmdDel),
	quorumRow("unlink", -2, keysN, fWrite, cmdDel),
	scriptRow("eval", -3, cmdEval),
	scriptRow("evalsha", -3, cmdEval),
	scriptRow("eval_ro", 0, cmdOtherScript),
	scriptRow("evalsha_ro", 0, cmdOtherScript),
	scriptRow("fcall", 0, cmdOtherScript),
	scriptRow("fcall_ro", 0, cmdOtherScript),
	quorumRow("lock.acquire", -3, key1, fWrite, cmdLockAcquire),
	quorumRow("lock.release", 3, key1, fWrite, cmdLockRelease),
	quorumRow("lock.extend", 4, key1, fWrite, cmdLockExtend),
	quorumRow("lock.info", 2, key1, fRead, cmdLockInfo),
	// Of a Redisson holder's field of a lock key, the quorum (redissonhash.go).
	{name: "hget", where: onQuorum, flags: fRead | fPassGetSet | fBackendKeys | fHash, h: cmdHashRead},
	{name: "hexists", where: onQuorum, flags: fRead | fPassGetSet | fBackendKeys | fHash, h: cmdHashRead},
	// The script cache (eval.go).
	{name: "script", arity: -2, where: onQuorum, h: cmdScript},

	// Answered by the proxy (conncmds.go, clients.go, info.go, commandcmd.go).
	{name: "ping", arity: -1, where: answered, h: cmdPing},
	{name: "echo", arity: 2, where: answered, h: cmdEcho},
	{name: "quit", where: answered, flags: fConnState, h: cmdQuit},
	{name: "hello", where: answered, flags: fConnState, h: cmdHello},
	{name: "auth", where: answered, flags: fConnState, h: cmdAuth},
	{name: "client", arity: -2, where: answered, flags: fConnState, h: cmdClient},
	{name: "select", arity: 2, where: answered, flags: fConnState, h: cmdSelect},
	{name: "reset", where: answered, flags: fConnState, h: cmdReset},
	{name: "info", where: answered, h: cmdInfo},
	{name: "command", where: answered, h: cmdCommand},

	// Transactions and blocking commands, on the client's own backend
	// connection.
	{name: "multi", where: onOwnConn, flags: fConnState, h: cmdMulti},
	{name: "exec", where: onOwnConn, flags: fConnState, h: cmdExec},
	{name: "discard", where: onOwnConn, flags: fConnState, h: cmdDiscard},
	{name: "watch", where: onOwnConn, flags: fConnState | fBackendKeys},
	{name: "unwatch", where: onOwnConn, flags: fConnState},
	{name: "blpop", where: onOwnConn, flags: fRead | fWrite | fBackendKeys},
	{name: "brpop", where: onOwnConn, flags: fRead | fWrite | fBackendKeys},
	{name: "blmove", where: onOwnConn, flags: fRead | fWrite | fBackendKeys},
	{name: "brpoplpush", where: onOwnConn, flags: fRead | fWrite | fBackendKeys},
	{name: "blmpop", where: onOwnConn, flags: fRead | fWrite | fBackendKeys},
	{name: "xread", where: onOwnConn, flags: fRead | fBackendKeys},
	{name: "xreadgroup", where: onOwnConn, flags: fRead | fWrite | fBackendKeys},
	{name: "wait", where: onOwnConn, flags: fBackendKeys},
	{name: "waitaof", where: onOwnConn, flags: fBackendKeys},

	// Passed through, with the proxy's checks or additions.
	{name: "subscribe", arity: -2, where: onBackend, flags: fPubSub | fConnState, h: cmdSubscribe},
	{name: "psubscribe", arity: -2, where: onBackend, flags: fPubSub | fConnState, h: cmdSubscribe},
	{name: "ssubscribe", arity: -2, where: onBackend, flags: fPubSub | fConnState, h: cmdSubscribe},
	{name: "unsubscribe", where: onBackend, flags: fPubSub | fConnState, h: cmdUnsubscribe},
	{name: "punsubscribe", where: onBackend, flags: fPubSub | fConnState, h: cmdUnsubscribe},
	{name: "sunsubscribe", where: onBackend, flags: fPubSub | fConnState, h: cmdUnsubscribe},
	{name: "scan", where: onBackend, flags: fRead, h: cmdKeyspace},
	{name: "keys", where: onBackend, flags: fRead, h: cmdKeyspace},
	{name: "randomkey", where: onBackend, flags: fRead, h: cmdKeyspace},
	{name: "dbsize", where: onBackend, flags: fRead, h: cmdDBSize},
	{name: "rename", where: onBackend, flags: fWrite | fBackendKeys | fDataBeside, h: cmdRename},
	{name: "renamenx", where: onBackend, flags: fWrite | fBackendKeys | fDataBeside, h: cmdRename},

	// Never passed through: they would act on one backend connection or
	// one master.
	{name: "monitor", where: refused},
	{name: "sync", where: refused},
	{name: "psync", where: refused},
	{name: "replicaof", where: refused},
	{name: "slaveof", where: refused},
	{name: "shutdown", where: refused},
	{name: "swapdb", where: refused},
	{name: "move", where: refused},
	{name: "migrate", where: refused},
	{name: "failover", where: refused},

	// Refused while the backend is a voting master (admincmds.go).
	{name: "flushall", where: adminCmd, flags: fWrite, h: cmdAdmin},
	{name: "flushdb", where: adminCmd, flags: fWrite, h: cmdAdmin},
	{name: "debug", where: adminCmd, h: cmdAdmin},
	{name: "config", where: adminCmd, h: cmdAdmin, adminSubs: []string{"set", "rewrite"}},
	{name: "acl", where: adminCmd, h: cmdAdmin, adminSubs: []string{"setuser", "deluser", "load", "save"}},
	{name: "module", where: adminCmd, h: cmdAdmin, adminSubs: []string{"load", "loadex", "unload"}},
}

// commands is the command table by lower-case name.
var commands map[string]*command

func init() {
	for _, name := range sortedSetCommands {
		w := onQuorum // on a semaphore's permits
		if blocking(name) {
			w = onOwnConn // BZPOPMIN…, of other keys
		}
		table = append(table, command{name: name, where: w, flags: fSorted | fBackendKeys | fRead | fWrite, h: cmdSortedSet})
	}
	commands = make(map[string]*command, len(table))
	for i := range table {
		e := &table[i]
		if _, dup := commands[e.name]; dup {
			panic("proxy: command " + e.name + " twice in the command table")
		}
		commands[e.name] = e
	}
}

// serve runs a command (e: its row) once the boundary let it: the arity
// first, then, for a command the quorum serves on a lock key, whether
// args[1] is one, then the handler; a command it passes on goes to the
// backend here. A refused command is answered from its row.
func (s *Server) serve(e *command, c redcon.Conn, st *client, args [][]byte) {
	if !e.arityOK(len(args)) {
		wrongArgs(c, e.name)
		return
	}
	r := toBackend
	switch {
	case e.where == refused:
		c.WriteError("ERR redlock-proxy: '" + strings.ToUpper(quorum.Echo(args[0])) + "' is not supported through the proxy; connect to a master directly")
		return
	case e.has(fKey1) && !s.isLockKey(args[1]):
	case e.h != nil:
		r = e.h(s, c, st, args)
	case e.where == onOwnConn:
		r = toOwnConn
	}
	switch r {
	case toBackend:
		s.forward(c, st, args, false)
	case toOwnConn:
		s.forward(c, st, args, true)
	}
}
