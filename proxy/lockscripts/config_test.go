package lockscripts

import (
	"strings"
	"testing"
	"time"

	"github.com/BurntSushi/toml"

	"github.com/redlock-proxy/redlock-proxy/redlock/engine"
)

// Every key of the vocabulary, as an operator writes it, reaches the spec.
func TestConfigFromTOML(t *testing.T) {
	const doc = `
[[scripts]]
file = "extend.lua"
op = "extend"
token_arg = 1
ttl_arg = 2
mode = "setttl"
add_if = { arg = 3, value = "0" }
no_ttl = -2
ok = [1, "OK", [2]]

[[scripts]]
file = "obtain.lua"
op = "acquire"
token_arg = 2
ttl_arg = 3
ttl_unit = "unix_s"
reclaim = "token_prefix"
prefix_len_arg = 1
db_arg = 4
ok = "OK"
not_owned = "nil"

[[scripts]]
file = "read.lua"
op = "rw_acquire"
token_arg = 1
ttl_arg = 2
shared = true

[[scripts]]
file = "unlock.lua"
op = "hash_release"
token_arg = 3
ttl_arg = 2
unlock_form = "latch"

[[scripts]]
file = "renew.lua"
op = "hash_extend_batch"
token_arg = 2
ttl_arg = 1

[[scripts]]
file = "left.lua"
op = "owner_ttl"
token_arg = 1
positive = true

[[scripts]]
file = "permit.lua"
op = "permit_acquire"
token_arg = 2
ttl_arg = 3
limit_arg = 1

[[scripts]]
file = "release-all.lua"
op = "release"
token_arg = 1
multi = true
multi_reply = "outcome"
ok = "OK"
not_owned = "nil"

[[scripts]]
file = "count-all.lua"
op = "extend"
token_arg = 1
ttl_arg = 2
multi = true
multi_reply = "count"
`
	var f struct {
		Scripts []Config `toml:"scripts"`
	}
	md, err := toml.Decode(doc, &f)
	if err != nil {
		t.Fatal(err)
	}
	if u := md.Undecoded(); len(u) > 0 {
		t.Fatalf("keys not decoded: %v", u)
	}
	specs := make([]*Spec, len(f.Scripts))
	for i, c := range f.Scripts {
		if specs[i], err = c.Spec(c.File); err != nil {
			t.Fatalf("%s: %v", c.File, err)
		}
	}
	ext, obtain, read, unlock, renew, left, permit, releaseAll, countAll := specs[0], specs[1], specs[2], specs[3], specs[4], specs[5], specs[6], specs[7], specs[8]
	if ext.Op != OpExtend || ext.Mode != engine.ExtendSetIfTTL || ext.NoTTL != ":-2\r\n" || ext.OK != "*3\r\n:1\r\n+OK\r\n*1\r\n:2\r\n" {
		t.Errorf("extend: %+v", ext)
	}
	if !ext.AddIf(argvOf([]string{"t", "10", "0"})) || ext.AddIf(argvOf([]string{"t", "10", "1"})) || ext.AddIf(argvOf([]string{"t", "10"})) {
		t.Error("add_if: ARGV[3] = \"0\" adds, anything else does not")
	}
	if obtain.TokenArg != 1 || obtain.TTLArg != 2 || obtain.TTLUnit != time.Second || !obtain.Absolute || obtain.DBArg != 4 ||
		obtain.OK != rOK || obtain.NotOwned != NilReply || obtain.Absent != NilReply {
		t.Errorf("acquire: %+v", obtain)
	}
	// ARGV[1] is the prefix's length, ARGV[2] the token.
	if !obtain.Reclaims(argvOf([]string{"3", "abc-new"}), "abc-old") || obtain.Reclaims(argvOf([]string{"5", "abc-new"}), "abc-old") {
		t.Error("reclaim token_prefix")
	}
	if read.Op != OpRWAcquire || !read.Shared || read.OK != rOne || read.NotOwned != rZero {
		t.Errorf("rw_acquire: %+v", read)
	}
	if unlock.Op != OpHashRelease || unlock.Form != HashPublishLatch || unlock.TokenArg != 2 || unlock.TTLArg != 1 {
		t.Errorf("hash_release: %+v", unlock)
	}
	if renew.Op != OpHashExtendBatch || !renew.Multi {
		t.Errorf("hash_extend_batch takes any number of keys: %+v", renew)
	}
	if left.Op != OpOwnerTTL || !left.Positive {
		t.Errorf("owner_ttl: %+v", left)
	}
	if permit.Op != OpPermitAcquire || permit.LimitArg != 0 || permit.TokenArg != 1 || permit.TTLArg != 2 {
		t.Errorf("permit_acquire: %+v", permit)
	}
	if !releaseAll.Multi || !releaseAll.MultiOutcome || releaseAll.OK != rOK || releaseAll.Absent != NilReply {
		t.Errorf("multi_reply = \"outcome\": %+v", releaseAll)
	}
	if !countAll.Multi || countAll.MultiOutcome {
		t.Errorf("multi_reply = \"count\": %+v", countAll)
	}
}

