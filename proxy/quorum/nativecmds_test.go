package quorum

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/redlock-proxy/redlock-proxy/proxy/wire"
	"github.com/redlock-proxy/redlock-proxy/redlock/engine"
)

// FuzzParseAcquire: any arguments either parse to a usable acquire or give
// an error reply; nothing panics.
func FuzzParseAcquire(f *testing.F) {
	f.Add("k", "1000", "TOKEN", "t", "REENTRANT")
	f.Add("k", "lease", "WAIT", "10", "token")
	f.Add("k", "-1", "", "", "")
	f.Add("k", "99999999999999999999", "WAIT", "-1", "x")
	f.Fuzz(func(t *testing.T, key, ttl, a, b, c string) {
		args := [][]byte{[]byte("lock.acquire"), []byte(key), []byte(ttl)}
		for _, x := range []string{a, b, c} {
			if x != "" {
				args = append(args, []byte(x))
			}
		}
		o, msg := ParseLockAcquire(args)
		if msg != "" {
			return
		}
		if o.Key != key || (o.TTL <= 0) != o.Lease || (o.Reentrant && o.Token == "") {
			t.Fatalf("%q parsed to %+v", args, o)
		}
	})
}

// LOCK.ACQUIRE's and LOCK.EXTEND's arguments: what each parses to, and
// the error reply of each wrong one.
func TestLockArgs(t *testing.T) {
	parse := func(s string) (LockAcquire, string) {
		var args [][]byte
		for _, a := range strings.Fields(s) {
			args = append(args, []byte(a))
		}
		return ParseLockAcquire(args)
	}
	for _, c := range []struct {
		args string
		want LockAcquire
	}{
		{"lock.acquire k 1000", LockAcquire{Key: "k", TTL: time.Second}},
		{"lock.acquire k LEASE", LockAcquire{Key: "k", Lease: true}},
		{"LOCK.ACQUIRE k 5 token t WAIT 250 reentrant", LockAcquire{Key: "k", TTL: 5 * time.Millisecond, Token: "t", Wait: 250 * time.Millisecond, Reentrant: true}},
		{"lock.acquire k lease WAIT 0", LockAcquire{Key: "k", Lease: true}},
		{"lock.acquire k 1073741824", LockAcquire{Key: "k", TTL: MaxTTLms * time.Millisecond}},
	} {
		if got, msg := parse(c.args); msg != "" || got != c.want {
			t.Errorf("%s: %+v %q, want %+v", c.args, got, msg, c.want)
		}
	}
	for _, c := range []struct{ args, want string }{
		{"lock.acquire k", "ERR wrong number of arguments for 'lock.acquire' command"},
		{"lock.acquire k x", "ERR value is not an integer or out of range"},
		{"lock.acquire k 0", "ERR invalid expire time in 'lock.acquire' command"},
		{"lock.acquire k 1073741825", "ERR invalid expire time in 'lock.acquire' command"},
		{"lock.acquire k 1000 WAIT x", "ERR timeout is not an integer or out of range"},
		{"lock.acquire k 1000 WAIT -1", "ERR timeout is negative"},
		{"lock.acquire k 1000 WAIT 1073741825", "ERR timeout is out of range"},
		{"lock.acquire k 1000 WAIT 1 WAIT 1", "ERR syntax error"},
		{"lock.acquire k 1000 TOKEN a TOKEN b", "ERR syntax error"},
		{"lock.acquire k 1000 TOKEN", "ERR syntax error"},
		{"lock.acquire k 1000 REENTRANT REENTRANT", "ERR syntax error"},
		{"lock.acquire k 1000 NX", "ERR syntax error"},
		{"lock.acquire k 1000 REENTRANT", "ERR redlock-proxy: REENTRANT needs TOKEN (the holder's own token)"},
	} {
		if _, msg := parse(c.args); msg != c.want {
			t.Errorf("%s: %q, want %q", c.args, msg, c.want)
		}
	}
	if _, msg := ParseLockAcquire([][]byte{[]byte("lock.acquire"), []byte("k"), []byte("1000"), []byte("TOKEN"), {}}); msg != "ERR redlock-proxy: TOKEN must not be empty" {
		t.Errorf("empty token: %q", msg)
	}
	for _, c := range []struct {
		arg  string
		ttl  time.Duration
		want string
	}{
		{"1500", 1500 * time.Millisecond, ""},
		{"x", 0, "ERR value is not an integer or out of range"},
		{"0", 0, "ERR invalid expire time in 'lock.extend' command"},
		{"1073741825", 0, "ERR invalid expire time in 'lock.extend' command"},
	} {
		if ttl, msg := ParseLockExtend([]byte(c.arg)); ttl != c.ttl || msg != c.want {
			t.Errorf("extend %s: %v %q, want %v %q", c.arg, ttl, msg, c.ttl, c.want)
		}
	}
}

