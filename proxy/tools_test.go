package proxy_test

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/redlock-proxy/redlock-proxy/proxy"
	"github.com/redlock-proxy/redlock-proxy/proxy/wire"
)

// The commands that test suites and tools send besides an application's
// own (FLUSHDB between tests, CLIENT LIST in a dashboard, DBSIZE, SCAN and
// KEYS in a key browser, OBJECT and MEMORY USAGE in a memory report,
// COMMAND in redis-cli), sent to a plain redis-server and through the proxy
// holding the same keys and locks, in each configuration, and compared:
// exactly, or, where a reply legitimately differs (a connection's address,
// a clock), by its parsed structure.

// toolConfigs are the configurations compared: a voting backend with locks
// under a prefix, and a backend of its own with every key a lock key and
// with locks under a prefix.
var toolConfigs = []struct {
	name   string
	voting bool
	every  bool
}{
	{"voting_backend_prefix", true, false},
	{"own_backend_every_key", false, true},
	{"own_backend_prefix", false, false},
}

// proxyCommands are the commands the proxy serves that a Redis has not.
var proxyCommands = []string{"lock.acquire", "lock.extend", "lock.info", "lock.release"}

type toolCase struct {
	cmd []string
	// same compares the proxy's reply with Redis's; nil: exactly.
	same func(t *testing.T, got, want any) bool
}

