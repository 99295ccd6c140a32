package quorum

import (
	"strconv"
	"testing"
	"time"

	"github.com/redlock-proxy/redlock-proxy/proxy/lockscripts"
	"github.com/redlock-proxy/redlock-proxy/proxy/wire"
	"github.com/redlock-proxy/redlock-proxy/redlock/engine"
)

// The replies of Redisson's hash-lock scripts, byte for byte, as the
// scripts answer on one Redis: an acquire nil or the holder's PTTL, a
// renewal or forced unlock 1 or 0, a release 1 (freed), 0 (holds left) or
// nil (not held), a latched release the latch's value, the batched
// renewal 1 or 0 per key; and whether a release publishes the unlock.
func TestHashReplies(t *testing.T) {
	down := &engine.QuorumError{Reachable: 1, Needed: 2}
	const noQuorum = "-NOQUORUM 1 of the masters reachable, 2 needed; lock commands are refused until enough masters are back\r\n"
	released := func(r engine.HashRelease, err error) string {
		return reply(func(c wire.BufConn) { WriteHashReleased(c, r, err) })
	}
	for _, c := range []struct {
		name string
		got  string
		want string
	}{
		{"acquired", reply(func(c wire.BufConn) { WriteHashAcquired(c, engine.HashResult{Holds: 1}, nil) }), "$-1\r\n"},
		{"held by another", reply(func(c wire.BufConn) {
			WriteHashAcquired(c, engine.HashResult{PTTL: 29999 * time.Millisecond}, engine.ErrNotAcquired)
		}), ":29999\r\n"},
		{"split vote", reply(func(c wire.BufConn) { WriteHashAcquired(c, engine.HashResult{}, engine.ErrNotAcquired) }), ":1\r\n"},
		{"held under 1 ms", reply(func(c wire.BufConn) {
			WriteHashAcquired(c, engine.HashResult{PTTL: 300 * time.Microsecond}, engine.ErrNotAcquired)
		}), ":1\r\n"},
		{"held, no expiry", reply(func(c wire.BufConn) { WriteHashAcquired(c, engine.HashResult{PTTL: -1}, engine.ErrNotAcquired) }), ":-1\r\n"},
		{"acquire down", reply(func(c wire.BufConn) { WriteHashAcquired(c, engine.HashResult{}, down) }), noQuorum},
		{"renewed", reply(func(c wire.BufConn) { WriteDone(c, true, nil) }), ":1\r\n"},
		{"not renewed", reply(func(c wire.BufConn) { WriteDone(c, false, nil) }), ":0\r\n"},
		{"renew down", reply(func(c wire.BufConn) { WriteDone(c, false, down) }), noQuorum},
		{"freed", released(engine.HashRelease{Held: true, Freed: true}, nil), ":1\r\n"},
		{"holds left", released(engine.HashRelease{Held: true, Holds: 1}, nil), ":0\r\n"},
		{"not held", released(engine.HashRelease{}, nil), "$-1\r\n"},
		{"latched 1", released(engine.HashRelease{Latched: true, LatchVal: 1}, nil), ":1\r\n"},
		{"latched 0", released(engine.HashRelease{Latched: true}, nil), ":0\r\n"},
		{"latched, not a number", released(engine.HashRelease{Latched: true, LatchNil: true}, nil), "$-1\r\n"},
		{"release down", released(engine.HashRelease{}, down), noQuorum},
		{"batch", reply(func(c wire.BufConn) { WriteHashBatch(c, []bool{true, false, true}, nil) }), "*3\r\n:1\r\n:0\r\n:1\r\n"},
		{"batch down", reply(func(c wire.BufConn) { WriteHashBatch(c, []bool{true, false}, down) }), noQuorum},
	} {
		if c.got != c.want {
			t.Errorf("%s: %q, want %q", c.name, c.got, c.want)
		}
	}
	for _, c := range []struct {
		r    engine.HashRelease
		err  error
		want bool
	}{
		{engine.HashRelease{Held: true, Freed: true}, nil, true},
		{engine.HashRelease{Held: true}, nil, false},
		{engine.HashRelease{}, nil, false},
		{engine.HashRelease{Latched: true, LatchVal: 1, Held: true, Freed: true}, nil, false},
		{engine.HashRelease{Held: true, Freed: true}, down, false},
	} {
		if got := HashUnlocked(c.r, c.err); got != c.want {
			t.Errorf("HashUnlocked(%+v, %v) = %v, want %v", c.r, c.err, got, c.want)
		}
	}
}

