package proxy

import (
	"crypto/tls"
	"net"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/tidwall/redcon"

	"github.com/redlock-proxy/redlock-proxy/proxy/quorum"
	"github.com/redlock-proxy/redlock-proxy/proxy/wire"
)

// CLIENT LIST, CLIENT INFO and CLIENT KILL, for the proxy's own clients:
// the connections to the proxy, each a line in the format of Redis 7.0
// (with lib-name and lib-ver after its fields, as Redis 7.2 adds them),
// so that a client library's parser (redis-py's client_list, go-redis's
// ClientList, phpredis's client('list')) reads them as a Redis's. The
// fields about a connection's buffers in Redis (qbuf, argv-mem, obl,
// tot-mem…) are 0: the proxy's buffers are not Redis's.
//
// A client's state is its session's (the goroutine serving it): after each
// command the session publishes what CLIENT LIST shows of it (clientView),
// and the command it runs, so another client lists it without reading its
// state while it changes.

// sessionInfo is what CLIENT LIST shows of a session, readable from any
// goroutine.
type sessionInfo struct {
	created time.Time // set before the session is listed
	laddr   string
	fd      int
	last    atomic.Int64 // when its last command began, in Unix ns
	mu      sync.Mutex   // guards view and cmd
	view    clientView
	cmd     string // its last command, "client|list" for a subcommand
}

// clientView is a client's state as CLIENT LIST shows it.
type clientView struct {
	id                   int64 // 0: not yet a client (being refused)
	name, libName        string
	libVer, user         string
	proto, db            int
	multi                int // -1 outside MULTI, else the commands queued
	sub, psub, ssub      int
	tracking, subscribed bool
}

// initInfo sets what does not change in a session's life, before it is
// listed.
func (ss *session) initInfo(nc net.Conn) {
	ss.info.created = time.Now()
	ss.info.laddr = nc.LocalAddr().String()
	ss.info.fd = connFD(nc)
	ss.info.last.Store(ss.info.created.UnixNano())
}

// connFD is the file descriptor of a TCP or Unix connection, else -1.
func connFD(nc net.Conn) int {
	if w, ok := nc.(*wire.Conn); ok {
		nc = w.Conn
	}
	if t, ok := nc.(*tls.Conn); ok {
		nc = t.NetConn()
	}
	sc, ok := nc.(syscall.Conn)
	if !ok {
		return -1
	}
	rc, err := sc.SyscallConn()
	if err != nil {
		return -1
	}
	fd := -1
	_ = rc.Control(func(p uintptr) { fd = int(p) })
	return fd
}

// sessionDB is the database a client has selected.
func sessionDB(st *client) int {
	if st.db == nil {
		return 0
	}
	return st.db.n
}

// viewOf is what CLIENT LIST shows of st; run by st's session.
func viewOf(st *client) clientView {
	v := clientView{id: st.id, name: st.name, libName: st.libName, libVer: st.libVer, user: st.user,
		proto: max(st.proto, 2), db: sessionDB(st), multi: -1}
	if v.user == "" {
		v.user = defaultUser
	}
	if st.multi {
		v.multi = st.multiN
	}
	if st.sub != nil {
		v.sub, v.psub, v.ssub = len(st.sub.channels), len(st.sub.patterns), len(st.sub.shards)
		v.tracking = st.sub.tracking
		v.subscribed = st.sub.count() > 0
	}
	return v
}

// publishView publishes st's state for CLIENT LIST, when it changed.
func (ss *session) publishView(st *client) {
	v := viewOf(st)
	if v == ss.info.view { // only this goroutine writes it
		return
	}
	ss.info.mu.Lock()
	ss.info.view = v
	ss.info.mu.Unlock()
}

// containers are the commands whose subcommand CLIENT LIST names with
// them (cmd=client|list), as Redis 7.0 has them.
var containers = map[string]bool{
	"acl": true, "client": true, "cluster": true, "command": true, "config": true, "function": true,
	"latency": true, "memory": true, "module": true, "object": true, "pubsub": true, "script": true,
	"slowlog": true, "xgroup": true, "xinfo": true,
}