// The values an acquire takes over as its caller's: the token itself
// (same_token), or, as bsm/redislock's obtain compares them, the values
// whose first n bytes are the token's first n (token_prefix, n in
// ARGV[prefix_len_arg]); none when ARGV does not say.
func TestHolderIsWhatReclaimTakesOver(t *testing.T) {
	same, _ := Config{Op: "acquire", TokenArg: 1, TTLArg: 2, Reclaim: "same_token"}.Spec("same")
	prefix, _ := Config{Op: "acquire", TokenArg: 1, TTLArg: 3, Reclaim: "token_prefix", PrefixLenArg: 2}.Spec("prefix")
	none, _ := Config{Op: "acquire", TokenArg: 1, TTLArg: 2}.Spec("none")
	for _, c := range []struct {
		sp   *Spec
		argv []string
		want engine.Holder
		ok   bool
	}{
		{same, []string{"tok", "1000"}, engine.Holder{Prefix: "tok", Exact: true}, true},
		{prefix, []string{"tok-meta", "3", "1000"}, engine.Holder{Prefix: "tok-meta", Range: true, Len: 3}, true},
		{prefix, []string{"tok-meta", "0", "1000"}, engine.Holder{Prefix: "tok-meta", Range: true}, true},
		{prefix, []string{"tok", "4", "1000"}, engine.Holder{Prefix: "tok", Range: true, Len: 4}, true},
		{prefix, []string{"tok", "-1", "1000"}, engine.Holder{Prefix: "tok", Range: true, Len: -1}, true},
		{prefix, []string{"tok", "x", "1000"}, engine.Holder{}, false},
		{prefix, []string{"tok", " 3", "1000"}, engine.Holder{}, false},
		{prefix, []string{"tok", "03", "1000"}, engine.Holder{}, false},
		{prefix, []string{"tok"}, engine.Holder{}, false},
		{none, []string{"tok", "1000"}, engine.Holder{}, false},
		{same, nil, engine.Holder{}, false},
	} {
		h, ok := c.sp.Holder(argvOf(c.argv))
		if h != c.want || ok != c.ok {
			t.Errorf("%s %q: got %+v %v, want %+v %v", c.sp.Name, c.argv, h, ok, c.want, c.ok)
		}
	}
	h := engine.Holder{Prefix: "tok"}
	if !h.Holds("tok") || !h.Holds("tok-meta") || h.Holds("to") || h.Holds("xtok") {
		t.Error("a prefix holds the values that start with it")
	}
	h.Exact = true
	if !h.Holds("tok") || h.Holds("tok-meta") {
		t.Error("an exact holder holds its value alone")
	}
	// bsm/redislock's reading: GETRANGE held 0 n-1 == string.sub(token, 1, n).
	for _, c := range []struct {
		token string
		n     int64
		held  string
		want  bool
	}{
		{"tok-a", 3, "tok-b", true}, {"tok-a", 3, "to", false}, {"tok-a", 3, "", false},
		{"tok", 0, "tok", false}, {"tok", 0, "", true}, // 0: GETRANGE 0 -1 is the whole value, string.sub(t, 1, 0) ""
		{"tok", 4, "tok", true}, {"tok", 9, "tok-b", false}, {"tok", 9, "to", false}, // beyond the token: the token itself
		{"tok", -1, "tok", false}, {"tok", -1, "tokX", true}, {"tok", -1, "", false}, // -1: all of the token, all but the last byte of the value
		{"tok", -2, "toxx", true}, {"tok", -2, "tox", false}, {"tok", -2, "t", false}, {"abc", -3, "a", true}, {"abc", -5, "z", false}, {"abc", -5, "", true},
	} {
		h := engine.Holder{Prefix: c.token, Range: true, Len: c.n}
		if got := h.Holds(c.held); got != c.want {
			t.Errorf("token %q, length %d: holds %q = %v, want %v", c.token, c.n, c.held, got, c.want)
		}
	}
}

