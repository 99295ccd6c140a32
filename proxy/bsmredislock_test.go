package proxy_test

import (
	"context"
	"crypto/sha1"
	"encoding/hex"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/redlock-proxy/redlock-proxy/internal/redistest"
)

// bsm/redislock 0.10's scripts (internal/redistest has their exact
// texts; compat/bsmredislock drives the library itself). Each takes any
// number of keys and answers +OK or nil: obtain ARGV = value, token
// length, TTL (ms); release ARGV = value; refresh ARGV = value, TTL;
// pttl ARGV = value, answering the least positive PTTL (0 when none).
var (
	bsmObtain  = redistest.BsmObtain
	bsmRelease = redistest.BsmRelease
	bsmRefresh = redistest.BsmRefresh
	bsmPTTL    = redistest.BsmPTTL
)

// wireSHA is the SHA1 a library sends by EVALSHA for src.
func wireSHA(src string) string {
	h := sha1.Sum([]byte(src))
	return hex.EncodeToString(h[:])
}

// bsmArgs is an EVALSHA of script over keys with argv.
func bsmArgs(script string, keys []string, argv ...string) []string {
	out := append([]string{"EVALSHA", wireSHA(script), strconv.Itoa(len(keys))}, keys...)
	return append(out, argv...)
}

// The library's scripts, by EVALSHA of their SHA1 on a proxy that never
// saw them (a plain Redis is sent SCRIPT LOAD first), answer as one Redis
// running them, byte for byte in RESP2 and in RESP3 (PTTLs by type):
// obtain of free keys, refused while another holds one of them, the
// holder's obtain again (its token with new metadata), refused when one of
// its keys is not held (one Redis refuses to take over an absent key);
// pttl, refresh and release by the value, by another value, and over a
// key that is not held; one key alike. Nothing is left on the masters.
func TestBsmRedislockLikeRedis(t *testing.T) {
	e := newEnv(t, 3, nil)
	plain := startPlain(t)
	pc := redis.NewClient(&redis.Options{Addr: plain})
	for _, src := range []string{bsmObtain, bsmRelease, bsmRefresh, bsmPTTL} {
		if err := pc.ScriptLoad(context.Background(), src).Err(); err != nil {
			t.Fatal(err)
		}
	}
	pc.Close()
	for _, sha := range []string{wireSHA(bsmObtain), wireSHA(bsmRelease), wireSHA(bsmRefresh), wireSHA(bsmPTTL)} {
		ex, err := e.do("SCRIPT", "EXISTS", sha)
		if err != nil || ex.([]any)[0] != int64(1) {
			t.Fatalf("SCRIPT EXISTS %s: %v %v", sha, ex, err)
		}
	}
	var used []string
	for _, proto := range []string{"2", "3"} {
		k1, k2, k3, k4 := e.key("a"+proto), e.key("b"+proto), e.key("c"+proto), e.key("d"+proto)
		used = append(used, k1, k2, k3, k4)
		ab, bc, ac := []string{k1, k2}, []string{k2, k3}, []string{k1, k3}
		type command struct {
			args  []string
			shape bool // a PTTL: compared by type
		}
		cmds := []command{
			{[]string{"HELLO", proto}, true},
			{bsmArgs(bsmObtain, ab, "AAAA-1", "4", "10000"), false},
			{bsmArgs(bsmObtain, ab, "BBBB-1", "4", "10000"), false},
			{bsmArgs(bsmObtain, bc, "BBBB-1", "4", "10000"), false},
			{bsmArgs(bsmObtain, ab, "AAAA-2", "4", "20000"), false},
			{bsmArgs(bsmObtain, ac, "AAAA-3", "4", "20000"), false},
			{[]string{"GET", k1}, false},
			{[]string{"GET", k3}, false},
			{bsmArgs(bsmPTTL, ab, "AAAA-2"), true},
			{bsmArgs(bsmPTTL, ab, "AAAA-1"), false},
			{bsmArgs(bsmPTTL, ac, "AAAA-2"), false},
			{bsmArgs(bsmRefresh, ab, "AAAA-2", "30000"), false},
			{bsmArgs(bsmRefresh, ab, "AAAA-1", "30000"), false},
			{bsmArgs(bsmRefresh, ac, "AAAA-2", "30000"), false},
			{bsmArgs(bsmRelease, ab, "BBBB-1"), false},
			{bsmArgs(bsmRelease, ac, "AAAA-2"), false},
			{[]string{"GET", k1}, false},
			{bsmArgs(bsmRelease, ab, "AAAA-2"), false},
			{bsmArgs(bsmRelease, ab, "AAAA-2"), false},
			{bsmArgs(bsmPTTL, ab, "AAAA-2"), false},
			{bsmArgs(bsmRefresh, ab, "AAAA-2", "30000"), false},
			{[]string{"EXISTS", k1, k2, k3}, false},
			// One key.
			{bsmArgs(bsmObtain, []string{k4}, "DDDD-1", "4", "10000"), false},
			{bsmArgs(bsmObtain, []string{k4}, "EEEE-1", "4", "10000"), false},
			{bsmArgs(bsmObtain, []string{k4}, "DDDD-2", "4", "10000"), false},
			{bsmArgs(bsmPTTL, []string{k4}, "DDDD-2"), true},
			{bsmArgs(bsmRefresh, []string{k4}, "DDDD-1", "10000"), false},
			{bsmArgs(bsmRelease, []string{k4}, "DDDD-1"), false},
			{bsmArgs(bsmRelease, []string{k4}, "DDDD-2"), false},
			{bsmArgs(bsmPTTL, []string{k4}, "DDDD-2"), false},
		}
		args := make([][]string, len(cmds))
		for i, cmd := range cmds {
			args[i] = cmd.args
		}
		run := func(addr string) []string { return rawReplies(t, addr, args...) }
		want, got := run(plain), run(e.addr)
		for i, cmd := range cmds {
			w, g := want[i], got[i]
			switch {
			case cmd.shape && (g[0] != w[0] || strings.Count(g, "\r\n") != strings.Count(w, "\r\n")):
				t.Errorf("RESP%s step %d %v: proxy %q, Redis %q: not the same type and shape", proto, i, cmd.args[:min(4, len(cmd.args))], g, w)
			case !cmd.shape && g != w:
				t.Errorf("RESP%s step %d %v:\nproxy %q\nRedis %q", proto, i, cmd.args[:min(4, len(cmd.args))], g, w)
			}
		}
	}
	for _, k := range used {
		eventually(t, "nothing left of "+k, func() bool { return count(e.onMasters(k), "") == 3 })
	}
}