// A hash-lock script's arguments: the number of keys, the publishing
// command, the latch and the batched renewal's holders, with the error
// each answers, byte for byte.
func TestHashArgs(t *testing.T) {
	acquire := &lockscripts.Spec{Name: "a", Op: lockscripts.OpHashAcquire}
	fixed := &lockscripts.Spec{Name: "r", Op: lockscripts.OpHashRelease, Form: lockscripts.HashPublishFixed}
	arg := &lockscripts.Spec{Name: "r", Op: lockscripts.OpHashRelease, Form: lockscripts.HashPublishArg}
	latch := &lockscripts.Spec{Name: "l", Op: lockscripts.OpHashRelease, Form: lockscripts.HashPublishLatch}
	force := &lockscripts.Spec{Name: "f", Op: lockscripts.OpHashForceUnlock}
	batch := &lockscripts.Spec{Name: "b", Op: lockscripts.OpHashExtendBatch}
	args := func(s ...string) [][]byte {
		out := make([][]byte, len(s))
		for i, a := range s {
			out[i] = []byte(a)
		}
		return out
	}
	// Each helper answers the reply, then what was read ("ok" or what
	// it returned).
	keys := func(spec *lockscripts.Spec, n int) string {
		var ok bool
		return reply(func(c wire.BufConn) { ok = HashKeys(c, spec, n) }) + strconv.FormatBool(ok)
	}
	pub := func(spec *lockscripts.Spec, argv [][]byte, i int) string {
		var publish string
		var ok bool
		return reply(func(c wire.BufConn) { publish, ok = PublishCommand(c, spec, argv, i) }) + publish + strconv.FormatBool(ok)
	}
	for _, c := range []struct {
		name, got, want string
	}{
		{"acquire, 1 key", keys(acquire, 1), "true"},
		{"acquire, 2 keys", keys(acquire, 2), "-ERR redlock-proxy: the 'a' script takes 1 keys\r\nfalse"},
		{"release, 2 keys", keys(fixed, 2), "true"},
		{"latch release, 2 keys", keys(latch, 2), "-ERR redlock-proxy: the 'l' script takes 3 keys\r\nfalse"},
		{"force unlock, 1 key", keys(force, 1), "-ERR redlock-proxy: the 'f' script takes 2 keys\r\nfalse"},
		{"batch, 5 keys", keys(batch, 5), "true"},
		{"fixed", pub(fixed, args("0", "30000", "h"), 3), "publishtrue"},
		{"spublish", pub(arg, args("0", "30000", "h", "SPUBLISH"), 3), "spublishtrue"},
		{"force unlock", pub(force, args("0", "PUBLISH"), 1), "publishtrue"},
		{"other", pub(arg, args("0", "30000", "h", "set"), 3), "-ERR redlock-proxy: the 'r' script publishes with PUBLISH or SPUBLISH in ARGV[4]\r\nfalse"},
		{"missing", pub(force, args("0"), 1), "-ERR redlock-proxy: the 'f' script publishes with PUBLISH or SPUBLISH in ARGV[2]\r\nfalse"},
	} {
		if c.got != c.want {
			t.Errorf("%s: %q, want %q", c.name, c.got, c.want)
		}
	}

	var ok bool

	var key string
	var n int64
	lk := func(spec *lockscripts.Spec, argv [][]byte) string {
		return reply(func(c wire.BufConn) { key, n, ok = HashLatch(c, spec, []string{"k", "ch", "latch"}, argv) })
	}
	if got := lk(arg, args("0", "30000", "h", "publish")); got != "" || key != "" || n != 0 || !ok {
		t.Errorf("no latch: %q %q %d %v", got, key, n, ok)
	}
	if got := lk(latch, args("0", "30000", "h", "publish", "13500")); got != "" || key != "latch" || n != 13500 || !ok {
		t.Errorf("latch: %q %q %d %v", got, key, n, ok)
	}
	for _, v := range []string{"0", "-1", "x", " 1"} {
		if got := lk(latch, args("0", "30000", "h", "publish", v)); got != "-ERR redlock-proxy: the 'l' script needs the latch's time in ARGV[5]\r\n" || ok {
			t.Errorf("latch time %q: %q %v", v, got, ok)
		}
	}

	var holders []string
	hs := func(n int, argv [][]byte) string {
		return reply(func(c wire.BufConn) { holders, ok = HashHolders(c, batch, n, argv) })
	}
	if got := hs(2, args("30000", "h1", "h2", "extra")); got != "" || !ok || len(holders) != 2 || holders[0] != "h1" || holders[1] != "h2" {
		t.Errorf("holders: %q %q %v", got, holders, ok)
	}
	if got := hs(2, args("30000", "h1")); got != "-ERR redlock-proxy: the 'b' script needs a holder in ARGV for each key\r\n" || ok {
		t.Errorf("too few holders: %q %v", got, ok)
	}
}
