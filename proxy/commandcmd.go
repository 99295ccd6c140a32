package proxy

import (
	"bytes"
	"strconv"
	"strings"

	"github.com/tidwall/match"
	"github.com/tidwall/redcon"

	"github.com/redlock-proxy/redlock-proxy/proxy/wire"
)

// COMMAND, COMMAND COUNT, LIST, INFO, DOCS, GETKEYS and GETKEYSANDFLAGS
// answer as one Redis that has the proxy's own commands (LOCK.*) would:
// the backend's reply, with the proxy's commands added, so that a client
// that reads the command table (redis-cli's hints, go-redis's and
// redis-py's key lookups) finds them. The boundary reads the backend's
// own table (keyspecs.go), not this one.

// nativeCommand is a command of the proxy's own, as COMMAND describes it.
type nativeCommand struct {
	name       string
	arity      int
	write      bool // else read-only
	summary    string
	complexity string
	args       []nativeArg
}

type nativeArg struct {
	name, typ string
	optional  bool
}

var nativeCommands = []nativeCommand{
	{"lock.acquire", -3, true, "Take a lock on a quorum of the masters, with a fencing number", "O(N) where N is the number of masters",
		[]nativeArg{{"key", "key", false}, {"ttl-or-lease", "string", false}, {"token", "string", true}, {"wait", "integer", true}, {"reentrant", "pure-token", true}}},
	{"lock.extend", 4, true, "Renew a lock held by a token on a quorum of the masters", "O(N) where N is the number of masters",
		[]nativeArg{{"key", "key", false}, {"token", "string", false}, {"ttl", "integer", false}}},
	{"lock.info", 2, false, "Describe a lock as each master holds it", "O(N) where N is the number of masters",
		[]nativeArg{{"key", "key", false}}},
	{"lock.release", 3, true, "Give back one hold of a lock on a quorum of the masters", "O(N) where N is the number of masters",
		[]nativeArg{{"key", "key", false}, {"token", "string", false}}},
}

func nativeCommandOf(name []byte) *nativeCommand {
	for i := range nativeCommands {
		if strings.EqualFold(nativeCommands[i].name, string(name)) {
			return &nativeCommands[i]
		}
	}
	return nil
}

// backendRaw runs args on the backend for st and returns its raw reply,
// or false after answering c with the error.
func (s *Server) backendRaw(c redcon.Conn, st *client, args [][]byte) ([]byte, bool) {
	var rc wire.Capture
	s.forward(&rc, st, args, false)
	if rc.Err != "" {
		c.WriteError(rc.Err)
		return nil, false
	}
	return rc.Raw, true
}

// aggregate splits a raw aggregate reply into its type, length and the
// rest; ok is false for anything else (an error).
func aggregate(b []byte) (typ byte, n int, rest []byte, ok bool) {
	i := bytes.Index(b, []byte("\r\n"))
	if len(b) < 4 || i < 0 || (b[0] != '*' && b[0] != '%') {
		return 0, 0, nil, false
	}
	n, err := strconv.Atoi(string(b[1:i]))
	if err != nil || n < 0 {
		return 0, 0, nil, false
	}
	return b[0], n, b[i+2:], true
}

func cmdCommand(s *Server, c redcon.Conn, st *client, args [][]byte) route {
	if st.sub != nil && st.sub.resp3 {
		// Its commands run on its own connection, their replies relayed.
		return toBackend
	}
	sub := ""
	if len(args) > 1 {
		sub = strings.ToLower(string(args[1]))
	}
	switch {
	case sub == "" || sub == "info" && len(args) == 2:
		s.commandAll(c, st, args)
	case sub == "count" && len(args) == 2:
		raw, ok := s.backendRaw(c, st, args)
		if !ok {
			return replied
		}
		if n, err := strconv.Atoi(strings.TrimSpace(string(raw[1:]))); raw[0] == ':' && err == nil {
			c.WriteInt(n + len(nativeCommands))
			return replied
		}
		c.WriteRaw(raw)
	case sub == "list":
		s.commandList(c, st, args)
	case sub == "info":
		return s.commandInfo(c, st, args)
	case sub == "docs":
		return s.commandDocs(c, st, args)
	case (sub == "getkeys" || sub == "getkeysandflags") && len(args) > 2 && nativeCommandOf(args[2]) != nil:
		nc := nativeCommandOf(args[2])
		n := len(args) - 2
		if nc.arity > 0 && n != nc.arity || nc.arity < 0 && n < -nc.arity {
			c.WriteError("ERR Invalid number of arguments specified for command")
			return replied
		}
		c.WriteArray(1)
		if sub == "getkeys" {
			c.WriteBulk(args[3])
			return replied
		}
		c.WriteArray(2)
		c.WriteBulk(args[3])
		writeSet(c, st, nc.keyFlags())
	default:
		return toBackend
	}
	return replied
}