// The holder an acquire lets take its key again is the holder of the
// token, wherever the token is in ARGV.
func TestReclaimSameTokenReadsTheToken(t *testing.T) {
	sp, err := Config{Op: "acquire", TokenArg: 2, TTLArg: 3, Reclaim: "same_token"}.Spec("x")
	if err != nil {
		t.Fatal(err)
	}
	switch {
	case !sp.Reclaims(argvOf([]string{"other", "tok", "1000"}), "tok"):
		t.Error("the token's holder is refused")
	case sp.Reclaims(argvOf([]string{"tok", "other", "1000"}), "tok"):
		t.Error("ARGV[1] taken for the token")
	case sp.Reclaims(argvOf([]string{"tok"}), "tok"):
		t.Error("no token, yet reclaimed")
	}
}

// Each check of the vocabulary refuses with an error that names the key
// at fault.
func TestConfigErrorsNameTheKey(t *testing.T) {
	for _, c := range []struct {
		cfg  Config
		want string
	}{
		{Config{Op: "unlock"}, `op "unlock" is not one of release, extend,`},
		{Config{Op: "release"}, "token_arg must be"},
		{Config{Op: "rw_held"}, "token_arg must be"},
		{Config{Op: "extend", TokenArg: 1}, "ttl_arg must be"},
		{Config{Op: "hash_acquire", TokenArg: 2}, "ttl_arg must be"},
		{Config{Op: "extend_if_left", TokenArg: 1, TTLArg: 3}, "min_arg must be"},
		{Config{Op: "release", TokenArg: 1, DBArg: -1}, "db_arg must be"},
		{Config{Op: "extend", TokenArg: 1, TTLArg: 2, TTLUnit: "h"}, `ttl_unit "h"`},
		{Config{Op: "acquire", TokenArg: 1, TTLArg: 2, Reclaim: "always"}, `reclaim "always" is not same_token or token_prefix`},
		{Config{Op: "release", TokenArg: 1, Reclaim: "same_token"}, "reclaim is for op"},
		{Config{Op: "acquire", TokenArg: 1, TTLArg: 2, Reclaim: "token_prefix"}, "prefix_len_arg must be"},
		{Config{Op: "acquire", TokenArg: 1, TTLArg: 2, PrefixLenArg: 2}, "prefix_len_arg is for reclaim"},
		{Config{Op: "extend", TokenArg: 1, TTLArg: 2, Publish: "x"}, "publish is for op"},
		{Config{Op: "release", TokenArg: 1, Multi: true, Publish: "x"}, "publish is for op"},
		{Config{Op: "extend", TokenArg: 1, TTLArg: 2, Mode: "touch"}, `mode "touch"`},
		{Config{Op: "rw_extend", TokenArg: 1, TTLArg: 2, Mode: "set"}, "mode is for op"},
		{Config{Op: "acquire", TokenArg: 1, TTLArg: 2, AddIf: &ArgEquals{Arg: 3, Value: "0"}}, "add_if is for op"},
		{Config{Op: "extend", TokenArg: 1, TTLArg: 2, Multi: true, AddIf: &ArgEquals{Arg: 3, Value: "0"}}, "add_if is for op"},
		{Config{Op: "extend", TokenArg: 1, TTLArg: 2, AddIf: &ArgEquals{Value: "0"}}, "add_if.arg must be"},
		{Config{Op: "extend", TokenArg: 1, TTLArg: 2, Mode: "add", AddIf: &ArgEquals{Arg: 3}}, "add_if: mode"},
		{Config{Op: "hash_release", TokenArg: 3, TTLArg: 2, UnlockForm: "spublish"}, `unlock_form "spublish"`},
		{Config{Op: "release", TokenArg: 1, UnlockForm: "latch"}, "unlock_form is for op"},
		{Config{Op: "release", TokenArg: 1, Positive: true}, "positive is for op"},
		{Config{Op: "rw_extend", TokenArg: 1, TTLArg: 2, Shared: true}, "shared is for op"},
		{Config{Op: "rw_acquire", TokenArg: 1, TTLArg: 2, Multi: true}, "multi is not for op"},
		{Config{Op: "release", TokenArg: 1, OK: "yes"}, "ok: yes is not"},
		{Config{Op: "release", TokenArg: 1, NotOwned: 1.5}, "not_owned: 1.5 is not"},
		{Config{Op: "release", TokenArg: 1, Absent: []any{int64(1), "nil"}}, `absent: "nil" cannot be inside an array`},
		{Config{Op: "extend", TokenArg: 1, TTLArg: 2, NoTTL: []any{true}}, "no_ttl: true is not"},
		{Config{Op: "extend", TokenArg: 1, TTLArg: 2, NoTTL: int64(2)}, "no_ttl is for op"},
		{Config{Op: "release", TokenArg: 1, NoTTL: int64(2)}, "no_ttl is for op"},
		{Config{Op: "hash_force_unlock", TokenArg: 1}, `token_arg is not read by op "hash_force_unlock"`},
		{Config{Op: "rw_release", TokenArg: 1, TTLArg: 2}, `ttl_arg is not read by op "rw_release"`},
		{Config{Op: "rw_held", TokenArg: 1, TTLUnit: "s"}, `ttl_unit is not read by op "rw_held"`},
		{Config{Op: "rw_acquire", TokenArg: 1, TTLArg: 2, MinArg: 3}, `min_arg is not read by op "rw_acquire"`},
		{Config{Op: "not_a_lock", DBArg: 1}, `db_arg is not read by op "not_a_lock"`},
		{Config{Op: "hash_acquire", TokenArg: 2, TTLArg: 1, OK: int64(1)}, `ok is not read by op "hash_acquire"`},
		{Config{Op: "rw_held", TokenArg: 1, Absent: int64(0)}, `absent is not read by op "rw_held"`},
		{Config{Op: "permit_acquire", TokenArg: 1, TTLArg: 2, LimitArg: 3, Absent: int64(0)}, `absent is not read by op "permit_acquire"`},
		{Config{Op: "permit_release", TokenArg: 1, TTLArg: 2}, `ttl_arg is not read by op "permit_release"`},
		{Config{Op: "permit_refresh", TokenArg: 1, TTLArg: 2, LimitArg: 3, Mode: "add"}, "mode is for op"},
		{Config{Op: "extend", TokenArg: 1, TTLArg: 2, LimitArg: 3}, "limit_arg is for op"},
		{Config{Op: "release", TokenArg: 1, Multi: true, MultiReply: "status"}, `multi_reply "status" is not count or outcome`},
		{Config{Op: "release", TokenArg: 1, MultiReply: "outcome"}, "multi_reply is for multi = true"},
		{Config{Op: "owner_ttl", TokenArg: 1, Multi: true, MultiReply: "outcome"}, "multi_reply is for op"},
		{Config{Op: "rw_release", TokenArg: 1, MultiReply: "count"}, "multi_reply is for op"},
	} {
		_, err := c.cfg.Spec("x")
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%+v: got %v, want %q", c.cfg, err, c.want)
		}
	}
}

