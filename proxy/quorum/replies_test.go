package quorum

import (
	"errors"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/redlock-proxy/redlock-proxy/proxy/wire"
	"github.com/redlock-proxy/redlock-proxy/redlock/engine"
)

// reply is what write answers, in RESP2.
func reply(write func(c wire.BufConn)) string {
	var b wire.Buf
	write(wire.BufConn{W: &b})
	return string(b.B)
}

// The replies of reads and writes of lock keys, byte for byte: a read that
// fails answers the data's answer where the backend holds data beside the
// locks, the error otherwise; a write that a quorum did not settle on
// masters that held the key is an error there too.
func TestKeyReplies(t *testing.T) {
	down := &engine.QuorumError{Reachable: 1, Needed: 2}
	const noQuorum = "-NOQUORUM 1 of the masters reachable, 2 needed; lock commands are refused until enough masters are back\r\n"
	held := engine.KeyState{Exists: true, Value: "tok", PTTL: 1499 * time.Millisecond}
	for _, c := range []struct {
		name string
		got  string
		want string
	}{
		{"get held", reply(func(c wire.BufConn) { WriteGet(c, held, "string", nil, false) }), "$3\r\ntok\r\n"},
		{"get absent", reply(func(c wire.BufConn) { WriteGet(c, engine.KeyState{}, "string", nil, false) }), "$-1\r\n"},
		{"get hash", reply(func(c wire.BufConn) { WriteGet(c, held, "hash", nil, false) }), "-" + WrongType + "\r\n"},
		{"get down", reply(func(c wire.BufConn) { WriteGet(c, held, "", down, false) }), noQuorum},
		{"get down, data beside", reply(func(c wire.BufConn) { WriteGet(c, held, "", down, true) }), "$-1\r\n"},
		{"pttl", reply(func(c wire.BufConn) { WritePTTL(c, held, nil, false, false) }), ":1499\r\n"},
		{"ttl rounds", reply(func(c wire.BufConn) { WritePTTL(c, held, nil, true, false) }), ":1\r\n"},
		{"pttl absent", reply(func(c wire.BufConn) { WritePTTL(c, engine.KeyState{PTTL: -2}, nil, false, false) }), ":-2\r\n"},
		{"pttl down, data beside", reply(func(c wire.BufConn) { WritePTTL(c, held, down, false, true) }), ":-2\r\n"},
		{"expire applied", reply(func(c wire.BufConn) { WriteExpire(c, true, 3, nil, false, false) }), ":1\r\n"},
		{"expire not", reply(func(c wire.BufConn) { WriteExpire(c, false, 0, nil, false, false) }), ":0\r\n"},
		{"expire down", reply(func(c wire.BufConn) { WriteExpire(c, false, 0, down, false, false) }), noQuorum},
		{"expire down, data beside", reply(func(c wire.BufConn) { WriteExpire(c, false, 0, down, true, true) }), ":1\r\n"},
		{"expire down on holders, data beside", reply(func(c wire.BufConn) { WriteExpire(c, false, 1, down, true, true) }), noQuorum},
		{"hget", reply(func(c wire.BufConn) {
			WriteHashField(c, engine.HashState{Type: "hash", Fields: map[string]string{"f": "2"}}, nil, []byte("f"), false)
		}), "$1\r\n2\r\n"},
		{"hexists", reply(func(c wire.BufConn) {
			WriteHashField(c, engine.HashState{Type: "none"}, nil, []byte("f"), true)
		}), ":0\r\n"},
	} {
		if c.got != c.want {
			t.Errorf("%s: %q, want %q", c.name, c.got, c.want)
		}
	}
	for _, c := range []struct {
		ok, dataBeside, onBackend bool
		ones                      int
		err                       error
		counted                   bool
		fails                     bool
	}{
		{ok: true, counted: true},
		{},
		{err: down, fails: true},
		{dataBeside: true, onBackend: true, err: down, counted: true},
		{dataBeside: true, ones: 1, err: down, fails: true},
		{dataBeside: true, ok: true, counted: true},
	} {
		counted, err := Deleted(c.ok, c.ones, c.err, c.dataBeside, c.onBackend)
		if counted != c.counted || (err != nil) != c.fails {
			t.Errorf("Deleted(%+v) = %v, %v", c, counted, err)
		}
	}
}