func TestToolCommandsLikeRedis(t *testing.T) {
	for _, c := range toolConfigs {
		t.Run(c.name, func(t *testing.T) {
			var own string
			if !c.voting {
				own = ownBackend(t)
			}
			keys := []string{"lock:*"}
			if c.every {
				keys = []string{"*"}
			}
			e := newEnv(t, 3, func(cfg *proxy.Config) { cfg.Proxy.LockKeys, cfg.Proxy.Backend = keys, own })
			plain := startPlain(t)
			p, r := dialRESP(t, e.addr), dialRESP(t, plain)
			defer p.close()
			defer r.close()
			// The same keys on both sides: data, a lock taken by SET NX,
			// and one taken by LOCK.ACQUIRE (on Redis, the key it holds).
			for _, cmd := range [][]string{
				{"SET", "a", "1"}, {"HSET", "h", "f", "v"}, {"RPUSH", "l", "x", "y"}, {"SADD", "s", "m"},
				{"SET", "lock:1", "tok", "NX", "PX", "60000"},
			} {
				mustSame(t, cmd, p.do(t, cmd...), r.do(t, cmd...))
			}
			if got := p.do(t, "LOCK.ACQUIRE", "lock:n", "60000", "TOKEN", "tokn"); !strings.HasPrefix(got, "*") {
				t.Fatalf("LOCK.ACQUIRE: %q", got)
			}
			r.do(t, "SET", "lock:n", "tokn", "PX", "60000")

			cases := []toolCase{
				{cmd: []string{"DBSIZE"}},
				{cmd: []string{"KEYS", "*"}, same: sameSet},
				{cmd: []string{"KEYS", "lock:*"}, same: sameSet},
				{cmd: []string{"SCAN", "0", "COUNT", "1000"}, same: sameScan},
				{cmd: []string{"SCAN", "0", "MATCH", "lock:*", "COUNT", "1000"}, same: sameScan},
				{cmd: []string{"SCAN", "0", "TYPE", "string", "COUNT", "1000"}, same: sameScan},
				{cmd: []string{"SCAN", "0", "TYPE", "hash", "COUNT", "1000"}, same: sameScan},
				{cmd: []string{"EXISTS", "a", "lock:1", "lock:n"}},
				{cmd: []string{"OBJECT", "ENCODING", "a"}},
				{cmd: []string{"OBJECT", "ENCODING", "h"}},
				{cmd: []string{"OBJECT", "ENCODING", "l"}},
				{cmd: []string{"OBJECT", "REFCOUNT", "h"}},
				{cmd: []string{"OBJECT", "IDLETIME", "h"}, same: closeInts(5)},
				{cmd: []string{"OBJECT", "FREQ", "h"}},
				{cmd: []string{"MEMORY", "USAGE", "h"}},
				{cmd: []string{"MEMORY", "USAGE", "nope"}},
				{cmd: []string{"WAIT", "0", "0"}},
				{cmd: []string{"TIME"}, same: closeInts(2)},
				{cmd: []string{"COMMAND", "COUNT"}, same: countPlus(int64(len(proxyCommands)))},
				{cmd: []string{"COMMAND", "LIST"}, same: namesPlus},
				{cmd: []string{"COMMAND"}, same: commandNamesPlus},
				{cmd: []string{"COMMAND", "INFO", "get", "set"}},
				{cmd: []string{"COMMAND", "INFO", "lock.acquire"}, same: oneEntry},
				{cmd: []string{"COMMAND", "DOCS", "get"}},
				{cmd: []string{"COMMAND", "GETKEYS", "set", "a", "b"}},
				{cmd: []string{"COMMAND", "GETKEYS", "lock.acquire", "lk", "100"}, same: isKeys("lk")},
				{cmd: []string{"CONFIG", "GET", "maxmemory"}},
				{cmd: []string{"CONFIG", "GET", "databases"}},
				{cmd: []string{"CLIENT", "GETNAME"}},
				{cmd: []string{"CLIENT", "SETNAME", "tool"}},
				{cmd: []string{"CLIENT", "GETNAME"}},
				{cmd: []string{"CLIENT", "ID"}, same: bothInts},
				{cmd: []string{"CLIENT", "INFO"}, same: sameClientLines},
				{cmd: []string{"CLIENT", "LIST"}, same: sameClientLines},
				{cmd: []string{"CLIENT", "LIST", "TYPE", "normal"}, same: sameClientLines},
				{cmd: []string{"CLIENT", "LIST", "TYPE", "pubsub"}},
				{cmd: []string{"CLIENT", "LIST", "TYPE", "bad"}},
				{cmd: []string{"CLIENT", "LIST", "ID", "abc"}},
				{cmd: []string{"CLIENT", "KILL", "ID", "99999"}},
				{cmd: []string{"CLIENT", "KILL", "ID", "0"}},
				{cmd: []string{"CLIENT", "KILL", "1.2.3.4:5"}},
				{cmd: []string{"CLIENT", "KILL", "USER", "nobody"}},
				{cmd: []string{"CLIENT", "KILL", "ADDR", "1.2.3.4:5"}},
				{cmd: []string{"CLIENT", "KILL", "ID", "1", "SKIPME", "maybe"}},
				{cmd: []string{"CLIENT", "KILL", "FOO", "bar"}},
			}
			// In RESP2, then in RESP3.
			for _, tc := range append(cases, append([]toolCase{{cmd: []string{"HELLO", "3"}, same: func(*testing.T, any, any) bool { return true }}}, cases...)...) {
				got, want := p.do(t, tc.cmd...), r.do(t, tc.cmd...)
				if got == want && tc.same == nil {
					continue
				}
				g, gerr := wire.ParseValue([]byte(got))
				w, werr := wire.ParseValue([]byte(want))
				if tc.same == nil || gerr != nil || werr != nil || !tc.same(t, g, w) {
					t.Errorf("%q:\nproxy %q\nRedis %q", tc.cmd, got, want)
				}
			}

			// FLUSHDB: refused on a voting backend; elsewhere the backend is
			// flushed. Where it holds data beside the locks (every key a
			// lock key), the locks whose mirrors it held end with them
			// (flush.go); the others (LOCK.*, every lock under a prefix)
			// stay, listed as keys, until they are released
			// (docs/commands.md).
			p.do(t, "HELLO", "2")
			got := p.do(t, "FLUSHDB")
			if c.voting {
				if !strings.HasPrefix(got, "-ERR redlock-proxy: 'FLUSHDB' would erase") {
					t.Fatalf("FLUSHDB on a voting backend: %q", got)
				}
				return
			}
			mustEqual(t, "FLUSHDB", got, "+OK\r\n")
			if c.every {
				mustEqual(t, "DBSIZE after FLUSHDB", p.do(t, "DBSIZE"), ":1\r\n")
				mustEqual(t, "GET of a mirrored lock after FLUSHDB", p.do(t, "GET", "lock:1"), "$-1\r\n")
				mustEqual(t, "KEYS after FLUSHDB", p.do(t, "KEYS", "*"), "*1\r\n$6\r\nlock:n\r\n")
			} else {
				mustEqual(t, "DBSIZE after FLUSHDB", p.do(t, "DBSIZE"), ":2\r\n")
				mustEqual(t, "GET of a lock after FLUSHDB", p.do(t, "GET", "lock:1"), "$3\r\ntok\r\n")
				mustEqual(t, "SET NX of a lock after FLUSHDB", p.do(t, "SET", "lock:1", "other", "NX", "PX", "1000"), "$-1\r\n")
				mustEqual(t, "KEYS after FLUSHDB", p.do(t, "KEYS", "*"), "*2\r\n$6\r\nlock:1\r\n$6\r\nlock:n\r\n")
				mustEqual(t, "release", p.do(t, "EVAL", `if redis.call("get",KEYS[1]) == ARGV[1] then return redis.call("del",KEYS[1]) else return 0 end`, "1", "lock:1", "tok"), ":1\r\n")
			}
			mustEqual(t, "LOCK.RELEASE", p.do(t, "LOCK.RELEASE", "lock:n", "tokn"), ":1\r\n")
			mustEqual(t, "DBSIZE after the releases", p.do(t, "DBSIZE"), ":0\r\n")
			mustEqual(t, "FLUSHALL", p.do(t, "FLUSHALL", "SYNC"), "+OK\r\n")
		})
	}
}