// backendArray runs args on the backend and returns its array reply's
// length and elements; any other reply (an error among them) is passed on
// to c as it is, and ok is false.
func (s *Server) backendArray(c redcon.Conn, st *client, args [][]byte) (n int, rest []byte, ok bool) {
	raw, ok := s.backendRaw(c, st, args)
	if !ok {
		return 0, nil, false
	}
	typ, n, rest, ok := aggregate(raw)
	if !ok || typ != '*' {
		c.WriteRaw(raw)
		return 0, nil, false
	}
	return n, rest, true
}

// commandAll answers COMMAND and COMMAND INFO without names: the backend's
// entries, then the proxy's.
func (s *Server) commandAll(c redcon.Conn, st *client, args [][]byte) {
	n, rest, ok := s.backendArray(c, st, args)
	if !ok {
		return
	}
	c.WriteArray(n + len(nativeCommands))
	c.WriteRaw(rest)
	for i := range nativeCommands {
		nativeCommands[i].writeInfo(c, st)
	}
}

// commandList answers COMMAND LIST [FILTERBY MODULE m | ACLCAT c | PATTERN p].
func (s *Server) commandList(c redcon.Conn, st *client, args [][]byte) {
	n, rest, ok := s.backendArray(c, st, args)
	if !ok {
		return
	}
	var mine []string
	for _, nc := range nativeCommands {
		if len(args) == 5 { // the backend took the filter
			v := string(args[4])
			switch strings.ToLower(string(args[3])) {
			case "module":
				continue
			case "aclcat":
				if !strings.EqualFold(v, "slow") && !strings.EqualFold(v, nc.aclCategory()[1:]) {
					continue
				}
			case "pattern":
				if !match.Match(nc.name, strings.ToLower(v)) {
					continue
				}
			}
		}
		mine = append(mine, nc.name)
	}
	c.WriteArray(n + len(mine))
	c.WriteRaw(rest)
	for _, name := range mine {
		c.WriteBulkString(name)
	}
}

// commandInfo answers COMMAND INFO name…: an entry or nil per name, in
// order.
func (s *Server) commandInfo(c redcon.Conn, st *client, args [][]byte) route {
	mineAt := -1
	for i, a := range args[2:] {
		if nativeCommandOf(a) != nil {
			mineAt = i
			break
		}
	}
	if mineAt < 0 {
		return toBackend
	}
	c.WriteArray(len(args) - 2)
	for _, a := range args[2:] {
		if nc := nativeCommandOf(a); nc != nil {
			nc.writeInfo(c, st)
			continue
		}
		raw, ok := s.backendRaw(c, st, [][]byte{[]byte("COMMAND"), []byte("INFO"), a})
		if !ok {
			return replied
		}
		if _, n, rest, ok := aggregate(raw); ok && n == 1 {
			c.WriteRaw(rest)
		} else {
			c.WriteNull()
		}
	}
	return replied
}