// An obtain is granted when a quorum of masters took every key with
// validity left, and taken back everywhere otherwise. A key held by
// another value on one master of three: granted by the other two (that
// master keeps its key and takes neither); on two masters: refused, and
// the master that took both keys gives them back, leaving only the other
// value where it was.
func TestBsmRedislockObtainQuorum(t *testing.T) {
	e := newEnv(t, 3, nil)
	for _, c := range []struct {
		name    string
		seeded  []int
		granted bool
	}{
		{"held_elsewhere_on_one", []int{0}, true},
		{"held_elsewhere_on_two", []int{1, 2}, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			a, b := e.key(c.name+":a"), e.key(c.name+":b")
			e.seed(b, "XXXX-other", 10*time.Second, c.seeded...)
			v, err := e.do(bsmArgsAny(bsmObtain, []string{a, b}, "AAAA-1", "4", "10000")...)
			if c.granted {
				mustEqual(t, "obtain", v, any("OK"))
			} else if err != redis.Nil {
				t.Fatalf("obtain: %v %v, want nil", v, err)
			}
			eventually(t, "each master as the rule says", func() bool {
				as, bs := e.onMasters(a), e.onMasters(b)
				for i := range e.masters {
					held := contains(c.seeded, i)
					wantA, wantB := "AAAA-1", "AAAA-1"
					switch {
					case held:
						wantA, wantB = "", "XXXX-other"
					case !c.granted:
						wantA, wantB = "", ""
					}
					if as[i] != wantA || bs[i] != wantB {
						return false
					}
				}
				return true
			})
		})
	}
}

func contains(xs []int, x int) bool {
	for _, y := range xs {
		if y == x {
			return true
		}
	}
	return false
}

func bsmArgsAny(script string, keys []string, argv ...string) []any {
	var out []any
	for _, a := range bsmArgs(script, keys, argv...) {
		out = append(out, a)
	}
	return out
}

// A holder's obtain again (its token, new metadata) renews its keys on
// the masters that hold every one of them for its token, and is granted
// when a quorum did: here two of three, the third holding another value
// of one key, which it keeps. A caller whose token is not the holder's is
// refused, and changes nothing.
func TestBsmRedislockObtainAgainByTheHolder(t *testing.T) {
	e := newEnv(t, 3, nil)
	a, b := e.key("a"), e.key("b")
	e.seed(a, "AAAA-1", 5*time.Second, 0, 1, 2)
	e.seed(b, "AAAA-1", 5*time.Second, 0, 1)
	e.seed(b, "XXXX-other", 5*time.Second, 2)
	if v, err := e.do(bsmArgsAny(bsmObtain, []string{a, b}, "AAAB-1", "4", "30000")...); err != redis.Nil {
		t.Fatalf("another token's obtain: %v %v, want nil", v, err)
	}
	mustEqual(t, "a after another token's obtain", strings.Join(e.onMasters(a), ","), "AAAA-1,AAAA-1,AAAA-1")
	mustEqual(t, "obtain again", must(e.do(bsmArgsAny(bsmObtain, []string{a, b}, "AAAA-2", "4", "30000")...)), any("OK"))
	eventually(t, "renewed where the holder held both keys", func() bool {
		return strings.Join(e.onMasters(a), ",") == "AAAA-2,AAAA-2,AAAA-1" &&
			strings.Join(e.onMasters(b), ",") == "AAAA-2,AAAA-2,XXXX-other"
	})
	for i := range 2 {
		c := e.masters[i].Client()
		p, _ := c.PTTL(context.Background(), b).Result()
		c.Close()
		if p <= 5*time.Second {
			t.Errorf("master %d: b's PTTL %v after obtaining it again for 30 s", i, p)
		}
	}
	mustEqual(t, "release", must(e.do(bsmArgsAny(bsmRelease, []string{a, b}, "AAAA-2")...)), any("OK"))
}