// noteCommand records that the session begins running args; run by the
// session. The name is kept as a new string only when it changed.
func (ss *session) noteCommand(args [][]byte) {
	ss.info.last.Store(time.Now().UnixNano())
	name := args[0]
	var sub []byte
	if len(args) > 1 && len(name) <= 8 {
		var buf [8]byte
		if containers[string(appendLower(buf[:0], name))] { // no allocation
			sub = args[1]
		}
	}
	prev := ss.info.cmd // only this goroutine writes it
	if sub == nil && eqFold(prev, name) ||
		sub != nil && len(prev) == len(name)+1+len(sub) && eqFold(prev[:len(name)], name) && eqFold(prev[len(name)+1:], sub) {
		return
	}
	var cmd string
	if e := lookup(name); e != nil && sub == nil {
		cmd = e.name // the table's: no allocation (a lock+unlock pair changes it each time)
	} else {
		cmd = strings.ToLower(string(name))
		if sub != nil {
			cmd += "|" + strings.ToLower(string(sub))
		}
	}
	ss.info.mu.Lock()
	ss.info.cmd = cmd
	ss.info.mu.Unlock()
}

// eqFold reports whether s and b are equal under ASCII case folding,
// without allocating.
func eqFold(s string, b []byte) bool {
	if len(s) != len(b) {
		return false
	}
	for i := range len(b) {
		x, y := s[i], b[i]
		if 'A' <= x && x <= 'Z' {
			x += 'a' - 'A'
		}
		if 'A' <= y && y <= 'Z' {
			y += 'a' - 'A'
		}
		if x != y {
			return false
		}
	}
	return true
}

// listed is one session as CLIENT LIST and CLIENT KILL see it.
type listed struct {
	ss   *session
	v    clientView
	cmd  string
	self bool
}

// listClients is the proxy's clients, by id; self's state is read live.
func (s *Server) listClients(c redcon.Conn, st *client) []listed {
	self, _ := c.(*session)
	s.mu.Lock()
	all := make([]*session, 0, len(s.sessions))
	for ss := range s.sessions {
		all = append(all, ss)
	}
	s.mu.Unlock()
	out := make([]listed, 0, len(all))
	for _, ss := range all {
		l := listed{ss: ss, self: ss == self}
		if l.self {
			l.v, l.cmd = viewOf(st), ss.info.cmd
		} else {
			ss.info.mu.Lock()
			l.v, l.cmd = ss.info.view, ss.info.cmd
			ss.info.mu.Unlock()
		}
		if l.v.id != 0 && !ss.cc.Gone() {
			out = append(out, l)
		}
	}
	if self == nil { // not a session (a test's connection): itself only
		out = append(out, listed{v: viewOf(st), self: true})
	}
	slices.SortFunc(out, func(a, b listed) int { return int(a.v.id - b.v.id) })
	return out
}

// clientType is a client's type as CLIENT LIST TYPE and CLIENT KILL TYPE
// name it.
func (l listed) clientType() string {
	if l.v.subscribed {
		return "pubsub"
	}
	return "normal"
}

// clientTypeOf reads a type as Redis does; "" for one it does not know.
func clientTypeOf(b []byte) string {
	switch t := strings.ToLower(string(b)); t {
	case "normal", "pubsub", "master":
		return t
	case "replica", "slave":
		return "replica"
	}
	return ""
}

// line is the client's line of CLIENT LIST, without its "\n".
func (l listed) line(c redcon.Conn) string {
	now := time.Now()
	addr, laddr, fd, age, idle := "", "", -1, int64(0), int64(0)
	if l.ss != nil {
		addr, laddr, fd = l.ss.addr, l.ss.info.laddr, l.ss.info.fd
		age = int64(now.Sub(l.ss.info.created) / time.Second)
		if !l.self {
			idle = max(0, (now.UnixNano()-l.ss.info.last.Load())/int64(time.Second))
		}
	} else {
		addr = c.RemoteAddr()
	}
	v := l.v
	flags := ""
	if v.subscribed {
		flags += "P"
	}
	if v.multi >= 0 {
		flags += "x"
	}
	if v.tracking {
		flags += "t"
	}
	if flags == "" {
		flags = "N"
	}
	itoa := strconv.Itoa
	var b strings.Builder
	b.Grow(320)
	b.WriteString("id=" + strconv.FormatInt(v.id, 10) + " addr=" + addr + " laddr=" + laddr + " fd=" + itoa(fd) +
		" name=" + v.name + " age=" + strconv.FormatInt(age, 10) + " idle=" + strconv.FormatInt(idle, 10) +
		" flags=" + flags + " db=" + itoa(v.db) + " sub=" + itoa(v.sub) + " psub=" + itoa(v.psub) + " ssub=" + itoa(v.ssub) +
		" multi=" + itoa(v.multi) + " qbuf=0 qbuf-free=0 argv-mem=0 multi-mem=0 rbs=0 rbp=0 obl=0 oll=0 omem=0 tot-mem=0" +
		" events=r cmd=" + l.cmd + " user=" + v.user + " redir=-1 resp=" + itoa(v.proto) +
		" lib-name=" + v.libName + " lib-ver=" + v.libVer)
	return b.String()
}