func mustSame(t *testing.T, cmd []string, got, want string) {
	t.Helper()
	if got != want {
		t.Fatalf("%q:\nproxy %q\nRedis %q", cmd, got, want)
	}
}

func strs(v any) []string {
	a, _ := v.([]any)
	out := make([]string, 0, len(a))
	for _, x := range a {
		out = append(out, fmt.Sprint(x))
	}
	return out
}

func sameSet(t *testing.T, got, want any) bool {
	g, w := strs(got), strs(want)
	slices.Sort(g)
	slices.Sort(w)
	return slices.Equal(g, w)
}

// sameScan: one page that ends the scan on both sides, with the same keys.
func sameScan(t *testing.T, got, want any) bool {
	g, _ := got.([]any)
	w, _ := want.([]any)
	return len(g) == 2 && len(w) == 2 && fmt.Sprint(g[0]) == "0" && fmt.Sprint(w[0]) == "0" && sameSet(t, g[1], w[1])
}

func closeInts(tol int64) func(t *testing.T, got, want any) bool {
	return func(t *testing.T, got, want any) bool {
		g, w := strs(got), strs(want)
		if _, ok := got.([]any); !ok {
			g, w = []string{fmt.Sprint(got)}, []string{fmt.Sprint(want)}
		}
		if len(g) == 0 || len(g) != len(w) {
			return false
		}
		gi, err1 := strconv.ParseInt(g[0], 10, 64)
		wi, err2 := strconv.ParseInt(w[0], 10, 64)
		return err1 == nil && err2 == nil && abs(gi-wi) <= tol
	}
}

func bothInts(t *testing.T, got, want any) bool {
	_, gok := got.(int64)
	_, wok := want.(int64)
	return gok && wok
}

func countPlus(n int64) func(t *testing.T, got, want any) bool {
	return func(t *testing.T, got, want any) bool {
		g, gok := got.(int64)
		w, wok := want.(int64)
		return gok && wok && g == w+n
	}
}

func namesPlus(t *testing.T, got, want any) bool {
	return sameSet(t, got, append(want.([]any), anys(proxyCommands)...))
}

// commandNamesPlus compares COMMAND's replies by their commands' names,
// and the commands Redis has entry for entry.
func commandNamesPlus(t *testing.T, got, want any) bool {
	byName := func(v any) map[string]string {
		m := map[string]string{}
		a, _ := v.([]any)
		for _, e := range a {
			ea, _ := e.([]any)
			if len(ea) > 0 {
				m[fmt.Sprint(ea[0])] = fmt.Sprint(sortedDeep(ea))
			}
		}
		return m
	}
	g, w := byName(got), byName(want)
	for _, n := range proxyCommands {
		if g[n] == "" {
			t.Logf("COMMAND: no entry for %s", n)
			return false
		}
		delete(g, n)
	}
	if len(g) != len(w) {
		t.Logf("COMMAND: %d entries, Redis %d", len(g), len(w))
		return false
	}
	for n, e := range w {
		if g[n] != e {
			t.Logf("COMMAND: %s: %s, Redis %s", n, g[n], e)
			return false
		}
	}
	return true
}