// The first six ops keep ignoring what they always ignored: a config that
// was accepted still is.
func TestConfigOlderOpsStayLenient(t *testing.T) {
	for _, c := range []Config{
		{Op: "release", TokenArg: 1, TTLArg: 2, TTLUnit: "s", MinArg: 3, Mode: "add", Multi: true},
		{Op: "inspect", TokenArg: 1, OK: int64(1)},
		{Op: "owner_ttl", TokenArg: 1, OK: "OK", Multi: true},
		{Op: "acquire", TokenArg: 1, TTLArg: 2, Absent: int64(-1), Mode: "claim"},
	} {
		if _, err := c.Spec("x"); err != nil {
			t.Errorf("%+v: %v", c, err)
		}
	}
}

// An operator's entry for the text of a built-in script takes its place
// where the proxy has the text; EVALSHA of a library's wire SHA1 on a proxy
// that never saw the text finds the built-in entry.
func TestOperatorEntryTakesABuiltinsPlace(t *testing.T) {
	const unlock = `if redis.call("get",KEYS[1]) == ARGV[1] then return redis.call("del",KEYS[1]) else return 0 end`
	builtinUnlock := Builtin(unlock)
	if builtinUnlock == nil {
		t.Fatal("the Redlock unlock is not built in")
	}
	custom, err := Specs([]Config{{File: "mine.lua", Source: unlock, Op: "release", TokenArg: 1, NotOwned: int64(-7)}})
	if err != nil {
		t.Fatal(err)
	}
	c := NewCache(8, custom)
	if sp := c.Lookup(unlock); sp == nil || sp.Name != "mine.lua" || sp.NotOwned != ":-7\r\n" {
		t.Fatalf("lookup: %+v", sp)
	}
	if _, e := c.Add([]byte(unlock)); e.Spec.Name != "mine.lua" {
		t.Fatalf("added: %+v", e.Spec)
	}
	if sp := BySHA("4e92fdc63815b3a0a2dd1c1df3694de73607c88d"); sp != builtinUnlock {
		t.Fatalf("by wire SHA1: %+v", sp)
	}
}