// clientList answers CLIENT LIST [TYPE type | ID id…] and CLIENT INFO.
func (s *Server) clientList(c redcon.Conn, st *client, args [][]byte) {
	sub := strings.ToLower(string(args[1]))
	if sub == "info" {
		if len(args) != 2 {
			c.WriteError("ERR wrong number of arguments for 'client|info' command")
			return
		}
		for _, l := range s.listClients(c, st) {
			if l.self {
				wire.WriteVerbatim(c, l.line(c)+"\n")
				return
			}
		}
	}
	typ := ""
	var ids []int64
	switch {
	case len(args) == 4 && strings.EqualFold(string(args[2]), "type"):
		if typ = clientTypeOf(args[3]); typ == "" {
			c.WriteError("ERR Unknown client type '" + quorum.Echo(args[3]) + "'")
			return
		}
	case len(args) > 3 && strings.EqualFold(string(args[2]), "id"):
		for _, a := range args[3:] {
			id, err := strconv.ParseInt(string(a), 10, 64)
			if err != nil {
				c.WriteError("ERR Invalid client ID")
				return
			}
			ids = append(ids, id)
		}
	case len(args) != 2:
		c.WriteError("ERR syntax error")
		return
	}
	all := s.listClients(c, st)
	var b strings.Builder
	if ids != nil {
		for _, id := range ids { // in the order asked, as Redis
			for _, l := range all {
				if l.v.id == id {
					b.WriteString(l.line(c) + "\n")
				}
			}
		}
	} else {
		for _, l := range all {
			if typ == "" || l.clientType() == typ {
				b.WriteString(l.line(c) + "\n")
			}
		}
	}
	wire.WriteVerbatim(c, b.String())
}

// clientKill answers CLIENT KILL addr (the old form) and CLIENT KILL
// [ID id] [TYPE type] [USER user] [ADDR addr] [LADDR addr] [SKIPME yes|no],
// with Redis's replies and errors. A client killed is closed as the proxy
// closes one that timed out: its leases are not released, their locks
// are left to expire.
func (s *Server) clientKill(c redcon.Conn, st *client, args [][]byte) {
	if len(args) < 3 {
		c.WriteError("ERR wrong number of arguments for 'client|kill' command")
		return
	}
	var id int64
	typ, user, addr, laddr, skipme := "", "", "", "", true
	users := s.auth.Load().names
	switch {
	case len(args) == 3:
		addr, skipme = string(args[2]), false
	case len(args) > 3 && len(args)%2 == 0:
		for i := 2; i < len(args); i += 2 {
			v := args[i+1]
			switch strings.ToLower(string(args[i])) {
			case "id":
				n, err := strconv.ParseInt(string(v), 10, 64)
				if err != nil || n < 1 {
					c.WriteError("ERR client-id should be greater than 0")
					return
				}
				id = n
			case "type":
				if typ = clientTypeOf(v); typ == "" {
					c.WriteError("ERR Unknown client type '" + quorum.Echo(v) + "'")
					return
				}
			case "addr":
				addr = string(v)
			case "laddr":
				laddr = string(v)
			case "user":
				if user = string(v); !slices.Contains(users, user) {
					c.WriteError("ERR No such user '" + quorum.Echo(v) + "'")
					return
				}
			case "skipme":
				switch strings.ToLower(string(v)) {
				case "yes":
					skipme = true
				case "no":
					skipme = false
				default:
					c.WriteError("ERR syntax error")
					return
				}
			default:
				c.WriteError("ERR syntax error")
				return
			}
		}
	default:
		c.WriteError("ERR syntax error")
		return
	}
	killed, closeSelf := 0, false
	for _, l := range s.listClients(c, st) {
		laddrOf := ""
		if l.ss != nil {
			laddrOf = l.ss.info.laddr
		}
		switch {
		case addr != "" && addrOf(l, c) != addr,
			laddr != "" && laddrOf != laddr,
			typ != "" && l.clientType() != typ,
			id != 0 && l.v.id != id,
			user != "" && l.v.user != user,
			l.self && skipme:
			continue
		}
		killed++
		if l.self {
			closeSelf = true
		} else if l.ss != nil {
			_ = l.ss.cc.Close()
		}
	}
	if len(args) == 3 {
		if killed == 0 {
			c.WriteError("ERR No such client")
		} else {
			c.WriteString("OK")
		}
	} else {
		c.WriteInt(killed)
	}
	if closeSelf {
		c.Close() // after its reply, as Redis closes it
	}
}

func addrOf(l listed, c redcon.Conn) string {
	if l.ss != nil {
		return l.ss.addr
	}
	return c.RemoteAddr()
}