func anys(s []string) []any {
	out := make([]any, len(s))
	for i, x := range s {
		out[i] = x
	}
	return out
}

func oneEntry(t *testing.T, got, want any) bool {
	g, _ := got.([]any)
	if len(g) != 1 {
		return false
	}
	e, _ := g[0].([]any)
	return len(e) >= 7 && fmt.Sprint(e[0]) == "lock.acquire"
}

func isKeys(keys ...string) func(t *testing.T, got, want any) bool {
	return func(t *testing.T, got, want any) bool { return slices.Equal(strs(got), keys) }
}

// clientLines parses CLIENT LIST or CLIENT INFO: a line per client, each
// its fields in order.
func clientLines(v any) [][][2]string {
	s, _ := v.(string)
	var out [][][2]string
	for _, line := range strings.Split(strings.TrimRight(s, "\n"), "\n") {
		var fields [][2]string
		for _, f := range strings.Split(line, " ") {
			k, val, _ := strings.Cut(f, "=")
			fields = append(fields, [2]string{k, val})
		}
		out = append(out, fields)
	}
	return out
}

// clientFieldsDiffer says how the proxy's client line differs from Redis's:
// the same fields in the same order (and lib-name and lib-ver after them,
// as Redis 7.2 has them), and the same values where they do not name the
// connection or its buffers.
func clientFieldsDiffer(g, w [][2]string) string {
	if len(g) != len(w)+2 || g[len(w)][0] != "lib-name" || g[len(w)+1][0] != "lib-ver" {
		return fmt.Sprintf("fields %v, Redis %v", g, w)
	}
	for i := range w {
		if g[i][0] != w[i][0] {
			return fmt.Sprintf("field %d: %s, Redis %s", i, g[i][0], w[i][0])
		}
		switch w[i][0] {
		case "id", "addr", "laddr", "fd", "qbuf", "qbuf-free", "argv-mem", "multi-mem", "rbs", "rbp", "obl", "oll", "omem", "tot-mem", "age", "idle":
			if _, err := strconv.ParseInt(g[i][1], 10, 64); err != nil && w[i][0] != "addr" && w[i][0] != "laddr" {
				return fmt.Sprintf("%s=%s is not a number", g[i][0], g[i][1])
			}
		default:
			if g[i][1] != w[i][1] {
				return fmt.Sprintf("%s=%s, Redis %s", g[i][0], g[i][1], w[i][1])
			}
		}
	}
	return ""
}

// sameClientLines: the line of the connection that asked (the proxy may
// list more clients: the test's other connections) has Redis's fields.
func sameClientLines(t *testing.T, got, want any) bool {
	g, w := clientLines(got), clientLines(want)
	if len(w) != 1 || len(g) == 0 {
		t.Logf("%d lines, Redis %d", len(g), len(w))
		return false
	}
	for _, line := range g {
		if fieldOf(line, "name") == fieldOf(w[0], "name") && fieldOf(line, "cmd") == fieldOf(w[0], "cmd") {
			if why := clientFieldsDiffer(line, w[0]); why != "" {
				t.Log(why)
				return false
			}
			return true
		}
	}
	t.Logf("no line of the connection asking in %q", got)
	return false
}

func fieldOf(line [][2]string, k string) string {
	for _, f := range line {
		if f[0] == k {
			return f[1]
		}
	}
	return ""
}

var _ = time.Second