// A declared script the proxy cannot read as Lua with certainty could
// never be recognised: it is a configuration error that says why.
func TestSpecsRefuseAnUnreadableScript(t *testing.T) {
	_, err := Specs([]Config{{File: "mine.lua", Source: "return redis.call('del', KEYS[1]) -- \x00", Op: "release", TokenArg: 1}})
	if err == nil || !strings.Contains(err.Error(), "scripts[0] (mine.lua): not a script the proxy recognises: line 1: a NUL byte") {
		t.Fatalf("got %v", err)
	}
}

// An integer argument is read as Redis reads one, within what tonumber
// reads exactly; a clock, as a decimal number.
func TestParseIntAsRedis(t *testing.T) {
	for s, want := range map[string]bool{
		"0": true, "7": true, "-7": true, "10000": true, "9007199254740992": true, "-9007199254740992": true,
		"": false, "-": false, "-0": false, "007": false, "+7": false, " 7": false, "7 ": false, "7.0": false,
		"1e3": false, "0x10": false, "9007199254740993": false, "9223372036854775807": false, "nan": false,
	} {
		if _, ok := ParseInt(s); ok != want {
			t.Errorf("ParseInt(%q): %v, want %v", s, ok, want)
		}
	}
	for s, want := range map[string]bool{
		"1700000000.1234": true, "1700000000": true, "-1.5": true, "0": true,
		"": false, ".5": false, "5.": false, " 5": false, "abc": false, "1e3": false, "0x10": false,
	} {
		if IsDecimal(s) != want {
			t.Errorf("IsDecimal(%q): want %v", s, want)
		}
	}
}