// Release, refresh and pttl on the quorum: released (OK) when a quorum
// deleted every key, and nil when the quorum shows the lock not held (a
// key on one master of three: its copies are deleted all the same); the
// pttl is, for each key, the quorum-th largest PTTL among its holders, and
// the least of those over the keys; refresh renews where every key is
// held.
func TestBsmRedislockQuorumReplies(t *testing.T) {
	e := newEnv(t, 3, nil)
	ctx := context.Background()
	a, b := e.key("a"), e.key("b")
	for i, ttl := range []time.Duration{10 * time.Second, 20 * time.Second, 30 * time.Second} {
		c := e.masters[i].Client()
		c.Set(ctx, a, "AAAA-1", ttl)
		c.Set(ctx, b, "AAAA-1", ttl+30*time.Second)
		c.Close()
	}
	// a: 30, 20, 10 s, the quorum's 20 s; b: 60, 50, 40 s, the quorum's 50 s.
	p := must(e.do(bsmArgsAny(bsmPTTL, []string{a, b}, "AAAA-1")...)).(int64)
	if p <= 10000 || p > 20000 {
		t.Fatalf("pttl %d ms, want a's quorum-th largest, at most 20000 and above the least copy's 10000", p)
	}
	if v, err := e.do(bsmArgsAny(bsmPTTL, []string{a, b}, "AAAA-2")...); err != redis.Nil {
		t.Fatalf("pttl by another value: %v %v, want nil", v, err)
	}
	mustEqual(t, "refresh", must(e.do(bsmArgsAny(bsmRefresh, []string{a, b}, "AAAA-1", "40000")...)), any("OK"))
	p = must(e.do(bsmArgsAny(bsmPTTL, []string{a, b}, "AAAA-1")...)).(int64)
	if p <= 30000 {
		t.Fatalf("pttl %d ms after a refresh to 40 s", p)
	}
	mustEqual(t, "release", must(e.do(bsmArgsAny(bsmRelease, []string{a, b}, "AAAA-1")...)), any("OK"))
	eventually(t, "released from every master", func() bool {
		return count(e.onMasters(a), "") == 3 && count(e.onMasters(b), "") == 3
	})

	// Held on one master of three: not held.
	e.seed(a, "AAAA-1", 10*time.Second, 2)
	e.seed(b, "AAAA-1", 10*time.Second, 2)
	for _, cmd := range [][]any{
		bsmArgsAny(bsmPTTL, []string{a, b}, "AAAA-1"),
		bsmArgsAny(bsmRefresh, []string{a, b}, "AAAA-1", "30000"),
		bsmArgsAny(bsmRelease, []string{a, b}, "AAAA-1"),
	} {
		if v, err := e.do(cmd...); err != redis.Nil {
			t.Fatalf("%v on a minority: %v %v, want nil", cmd[:3], v, err)
		}
	}
	eventually(t, "the minority's copies deleted", func() bool {
		return count(e.onMasters(a), "") == 3 && count(e.onMasters(b), "") == 3
	})
}

// With two masters of three down, whether the lock is held cannot be
// known: obtain, refresh, release and pttl answer NOQUORUM, never nil.
func TestBsmRedislockNoQuorum(t *testing.T) {
	e := newEnv(t, 3, nil)
	a, b := e.key("a"), e.key("b")
	mustEqual(t, "obtain", must(e.do(bsmArgsAny(bsmObtain, []string{a, b}, "AAAA-1", "4", "10000")...)), any("OK"))
	e.masters[0].Kill()
	e.masters[1].Kill()
	for _, cmd := range [][]any{
		bsmArgsAny(bsmObtain, []string{a, b}, "AAAA-2", "4", "10000"),
		bsmArgsAny(bsmPTTL, []string{a, b}, "AAAA-1"),
		bsmArgsAny(bsmRefresh, []string{a, b}, "AAAA-1", "30000"),
		bsmArgsAny(bsmRelease, []string{a, b}, "AAAA-1"),
	} {
		v, err := e.do(cmd...)
		if err == nil || !strings.HasPrefix(err.Error(), "NOQUORUM") {
			t.Errorf("%v: %v %v, want NOQUORUM", cmd[:3], v, err)
		}
	}
}