// CLIENT LIST lists the proxy's clients, and CLIENT KILL closes them, by
// each of its filters, with Redis's replies.
func TestClientListAndKill(t *testing.T) {
	e := newEnv(t, 3, nil)
	a, b, c, sub := dialRESP(t, e.addr), dialRESP(t, e.addr), dialRESP(t, e.addr), dialRESP(t, e.addr)
	defer a.close()
	for i, conn := range []*respConn{a, b, c, sub} {
		mustEqual(t, "SETNAME", conn.do(t, "CLIENT", "SETNAME", fmt.Sprintf("c%d", i)), "+OK\r\n")
	}
	b.do(t, "CLIENT", "SETINFO", "LIB-NAME", "mylib")
	c.do(t, "MULTI")
	c.do(t, "PING")
	sub.do(t, "SUBSCRIBE", "ch")
	lineOf := func(list any, name string) [][2]string {
		for _, l := range clientLines(list) {
			if fieldOf(l, "name") == name {
				return l
			}
		}
		t.Fatalf("no client %s in %q", name, list)
		return nil
	}
	list := func(args ...string) any {
		v, err := wire.ParseValue([]byte(a.do(t, append([]string{"CLIENT", "LIST"}, args...)...)))
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
	all := list()
	for name, want := range map[string]map[string]string{
		"c0": {"cmd": "client|list", "flags": "N", "multi": "-1", "idle": "0"},
		"c1": {"cmd": "client|setinfo", "lib-name": "mylib", "sub": "0"},
		"c2": {"cmd": "ping", "flags": "x", "multi": "1"},
		"c3": {"cmd": "subscribe", "flags": "P", "sub": "1"},
	} {
		l := lineOf(all, name)
		for k, v := range want {
			mustEqual(t, name+" "+k, fieldOf(l, k), v)
		}
		mustEqual(t, name+" laddr", fieldOf(l, "laddr"), e.addr)
	}
	if n := len(clientLines(list("TYPE", "pubsub"))); n != 1 {
		t.Fatalf("TYPE pubsub: %d clients", n)
	}
	idB := fieldOf(lineOf(all, "c1"), "id")
	mustEqual(t, "CLIENT ID", b.do(t, "CLIENT", "ID"), ":"+idB+"\r\n")
	mustEqual(t, "LIST ID", fieldOf(clientLines(list("ID", idB, "99999"))[0], "name"), "c1")

	gone := func(conn *respConn, what string) {
		t.Helper()
		_ = conn.c.SetReadDeadline(time.Now().Add(5 * time.Second))
		if _, err := conn.r.ReadByte(); err == nil {
			t.Fatalf("%s: the connection is still open", what)
		}
	}
	mustEqual(t, "KILL ID", a.do(t, "CLIENT", "KILL", "ID", idB), ":1\r\n")
	gone(b, "KILL ID")
	mustEqual(t, "KILL addr (old form)", a.do(t, "CLIENT", "KILL", fieldOf(lineOf(all, "c2"), "addr")), "+OK\r\n")
	gone(c, "KILL addr")
	mustEqual(t, "KILL ADDR gone", a.do(t, "CLIENT", "KILL", "ADDR", fieldOf(lineOf(all, "c2"), "addr")), ":0\r\n")
	mustEqual(t, "KILL TYPE pubsub", a.do(t, "CLIENT", "KILL", "TYPE", "pubsub"), ":1\r\n")
	gone(sub, "KILL TYPE")
	d := dialRESP(t, e.addr)
	d.do(t, "PING")
	mustEqual(t, "KILL LADDR", a.do(t, "CLIENT", "KILL", "LADDR", e.addr), ":1\r\n") // SKIPME yes by default
	gone(d, "KILL LADDR")
	mustEqual(t, "KILL USER SKIPME no", a.do(t, "CLIENT", "KILL", "USER", "default", "SKIPME", "no"), ":1\r\n")
	gone(a, "KILL itself")
}

// go-redis reads CLIENT LIST and CLIENT INFO of the proxy as a Redis's.
func TestGoRedisClientList(t *testing.T) {
	e := newEnv(t, 3, nil)
	ctx := context.Background()
	c := redis.NewClient(&redis.Options{Addr: e.addr, ClientName: "gr", MaxRetries: -1})
	defer c.Close()
	list, err := c.ClientList(ctx).Result()
	if err != nil || !strings.Contains(list, "name=gr ") {
		t.Fatalf("CLIENT LIST: %q, %v", list, err)
	}
	info, err := c.ClientInfo(ctx).Result()
	if err != nil {
		t.Fatalf("CLIENT INFO: %v", err)
	}
	mustEqual(t, "name", info.Name, "gr")
	mustEqual(t, "db", info.DB, 0)
	mustEqual(t, "cmd", info.LastCmd, "client|info")
	id, err := c.ClientID(ctx).Result()
	if err != nil || id != info.ID {
		t.Fatalf("CLIENT ID %d, %v; CLIENT INFO's id %d", id, err, info.ID)
	}
	mustEqual(t, "laddr", info.LAddr, e.addr)
}