// commandDocs answers COMMAND DOCS [name…]: a map of each known command's
// docs.
func (s *Server) commandDocs(c redcon.Conn, st *client, args [][]byte) route {
	back := args[:2:2]
	var mine []*nativeCommand
	if len(args) == 2 {
		for i := range nativeCommands {
			mine = append(mine, &nativeCommands[i])
		}
	} else {
		for _, a := range args[2:] {
			if nc := nativeCommandOf(a); nc != nil {
				mine = append(mine, nc)
			} else {
				back = append(back, a)
			}
		}
		if len(mine) == 0 {
			return toBackend
		}
	}
	n, rest := 0, []byte(nil)
	if len(args) == 2 || len(back) > 2 {
		raw, ok := s.backendRaw(c, st, back)
		if !ok {
			return replied
		}
		typ, k, r, ok := aggregate(raw)
		if !ok {
			c.WriteRaw(raw)
			return replied
		}
		n, rest = k, r
		if typ == '*' {
			n /= 2
		}
	}
	wire.WriteMap(c, n+len(mine))
	c.WriteRaw(rest)
	for _, nc := range mine {
		c.WriteBulkString(nc.name)
		nc.writeDocs(c, st)
	}
	return replied
}

func (nc *nativeCommand) aclCategory() string {
	if nc.write {
		return "@write"
	}
	return "@read"
}

func (nc *nativeCommand) keyFlags() []string {
	if nc.write {
		return []string{"RW", "access", "update"}
	}
	return []string{"RO", "access"}
}

// writeSet writes a set of simple strings: a RESP3 set, or an array.
func writeSet(c redcon.Conn, st *client, items []string) {
	if st.proto == 3 {
		c.WriteRaw([]byte("~" + strconv.Itoa(len(items)) + "\r\n"))
	} else {
		c.WriteArray(len(items))
	}
	for _, it := range items {
		c.WriteString(it)
	}
}

// writeInfo writes the command's entry in COMMAND's reply, in Redis 7's
// form: name, arity, flags, first key, last key, step, ACL categories,
// tips, key specs, subcommands.
func (nc *nativeCommand) writeInfo(c redcon.Conn, st *client) {
	c.WriteArray(10)
	c.WriteBulkString(nc.name)
	c.WriteInt(nc.arity)
	if nc.write {
		writeSet(c, st, []string{"write"})
	} else {
		writeSet(c, st, []string{"readonly"})
	}
	c.WriteInt(1)
	c.WriteInt(1)
	c.WriteInt(1)
	writeSet(c, st, []string{nc.aclCategory(), "@slow"})
	writeSet(c, st, nil)
	c.WriteArray(1)
	wire.WriteMap(c, 3)
	c.WriteBulkString("flags")
	writeSet(c, st, nc.keyFlags())
	c.WriteBulkString("begin_search")
	wire.WriteMap(c, 2)
	c.WriteBulkString("type")
	c.WriteBulkString("index")
	c.WriteBulkString("spec")
	wire.WriteMap(c, 1)
	c.WriteBulkString("index")
	c.WriteInt(1)
	c.WriteBulkString("find_keys")
	wire.WriteMap(c, 2)
	c.WriteBulkString("type")
	c.WriteBulkString("range")
	c.WriteBulkString("spec")
	wire.WriteMap(c, 3)
	c.WriteBulkString("lastkey")
	c.WriteInt(0)
	c.WriteBulkString("keystep")
	c.WriteInt(1)
	c.WriteBulkString("limit")
	c.WriteInt(0)
	c.WriteArray(0)
}

// writeDocs writes the command's docs as COMMAND DOCS has them.
func (nc *nativeCommand) writeDocs(c redcon.Conn, st *client) {
	wire.WriteMap(c, 5)
	c.WriteBulkString("summary")
	c.WriteBulkString(nc.summary + " (redlock-proxy, docs/native-locks.md)")
	c.WriteBulkString("since")
	c.WriteBulkString("7.0.0")
	c.WriteBulkString("group")
	c.WriteBulkString("generic")
	c.WriteBulkString("complexity")
	c.WriteBulkString(nc.complexity)
	c.WriteBulkString("arguments")
	c.WriteArray(len(nc.args))
	for _, a := range nc.args {
		fields := 2
		if a.typ == "key" || a.optional {
			fields++
		}
		wire.WriteMap(c, fields)
		c.WriteBulkString("name")
		c.WriteBulkString(a.name)
		c.WriteBulkString("type")
		c.WriteBulkString(a.typ)
		switch {
		case a.typ == "key":
			c.WriteBulkString("key_spec_index")
			c.WriteInt(0)
		case a.optional:
			c.WriteBulkString("flags")
			writeSet(c, st, []string{"optional"})
		}
	}
}
