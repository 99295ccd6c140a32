package proxy

import (
	"bufio"
	"bytes"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/redlock-proxy/redlock-proxy/proxy/quorum"
	"github.com/redlock-proxy/redlock-proxy/proxy/wire"
	"github.com/rs/zerolog"
	"github.com/tidwall/redcon"

	"github.com/redlock-proxy/redlock-proxy/proxy/lockscripts"
)

// recordConn is a client connection that records the replies written to it.
type recordConn struct {
	wire.Discard
	w      *redcon.Writer
	buf    bytes.Buffer
	ctx    any
	closed bool
}

func newRecordConn() *recordConn {
	c := &recordConn{}
	c.w = redcon.NewWriter(&c.buf)
	return c
}

func (c *recordConn) Close() error                { c.closed = true; return nil }
func (c *recordConn) WriteError(m string)         { c.w.WriteError(m) }
func (c *recordConn) WriteString(m string)        { c.w.WriteString(m) }
func (c *recordConn) WriteBulk(b []byte)          { c.w.WriteBulk(b) }
func (c *recordConn) WriteBulkString(s string)    { c.w.WriteBulkString(s) }
func (c *recordConn) WriteInt(n int)              { c.w.WriteInt(n) }
func (c *recordConn) WriteInt64(n int64)          { c.w.WriteInt64(n) }
func (c *recordConn) WriteUint64(n uint64)        { c.w.WriteUint64(n) }
func (c *recordConn) WriteArray(n int)            { c.w.WriteArray(n) }
func (c *recordConn) WriteNull()                  { c.w.WriteNull() }
func (c *recordConn) WriteRaw(b []byte)           { c.w.WriteRaw(b) }
func (c *recordConn) WriteAny(v any)              { c.w.WriteAny(v) }
func (c *recordConn) Context() any                { return c.ctx }
func (c *recordConn) SetContext(v any)            { c.ctx = v }
func (c *recordConn) RemoteAddr() string          { return "127.0.0.1:1" }
func (c *recordConn) Detach() redcon.DetachedConn { return nil }

func (c *recordConn) replies() ([]byte, error) {
	err := c.w.Flush()
	return c.buf.Bytes(), err
}

// unreachableServer is a Server whose masters and backend refuse every
// connection at once: every command runs its whole classification and
// error path without a network.
func unreachableServer(t testing.TB) *Server {
	cfg := DefaultConfig()
	cfg.Proxy.Listen = "127.0.0.1:0"
	cfg.Proxy.LockKeys = []string{"lock:*", "k"}
	cfg.Proxy.PassthroughTimeout = Duration{50 * time.Millisecond}
	cfg.Redlock.Masters = []string{"127.0.0.1:1", "127.0.0.1:2", "127.0.0.1:3"}
	cfg.Redlock.NodeTimeout = Duration{20 * time.Millisecond}
	cfg.Redlock.RetryCount = 0
	cfg.Redlock.RestartGuard = false
	s, err := New(cfg, zerolog.Nop())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	return s
}