// The native commands' replies, byte for byte, in RESP2 and (LOCK.INFO's
// maps) RESP3; a masters' own error reply is answered as it is when every
// master that failed gave one.
func TestNativeReplies(t *testing.T) {
	down := &engine.QuorumError{Reachable: 1, Needed: 2}
	const noQuorum = "-NOQUORUM 1 of the masters reachable, 2 needed; lock commands are refused until enough masters are back\r\n"
	wrongType := &engine.QuorumError{Reachable: 3, Needed: 2, Nodes: []error{masterReply("WRONGTYPE Operation against a key holding the wrong kind of value")}}
	tok := "t"
	info := engine.FenceInfo{Token: &tok, Fence: 7, Validity: 9500 * time.Millisecond, Holds: 2, Masters: []engine.FenceMaster{
		{Token: &tok, PTTL: 9800 * time.Millisecond, Fence: 7, Holds: 2, Counter: 7, Trusted: true},
		{Err: errors.New("dial tcp: refused")},
		{Err: masterReply("ERR fencing counter is not a number")},
		{PTTL: -2, Counter: 3},
	}}
	const infoBody = "$5\r\ntoken\r\n$1\r\nt\r\n$5\r\nfence\r\n:7\r\n$8\r\nvalidity\r\n:9500\r\n$5\r\nholds\r\n:2\r\n$7\r\nmasters\r\n*4\r\n" +
		"%s$6\r\nmaster\r\n:0\r\n$5\r\ntoken\r\n$1\r\nt\r\n$4\r\npttl\r\n:9800\r\n$5\r\nfence\r\n:7\r\n$5\r\nholds\r\n:2\r\n$7\r\ncounter\r\n:7\r\n$6\r\nvoting\r\n:1\r\n" +
		"%s$6\r\nmaster\r\n:1\r\n$5\r\nerror\r\n$9\r\nno answer\r\n" +
		"%s$6\r\nmaster\r\n:2\r\n$5\r\nerror\r\n$35\r\nERR fencing counter is not a number\r\n" +
		"%s$6\r\nmaster\r\n:3\r\n$5\r\ntoken\r\n%s$4\r\npttl\r\n:-2\r\n$5\r\nfence\r\n:0\r\n$5\r\nholds\r\n:0\r\n$7\r\ncounter\r\n:3\r\n$6\r\nvoting\r\n:0\r\n"
	resp3 := func(write func(c wire.BufConn)) string {
		b := wire.Buf{RESP3: true}
		write(wire.BufConn{W: &b})
		return string(b.B)
	}
	for _, c := range []struct {
		name string
		got  string
		want string
	}{
		{"granted", reply(func(c wire.BufConn) {
			WriteGrant(c, &engine.FenceGrant{Token: "t", Fence: 12, Validity: 9990 * time.Millisecond}, nil)
		}), "*3\r\n$1\r\nt\r\n:12\r\n:9990\r\n"},
		{"granted, under 1 ms left", reply(func(c wire.BufConn) {
			WriteGrant(c, &engine.FenceGrant{Token: "t", Fence: 1, Validity: 200 * time.Microsecond}, nil)
		}), "*3\r\n$1\r\nt\r\n:1\r\n:1\r\n"},
		{"not granted", reply(func(c wire.BufConn) { WriteGrant(c, nil, engine.ErrNotAcquired) }), "*-1\r\n"},
		{"not granted after WAIT", reply(func(c wire.BufConn) { WriteGrant(c, nil, nil) }), "*-1\r\n"},
		{"acquire down", reply(func(c wire.BufConn) { WriteGrant(c, nil, down) }), noQuorum},
		{"acquire, wrong type", reply(func(c wire.BufConn) { WriteGrant(c, nil, wrongType) }), "-WRONGTYPE Operation against a key holding the wrong kind of value\r\n"},
		{"released", reply(func(c wire.BufConn) { WriteLockReleased(c, true, nil) }), ":1\r\n"},
		{"not released", reply(func(c wire.BufConn) { WriteLockReleased(c, false, nil) }), ":0\r\n"},
		{"release down", reply(func(c wire.BufConn) { WriteLockReleased(c, false, down) }), noQuorum},
		{"extended", reply(func(c wire.BufConn) { WriteLockExtended(c, 4999*time.Millisecond, true, nil) }), ":4999\r\n"},
		{"extended, under 1 ms", reply(func(c wire.BufConn) { WriteLockExtended(c, 0, true, nil) }), ":1\r\n"},
		{"not extended", reply(func(c wire.BufConn) { WriteLockExtended(c, 0, false, nil) }), ":0\r\n"},
		{"extend down", reply(func(c wire.BufConn) { WriteLockExtended(c, 0, false, down) }), noQuorum},
		{"info", reply(func(c wire.BufConn) { WriteLockInfo(c, info, nil) }),
			"*10\r\n" + fmtInfo(infoBody, "*14\r\n", "*4\r\n", "*4\r\n", "*14\r\n", "$-1\r\n")},
		{"info, RESP3", resp3(func(c wire.BufConn) { WriteLockInfo(c, info, nil) }),
			"%5\r\n" + fmtInfo(infoBody, "%7\r\n", "%2\r\n", "%2\r\n", "%7\r\n", "_\r\n")},
		{"info, none held", reply(func(c wire.BufConn) { WriteLockInfo(c, engine.FenceInfo{Validity: -2}, nil) }),
			"*10\r\n$5\r\ntoken\r\n$-1\r\n$5\r\nfence\r\n:0\r\n$8\r\nvalidity\r\n:-2\r\n$5\r\nholds\r\n:0\r\n$7\r\nmasters\r\n*0\r\n"},
		{"info down", reply(func(c wire.BufConn) { WriteLockInfo(c, info, down) }), noQuorum},
	} {
		if c.got != c.want {
			t.Errorf("%s: %q, want %q", c.name, c.got, c.want)
		}
	}
}

// fmtInfo fills infoBody's headers: four maps', then a nil.
func fmtInfo(body string, heads ...string) string {
	for _, h := range heads {
		body = strings.Replace(body, "%s", h, 1)
	}
	return body
}