// SET … NX's replies: granted or not, the previous value with GET, or why
// not; and with an expiry already past, Redis's answers and the outcome
// counted.
func TestSetReplies(t *testing.T) {
	prev := "old"
	ok := func(c wire.BufConn) func(bool) {
		return func(granted bool) {
			if granted {
				c.WriteString("OK")
			} else {
				c.WriteNull()
			}
		}
	}
	for _, c := range []struct {
		name string
		r    engine.AcquireResult
		err  error
		get  bool
		want string
	}{
		{"granted", engine.AcquireResult{}, nil, false, "+OK\r\n"},
		{"taken", engine.AcquireResult{}, engine.ErrNotAcquired, false, "$-1\r\n"},
		{"granted, get", engine.AcquireResult{}, nil, true, "$-1\r\n"},
		{"taken, get", engine.AcquireResult{Prev: &prev}, engine.ErrNotAcquired, true, "$3\r\nold\r\n"},
		{"taken, get, long", engine.AcquireResult{PrevTooLarge: &engine.LargeValue{Len: 9}}, engine.ErrNotAcquired, true,
			"-" + TooLargeReply(9, 4) + "\r\n"},
		{"taken, get, no quorum of values", engine.AcquireResult{}, engine.ErrNotAcquired, true,
			"-TRYAGAIN redlock-proxy: no value holds a quorum of masters; lock not acquired\r\n"},
		{"failed", engine.AcquireResult{}, errors.New("x"), false, "-ERR redlock-proxy: quorum operation failed\r\n"},
	} {
		if got := reply(func(w wire.BufConn) { WriteAcquired(w, c.r, c.err, c.get, 4, ok(w)) }); got != c.want {
			t.Errorf("%s: %q, want %q", c.name, got, c.want)
		}
	}
	for _, c := range []struct {
		k       engine.KeyState
		typ     string
		get     bool
		want    string
		outcome error
		counted bool
	}{
		{engine.KeyState{}, "string", false, "+OK\r\n", engine.ErrValiditySpent, true},
		{engine.KeyState{}, "string", true, "$-1\r\n", engine.ErrValiditySpent, true},
		{engine.KeyState{Exists: true, Value: "v"}, "string", false, "$-1\r\n", engine.ErrNotAcquired, true},
		{engine.KeyState{Exists: true, Value: "v"}, "string", true, "$1\r\nv\r\n", engine.ErrNotAcquired, true},
		{engine.KeyState{Exists: true}, "hash", true, "-" + WrongType + "\r\n", nil, false},
	} {
		var outcome error
		var counted bool
		got := reply(func(w wire.BufConn) { outcome, counted = WriteSetNXPast(w, c.k, c.typ, nil, c.get) })
		if got != c.want || outcome != c.outcome || counted != c.counted {
			t.Errorf("%+v: %q %v %v", c, got, outcome, counted)
		}
	}
}

// A master's answer as the client's reply.
func TestWriteResult(t *testing.T) {
	o := Op{MaxValue: 4}
	for _, c := range []struct {
		r    engine.Result
		want string
	}{
		{engine.Result{Err: redis.Nil}, "$-1\r\n"},
		{engine.Result{Val: "OK"}, "+OK\r\n"},
		{engine.Result{Val: "v"}, "$1\r\nv\r\n"},
		{engine.Result{Val: int64(3)}, ":3\r\n"},
		{engine.Result{Val: engine.LargeValue{Len: 9}}, "-" + TooLargeReply(9, 4) + "\r\n"},
	} {
		if got := reply(func(w wire.BufConn) { o.WriteResult(w, c.r) }); got != c.want {
			t.Errorf("%+v: %q, want %q", c.r, got, c.want)
		}
	}
}

// SETEX's, PSETEX's and EXPIRE's arguments, with Redis's errors.
func TestParseExpiries(t *testing.T) {
	now := time.Unix(1000, 0)
	bs := func(a ...string) [][]byte {
		out := make([][]byte, len(a))
		for i, s := range a {
			out[i] = []byte(s)
		}
		return out
	}
	for _, c := range []struct {
		args []string
		ttl  time.Duration
		msg  string
	}{
		{[]string{"SETEX", "k", "2", "v"}, 2 * time.Second, ""},
		{[]string{"psetex", "k", "5", "v"}, 5 * time.Millisecond, ""},
		{[]string{"SETEX", "k", "0", "v"}, 0, "ERR invalid expire time in 'setex' command"},
		{[]string{"PSetEx", "k", "-1", "v"}, 0, "ERR invalid expire time in 'psetex' command"},
		{[]string{"setex", "k", "x", "v"}, 0, ErrNotInteger},
	} {
		if ttl, msg := ParseSetEx(bs(c.args...), now); ttl != c.ttl || msg != c.msg {
			t.Errorf("%q: %v %q", c.args, ttl, msg)
		}
	}
	if ttl, msg := ParseExpire("pexpireat", []byte("1500000"), now); ttl != 500*time.Second || msg != "" {
		t.Errorf("pexpireat: %v %q", ttl, msg)
	}
	if _, msg := ParseExpire("expire", []byte(" 1"), now); msg != ErrNotInteger {
		t.Errorf("expire ' 1': %q", msg)
	}
}