// fuzzNames are the command names the fuzzer picks from: every command the
// proxy handles, and a few that pass through.
func fuzzNames() []string {
	names := []string{"incr", "hset", "keys", "xadd", "object"}
	for n := range commands {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

// fuzzWords are argument values with a meaning to some command.
var fuzzWords = func() []string {
	w := []string{"", "k", "lock:a", "other", "NX", "XX", "PX", "EX", "PXAT", "EXAT", "GET", "KEEPTTL",
		"0", "1", "2", "-1", "10000", "9223372036854775807", "-9223372036854775808", "99999999999999999999",
		"LOAD", "EXISTS", "FLUSH", "SETNAME", "GETNAME", "SETINFO", "lib-name", "ID", "INFO", "3", "AUTH", "redlock"}
	w = append(w, lockscripts.WireSHAs()...)
	sort.Strings(w)
	return w
}()

// fuzzArgs decodes a command: name selects the command; data holds the
// arguments separated by 0x00, and an argument of one byte below 0x20
// stands for one of fuzzWords.
func fuzzArgs(names []string, name uint8, data []byte) [][]byte {
	n := []byte(names[int(name)%len(names)])
	if name&0x80 != 0 {
		n = bytes.ToUpper(n)
	}
	args := [][]byte{n}
	if len(data) == 0 {
		return args
	}
	for _, a := range bytes.Split(data, []byte{0}) {
		if len(a) == 1 && a[0] < 0x20 {
			a = []byte(fuzzWords[int(a[0])%len(fuzzWords)])
		}
		args = append(args, a)
		if len(args) == 24 {
			break
		}
	}
	return args
}

// FuzzDispatch runs arbitrary argument vectors, in and out of MULTI, through
// the proxy's command dispatch: no command panics, and each writes exactly
// one well-formed reply.
func FuzzDispatch(f *testing.F) {
	s := unreachableServer(f)
	names := fuzzNames()
	idx := func(n string) uint8 { return uint8(sort.SearchStrings(names, n)) }
	f.Add(idx("set"), []byte("k\x00t\x00\x04\x00\x06"), false)
	f.Add(idx("eval"), []byte("return 1"), true)
	f.Add(idx("eval"), []byte("return 1\x000"), false)
	f.Add(idx("evalsha"), []byte("\x1f\x001\x00lock:a\x00tok"), false)
	f.Add(idx("del"), []byte("k\x00lock:a\x00x"), true)
	f.Add(idx("exists"), []byte{}, false)
	f.Add(idx("client"), []byte("\x18\x00\x19\x00v"), false)
	f.Add(idx("hello"), []byte("3"), false)
	f.Add(idx("script"), []byte("\x13\x00return 1"), false)
	f.Add(idx("pexpire"), []byte("k\x00\x12"), false)
	f.Add(idx("multi"), []byte{}, false)
	f.Fuzz(func(t *testing.T, name uint8, data []byte, multi bool) {
		args := fuzzArgs(names, name, data)
		c := newRecordConn()
		st := &client{id: 1, multi: multi}
		c.SetContext(st)
		s.handle(c, redcon.Command{Args: args})
		if st.pinned != nil {
			st.pinned.Close()
		}
		out, err := c.replies()
		if err != nil {
			t.Fatal(err)
		}
		r := bufio.NewReader(bytes.NewReader(out))
		if _, err := wire.ReadReply(r, nil); err != nil {
			t.Fatalf("%q: reply %q is not one RESP reply: %v", args, out, err)
		}
		// As on Redis, an UNSUBSCRIBE answers once per name it was given.
		replies := 1
		if name := strings.ToLower(string(args[0])); strings.HasSuffix(name, "unsubscribe") && !multi && len(args) > 2 {
			replies = len(args) - 1
		}
		for i := 1; i < replies; i++ {
			if _, err := wire.ReadReply(r, nil); err != nil {
				t.Fatalf("%q: reply %d of %q is not a RESP reply: %v", args, i+1, out, err)
			}
		}
		if r.Buffered() != 0 {
			t.Fatalf("%q: more than %d replies: %q", args, replies, out)
		}
	})
}

// FuzzClassify checks the parsing helpers every command goes through on
// arbitrary input: they do not panic, and agree with each other.
func FuzzClassify(f *testing.F) {
	s := unreachableServer(f)
	names := fuzzNames()
	f.Add(uint8(0), []byte("k\x00t\x00NX\x00PX\x0010"))
	f.Add(uint8(3), []byte("x"))
	f.Fuzz(func(t *testing.T, name uint8, data []byte) {
		args := fuzzArgs(names, name, data)
		e := lookup(args[0])
		n := nameOf(e, args[0])
		if n != strings.ToLower(string(args[0])) {
			t.Fatalf("nameOf(lookup(%q)) = %q", args[0], n)
		}
		if want := commands[n]; e != want {
			t.Fatalf("lookup(%q) = %v, want %v", args[0], e, want)
		}
		_ = s.touchesLockKey(n, args)
		o, msg := quorum.ParseSet(args)
		if msg == "" && len(args) < 3 {
			t.Fatalf("parseSet accepted %q", args)
		}
		if msg == "" && o.Expire != "" && o.N <= 0 {
			t.Fatalf("parseSet accepted a non-positive expiry in %q", args)
		}
		for _, a := range args {
			_ = lockscripts.Builtin(string(a))
			_, _ = parseInt(a)
		}
	})
}

// A command handler that panics closes its client with an error; the
// server goes on.
func TestDispatchRecoversPanic(t *testing.T) {
	s := unreachableServer(t)
	c := newRecordConn()
	c.SetContext(&client{id: 1})
	commands["test-panic"] = &command{name: "test-panic", h: func(*Server, redcon.Conn, *client, [][]byte) route { panic("boom") }}
	defer delete(commands, "test-panic")
	s.dispatch(c, redcon.Command{Args: [][]byte{[]byte("test-panic")}})
	out, _ := c.replies()
	if !c.closed || !strings.HasPrefix(string(out), "-ERR redlock-proxy: internal error") {
		t.Fatalf("closed=%v reply %q", c.closed, out)
	}
}

// EVAL with too few arguments inside MULTI is answered with an error (it
// once indexed past the arguments), and the server goes on.
func TestDispatchSurvivesEvalInMulti(t *testing.T) {
	s := unreachableServer(t)
	c := newRecordConn()
	c.SetContext(&client{id: 1, multi: true})
	s.dispatch(c, redcon.Command{Args: [][]byte{[]byte("EVAL"), []byte("return 1")}})
	out, _ := c.replies()
	if !strings.HasPrefix(string(out), "-") {
		t.Fatalf("reply %q, want an error", out)
	}
}

// lookup finds the commands the proxy handles in any case, and nothing
// else; nameOf gives their names as lowerSlow reads them; neither
// allocates for a name of ASCII letters.
func TestLookupNames(t *testing.T) {
	for _, in := range []string{"SET", "set", "SeT", "EVALSHA", "incr", "INCR", "X", "",
		"LOCK.ACQUIRE", strings.Repeat("A", 30), "ÄSET", "SÉT", "\xffGET", "get\x00"} {
		e := lookup([]byte(in))
		want := lowerSlow([]byte(in))
		if got := nameOf(e, []byte(in)); got != want {
			t.Fatalf("nameOf(lookup(%q)) = %q, want %q", in, got, want)
		}
		if e != commands[want] || (e == nil) != (commands[want] == nil) {
			t.Fatalf("lookup(%q) = %v, want the entry of %q", in, e, want)
		}
	}
	for _, in := range []string{"SET", "get", "EvalSha", "LOCK.ACQUIRE", "incr", "HSET"} {
		b := []byte(in)
		if n := testing.AllocsPerRun(100, func() { _ = lookup(b) }); n != 0 {
			t.Fatalf("lookup(%q): %v allocations", in, n)
		}
	}
	if e := lookup([]byte("GeT")); e == nil || e.name != "get" || !e.has(fPassGetSet) || e.has(fReleases) || e.arity != 2 {
		t.Fatalf("lookup(GeT) = %+v", e)
	}
	if e := lookup([]byte("SETNX")); e == nil || !e.has(fReleases) || e.has(fPassGetSet) || e.arity != 3 {
		t.Fatalf("lookup(SETNX) = %+v", e)
	}
}

// BenchmarkRefusalGetSet is the boundary's check of a plain GET and SET,
// which every pipelined passthrough command of the kind pays.
func BenchmarkRefusalGetSet(b *testing.B) {
	s := unreachableServer(b)
	st := &client{authed: true}
	get := [][]byte{[]byte("GET"), []byte("key:000000000123")}
	set := [][]byte{[]byte("SET"), []byte("key:000000000123"), []byte("xxx")}
	eg, es := lookup(get[0]), lookup(set[0])
	for b.Loop() {
		if s.refusal(st, eg, get) != "" || s.refusal(st, es, set) != "" {
			b.Fatal("refused")
		}
	}
}

// The command table's rows agree with themselves: a row that checks its
// first key has one by its arity, the keys of a row the quorum serves are
// where its row says, and a command with too few or too many arguments is
// answered Redis's error from its row, before its handler runs.
func TestTableRows(t *testing.T) {
	for _, e := range table {
		if e.has(fKey1) && (e.arity > -2 && e.arity < 2) {
			t.Errorf("%s: checks args[1] with arity %d", e.name, e.arity)
		}
		if e.where == 0 {
			t.Errorf("%s: no place", e.name)
		}
		if e.h == nil && e.where != refused && e.where != onOwnConn {
			t.Errorf("%s: no handler, and not routed from its row", e.name)
		}
	}
	b := func(s ...string) [][]byte {
		out := make([][]byte, len(s))
		for i, a := range s {
			out[i] = []byte(a)
		}
		return out
	}
	for _, c := range []struct {
		args, want [][]byte
	}{
		{b("GET", "k"), b("k")},
		{b("SET", "k", "v", "NX"), b("k")},
		{b("DEL", "a", "b", "c"), b("a", "b", "c")},
		{b("EVALSHA", "sha", "2", "b", "c", "argv"), b("b", "c")},
		{b("EVAL", "return 1", "3", "b", "c"), nil},
		{b("INCR", "k"), nil},
	} {
		got := lockKeysOf(strings.ToLower(string(c.args[0])), c.args)
		if !slices.EqualFunc(got, c.want, bytes.Equal) {
			t.Errorf("lockKeysOf(%q) = %q, want %q", c.args, got, c.want)
		}
	}
	s := unreachableServer(t)
	for _, args := range [][][]byte{b("GET"), b("EVAL", "return 1"), b("PERSIST", "a", "b"), b("LOCK.INFO")} {
		c := newRecordConn()
		c.SetContext(&client{id: 1, authed: true})
		s.dispatch(c, redcon.Command{Args: args})
		out, _ := c.replies()
		want := "-ERR wrong number of arguments for '" + strings.ToLower(string(args[0])) + "' command\r\n"
		if string(out) != want {
			t.Errorf("%q: reply %q, want %q", args, out, want)
		}
	}
}
