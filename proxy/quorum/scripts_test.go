package quorum

import (
	"testing"
	"time"

	"github.com/redlock-proxy/redlock-proxy/proxy/lockscripts"
	"github.com/redlock-proxy/redlock-proxy/proxy/wire"
	"github.com/redlock-proxy/redlock-proxy/redlock/engine"
)

// The replies of the lock scripts, byte for byte, from what the quorum
// answered: the spec's own replies, counts for multi-key scripts that
// answer one, and errors. The engine is one of three masters (a quorum of
// 2) that is never called: the replies need only its quorum.
func TestScriptReplies(t *testing.T) {
	e, err := engine.New([]string{"127.0.0.1:1", "127.0.0.1:2", "127.0.0.1:3"})
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	o := Op{Eng: e}
	spec := &lockscripts.Spec{Name: "t", OK: ":1\r\n", NotOwned: ":0\r\n", Absent: ":-1\r\n", NoTTL: ":-3\r\n", Reclaimed: ":2\r\n"}
	count := &lockscripts.Spec{Name: "c", OK: ":1\r\n", NotOwned: ":0\r\n", Absent: ":0\r\n", Multi: true}
	down := &engine.QuorumError{Reachable: 1, Needed: 2}
	const noQuorum = "-NOQUORUM 1 of the masters reachable, 2 needed; lock commands are refused until enough masters are back\r\n"
	release := func(r engine.ReleaseResult, err error, mirror int, dataBeside bool) string {
		return reply(func(c wire.BufConn) { o.WriteRelease(c, spec, r, err, mirror, dataBeside, nil) })
	}
	for _, c := range []struct {
		name string
		got  string
		want string
	}{
		{"release", release(engine.ReleaseResult{Deleted: 2}, nil, 0, false), ":1\r\n"},
		{"release absent", release(engine.ReleaseResult{Absent: 2, Deleted: 1}, nil, 0, false), ":-1\r\n"},
		{"release other", release(engine.ReleaseResult{Other: 1, Absent: 1, Deleted: 1}, nil, 0, false), ":0\r\n"},
		{"release down", release(engine.ReleaseResult{Deleted: 1}, down, 0, false), noQuorum},
		{"release, mirror held the token", release(engine.ReleaseResult{}, down, 1, true), ":1\r\n"},
		{"release, mirror held data", release(engine.ReleaseResult{Deleted: 3}, nil, -1, true), ":0\r\n"},
		{"release, no mirror", release(engine.ReleaseResult{Deleted: 3}, nil, 0, true), ":-1\r\n"},
		{"release, no mirror, down", release(engine.ReleaseResult{}, down, 0, true), noQuorum},
		{"release count", reply(func(c wire.BufConn) { WriteReleaseCount(c, 2, nil) }), ":2\r\n"},
		{"extend", reply(func(c wire.BufConn) { o.WriteExtend(c, spec, engine.ExtendResult{Extended: 2}, true, nil) }), ":1\r\n"},
		{"extend no TTL", reply(func(c wire.BufConn) { o.WriteExtend(c, spec, engine.ExtendResult{NoTTL: 1, Absent: 2}, false, nil) }), ":-3\r\n"},
		{"extend absent", reply(func(c wire.BufConn) { o.WriteExtend(c, spec, engine.ExtendResult{Absent: 2}, false, nil) }), ":-1\r\n"},
		{"extend other", reply(func(c wire.BufConn) { o.WriteExtend(c, spec, engine.ExtendResult{Other: 2}, false, nil) }), ":0\r\n"},
		{"extend all, count", reply(func(c wire.BufConn) { o.WriteExtendAll(c, count, 3, engine.ExtendResult{Extended: 3}, true, nil) }), ":3\r\n"},
		{"extend all, count, absent", reply(func(c wire.BufConn) { o.WriteExtendAll(c, count, 3, engine.ExtendResult{Absent: 3}, false, nil) }), ":0\r\n"},
		{"reclaimed", reply(func(c wire.BufConn) { WriteReacquired(c, spec, 1, true, nil) }), ":2\r\n"},
		{"reclaimed, count", reply(func(c wire.BufConn) { WriteReacquired(c, count, 2, true, nil) }), ":2\r\n"},
		{"not reclaimed", reply(func(c wire.BufConn) { WriteReacquired(c, spec, 1, false, nil) }), ":0\r\n"},
		{"nil", reply(func(c wire.BufConn) { WriteSpec(c, lockscripts.NilReply) }), "$-1\r\n"},
	} {
		if c.got != c.want {
			t.Errorf("%s: %q, want %q", c.name, c.got, c.want)
		}
	}

	// A release that publishes does so before its reply, and only where
	// the lock was released.
	for _, c := range []struct {
		r      engine.ReleaseResult
		mirror int
		want   bool
	}{{engine.ReleaseResult{Deleted: 2}, 0, true}, {engine.ReleaseResult{Absent: 3}, 0, false}, {engine.ReleaseResult{}, 1, true}, {engine.ReleaseResult{Deleted: 3}, -1, false}} {
		var b wire.Buf
		ran := false
		o.WriteRelease(wire.BufConn{W: &b}, spec, c.r, nil, c.mirror, c.mirror != 0, func() {
			ran = true
			if len(b.B) != 0 {
				t.Errorf("%+v: released ran after the reply %q", c.r, b.B)
			}
		})
		if ran != c.want {
			t.Errorf("%+v, mirror %d: released ran %v, want %v", c.r, c.mirror, ran, c.want)
		}
	}
}

// A script's TTL argument as the script reads it: a number in the spec's
// unit, positive where the operation takes a lock.
func TestScriptTTL(t *testing.T) {
	acquire := &lockscripts.Spec{Name: "a", Op: lockscripts.OpAcquire, TTLArg: 1, TTLUnit: time.Millisecond}
	extend := &lockscripts.Spec{Name: "e", Op: lockscripts.OpExtend, TTLArg: 0, TTLUnit: time.Second, Mode: engine.ExtendSet}
	for _, c := range []struct {
		spec *lockscripts.Spec
		argv []string
		ttl  time.Duration
		err  string
	}{
		{acquire, []string{"tok", "1500"}, 1500 * time.Millisecond, ""},
		{acquire, []string{"tok", "0"}, 0, "-ERR redlock-proxy: the 'a' script needs a TTL in ARGV[2]\r\n"},
		{acquire, []string{"tok"}, 0, "-ERR redlock-proxy: the 'a' script needs a TTL in ARGV[2]\r\n"},
		{acquire, []string{"tok", "1.5"}, 0, "-ERR redlock-proxy: the 'a' script needs a TTL in ARGV[2]\r\n"},
		{extend, []string{"-1"}, -time.Second, ""},
		{extend, []string{"7"}, 7 * time.Second, ""},
	} {
		argv := make([][]byte, len(c.argv))
		for i, a := range c.argv {
			argv[i] = []byte(a)
		}
		var ttl time.Duration
		got := reply(func(w wire.BufConn) { ttl, _ = ScriptTTL(w, c.spec, argv) })
		if got != c.err || ttl != c.ttl {
			t.Errorf("%s %q: %v %q, want %v %q", c.spec.Name, c.argv, ttl, got, c.ttl, c.err)
		}
	}
}
