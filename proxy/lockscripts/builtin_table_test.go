package lockscripts

import (
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/redlock-proxy/redlock-proxy/redlock/engine"
)

// specView is what running a spec reads of it (package proxy: eval.go,
// rwlock.go, redisson.go, pipeline.go), its functions reduced to their
// answers on sample arguments: two specs with the same view run alike.
type specView struct {
	Name     string
	Op       Op
	TokenArg int
	TTLArg   int
	TTLUnit  time.Duration
	Absolute bool
	MinArg   int
	LimitArg int
	Mode     engine.ExtendMode
	AddIf    string // the answers on addIfSamples, "t" or "f" each
	Positive bool
	Multi    bool
	// MultiOutcome: a multi acquire, extend or release answers OK,
	// NotOwned or Absent rather than a count.
	MultiOutcome bool
	Publish      string // the message for publishSample, "" for none
	DBArg        int
	Shared       bool
	Form         int
	Reclaim      string // the answers on reclaimSamples
	OK           string
	NotOwned     string
	Absent       string
	NoTTL        string
}

// Sample arguments for the functions of a spec: ARGV vectors for an
// extend's add-if, ARGV vectors and held values for an acquire's reclaim,
// and a key and token for a publish, with braces and verbs in them that a
// template or a format could take for its own.
var (
	addIfSamples = [][]string{
		nil, {"t"}, {"t", "1"}, {"t", "1", "0"}, {"t", "1", "1"}, {"t", "1", ""}, {"t", "1", "00"}, {"t", "1", "0", "x"},
	}
	reclaimSamples = []struct {
		argv []string
		held string
	}{
		{nil, ""}, {nil, "t"}, {[]string{"t"}, "t"}, {[]string{"t"}, "u"}, {[]string{"t", "5"}, "t"},
		{[]string{"", "0"}, ""}, {[]string{"abc-1", "3", "100"}, "abc-0"}, {[]string{"abc-1", "4", "100"}, "abc-0"},
		{[]string{"abc", "9"}, "abc"}, {[]string{"abc", "x"}, "abc"}, {[]string{"abc", "-1"}, "abc"},
		{[]string{"abc", "0"}, "zzz"}, {[]string{"ab", "3"}, "abc"}, {[]string{"abc", "3"}, "ab"},
		{[]string{"abc", "3"}, "abc"}, {[]string{"abc", " 3"}, "abc"},
	}
	publishSample = [2]string{"lock:{token}%s", "tok{key}%d"}
)

func argvOf(a []string) [][]byte {
	out := make([][]byte, len(a))
	for i, s := range a {
		out[i] = []byte(s)
	}
	return out
}

func answers(n int, f func(i int) bool) string {
	var b strings.Builder
	for i := range n {
		if f(i) {
			b.WriteByte('t')
		} else {
			b.WriteByte('f')
		}
	}
	return b.String()
}

func viewOld(o *oldSpec) specView {
	v := specView{Name: o.name, Op: o.kind, TokenArg: o.tokenArg, TTLArg: o.ttlArg, TTLUnit: o.ttlUnit, Absolute: o.absolute,
		MinArg: o.minArg, LimitArg: o.limitArg, Mode: o.mode, Positive: o.positive, Multi: o.multi, DBArg: o.dbArg, Shared: o.shared, Form: o.form,
		OK: o.ok, NotOwned: o.notOwned, Absent: o.absent, NoTTL: o.noTTL}
	if o.addIf != nil {
		v.AddIf = answers(len(addIfSamples), func(i int) bool { return o.addIf(argvOf(addIfSamples[i])) })
	}
	if o.reclaim != nil {
		v.Reclaim = answers(len(reclaimSamples), func(i int) bool {
			return o.reclaim(argvOf(reclaimSamples[i].argv), reclaimSamples[i].held)
		})
	}
	if o.publish != nil {
		v.Publish = o.publish(publishSample[0], publishSample[1])
	}
	return v.relevant()
}

func viewSpec(sp *Spec) specView {
	v := specView{Name: sp.Name, Op: sp.Op, TokenArg: sp.TokenArg, TTLArg: sp.TTLArg, TTLUnit: sp.TTLUnit, Absolute: sp.Absolute,
		MinArg: sp.MinArg, LimitArg: sp.LimitArg, Mode: sp.Mode, Positive: sp.Positive, Multi: sp.Multi, DBArg: sp.DBArg, Shared: sp.Shared, Form: sp.Form,
		MultiOutcome: sp.MultiOutcome, OK: sp.OK, NotOwned: sp.NotOwned, Absent: sp.Absent, NoTTL: sp.NoTTL}
	if sp.addIf != nil {
		v.AddIf = answers(len(addIfSamples), func(i int) bool { return sp.AddIf(argvOf(addIfSamples[i])) })
	}
	if sp.reclaim != reclaimNone {
		v.Reclaim = answers(len(reclaimSamples), func(i int) bool {
			return sp.Reclaims(argvOf(reclaimSamples[i].argv), reclaimSamples[i].held)
		})
	}
	if sp.Publishes() {
		v.Publish = sp.Message(publishSample[0], publishSample[1])
	}
	return v.relevant()
}

// relevant clears what running the operation never reads: the TTL of an
// operation that takes none, an extend's mode elsewhere, the replies of an
// operation whose replies are its own, and so on. What stays is compared.
func (v specView) relevant() specView {
	takesTTL := map[Op]bool{OpExtend: true, OpAcquire: true, OpExtendIfLeft: true, OpRWAcquire: true, OpRWExtend: true,
		OpHashAcquire: true, OpHashExtend: true, OpHashRelease: true, OpHashExtendBatch: true,
		OpPermitAcquire: true, OpPermitRefresh: true}[v.Op]
	if !takesTTL {
		v.TTLArg, v.TTLUnit, v.Absolute = 0, 0, false
	}
	if v.Op != OpExtendIfLeft {
		v.MinArg = 0
	}
	if v.Op != OpPermitAcquire && v.Op != OpPermitRefresh {
		v.LimitArg = 0
	}
	if v.Op != OpExtend {
		v.Mode, v.AddIf = "", ""
	}
	if v.Op != OpOwnerTTL {
		v.Positive = false
	}
	if !v.Multi || v.Op != OpAcquire && v.Op != OpExtend && v.Op != OpRelease {
		v.MultiOutcome = false
	}
	if v.Op != OpRWAcquire {
		v.Shared = false
	}
	if v.Op != OpHashRelease {
		v.Form = 0
	}
	if v.Op != OpAcquire {
		v.Reclaim = ""
	}
	if v.Op == OpNotALock || v.Op == OpTimeProbe {
		// Never run with its arguments: it passes through to the backend
		// as it is, or is answered by the proxy.
		v.TokenArg, v.DBArg = 0, 0
	}
	// The replies each operation writes from its spec (the others answer
	// their own: counts, PTTLs, arrays).
	ok, notOwned, absent := false, false, false
	switch v.Op {
	case OpRelease, OpExtend:
		ok, notOwned, absent = true, true, true
	case OpAcquire, OpRWAcquire, OpRWExtend, OpRWRelease, OpRWHeld, OpPermitAcquire, OpPermitRefresh, OpPermitRelease:
		ok, notOwned = true, true
	case OpOwnerTTL:
		notOwned, absent = true, true
	}
	if !ok {
		v.OK = ""
	}
	if !notOwned {
		v.NotOwned = ""
	}
	if !absent {
		v.Absent = ""
	}
	// Only an extend that may add to the TTL, or sets it only where there
	// is one, can find a key without a TTL (engine.ExtendResult.NoTTL).
	if v.Op != OpExtend || v.Mode != engine.ExtendSetIfTTL && v.Mode != engine.ExtendAdd && v.AddIf == "" {
		v.NoTTL = ""
	}
	return v
}

// The built-in table runs every library script as the Go table before it
// did: the same digests, each with the same view, and the same wire SHA1s,
// each to the spec of the same digest; and each entry added since has the
// view written for it below (addedBuiltin).
func TestBuiltinTableMatchesTheGoTable(t *testing.T) {
	want := map[string]specView{}
	for d, old := range oldBuiltin {
		want[d] = viewOld(old)
	}
	maps.Copy(want, addedBuiltin)
	wantSHAs := maps.Clone(oldWireSHAs)
	maps.Copy(wantSHAs, addedWireSHAs)
	if got, want := slices.Sorted(maps.Keys(builtin)), slices.Sorted(maps.Keys(want)); !slices.Equal(got, want) {
		t.Fatalf("digests:\n got %v\nwant %v", got, want)
	}
	for d, w := range want {
		if got := viewSpec(builtin[d]); got != w {
			t.Errorf("%s:\n got %+v\nwant %+v", d, got, w)
		}
	}
	if got, want := WireSHAs(), slices.Sorted(maps.Keys(wantSHAs)); !slices.Equal(got, want) {
		t.Fatalf("wire SHA1s:\n got %v\nwant %v", got, want)
	}
	for sha, d := range wantSHAs {
		if sp := BySHA(strings.ToUpper(sha)); sp == nil || sp != builtin[d] {
			t.Errorf("wire SHA1 %s: %v, want the spec of digest %s", sha, sp, d)
		}
	}
	if BySHA("0000000000000000000000000000000000000000") != nil {
		t.Error("an unknown SHA1 has a spec")
	}
}

// The view tells apart what running a spec tells apart: a change to any
// field an operation reads shows.
func TestSpecViewSeesEveryField(t *testing.T) {
	base := *oldBuiltin["bce326b8a0b21cc21af307b604335bbdd4e6ad86"] // redis-py extend: add-if and no-TTL
	changes := map[string]func(o *oldSpec){
		"name":     func(o *oldSpec) { o.name = "x" },
		"kind":     func(o *oldSpec) { o.kind = OpRelease },
		"tokenArg": func(o *oldSpec) { o.tokenArg = 1 },
		"ttlArg":   func(o *oldSpec) { o.ttlArg = 2 },
		"ttlUnit":  func(o *oldSpec) { o.ttlUnit = time.Second },
		"absolute": func(o *oldSpec) { o.absolute = true },
		"mode":     func(o *oldSpec) { o.mode = engine.ExtendSet },
		"addIf": func(o *oldSpec) {
			o.addIf = func(argv [][]byte) bool { return len(argv) > 2 && string(argv[2]) == "1" }
		},
		"multi":    func(o *oldSpec) { o.multi = true },
		"publish":  func(o *oldSpec) { o.publish = func(k, t string) string { return k } },
		"dbArg":    func(o *oldSpec) { o.dbArg = 1 },
		"ok":       func(o *oldSpec) { o.ok = rOK },
		"notOwned": func(o *oldSpec) { o.notOwned = rNil },
		"absent":   func(o *oldSpec) { o.absent = rNil },
		"noTTL":    func(o *oldSpec) { o.noTTL = rNil },
	}
	for name, change := range changes {
		o := base
		change(&o)
		if viewOld(&o) == viewOld(&base) {
			t.Errorf("a change to %s does not show", name)
		}
	}
	for d, name := range map[string]string{
		"42dbf8a0109452946aab1cee671db213d843abc6": "reclaim",  // bsm/redislock obtain: a token prefix
		"c76f40668b25c4be7c7e4e8fc67c7940b862be5a": "positive", // pottery acquired
		"91e4ff4a4d3d56651f34517e64086a0037b99d40": "shared",   // Symfony saveRead
		"ab6cd014de9972ca9a2c54e5a840467b51e29c4e": "form",     // Redisson unlock
		"0ff9c332243cf5594adb1b999ee61e4d0802b2b8": "minArg",   // redlock-universal atomic extend
		"9338369f2f18a09b23526b0aaf2d5439dfd9dbc1": "limitArg", // redis-semaphore acquire
	} {
		o := *oldBuiltin[d]
		switch name {
		case "reclaim":
			o.reclaim = oldSameToken
		case "positive":
			o.positive = false
		case "shared":
			o.shared = false
		case "form":
			o.form = HashPublishArg
		case "minArg":
			o.minArg = 0
		case "limitArg":
			o.limitArg = 3
		}
		if viewOld(&o) == viewOld(oldBuiltin[d]) {
			t.Errorf("a change to %s does not show", name)
		}
	}
	// Keys the vocabulary gained after the Go table was frozen.
	for _, op := range []string{"acquire", "extend", "release"} {
		sp, err := Config{Op: op, TokenArg: 1, TTLArg: 2, Multi: true, MultiReply: "outcome"}.Spec("x")
		if err != nil {
			t.Fatal(err)
		}
		changed := *sp
		changed.MultiOutcome = false
		if viewSpec(&changed) == viewSpec(sp) {
			t.Errorf("%s: a change to MultiOutcome does not show", op)
		}
	}
}

// addedView is the view of an entry declared after the Go table was
// frozen, written as that table's literals were, with what the vocabulary
// has gained since.
func addedView(o oldSpec, multiOutcome bool) specView {
	v := viewOld(&o)
	v.MultiOutcome = multiOutcome
	return v.relevant()
}

// addedBuiltin is the view of each entry declared since the Go table was
// frozen, by digest; addedWireSHAs their wire SHA1s.
var addedBuiltin = map[string]specView{
	// bsm/redislock 0.10: obtain, release, refresh and pttl, each over any
	// number of keys, all or none; +OK or nil. The obtain takes over keys
	// whose values start with the token (its first ARGV[2] bytes); the pttl
	// answers the least positive PTTL, 0 when none.
	"cc316b783714c963a08dee836e4e12e2943eb8e8": addedView(oldSpec{name: "bsm/redislock 0.10 obtain", kind: OpAcquire, tokenArg: 0, ttlArg: 2, ttlUnit: time.Millisecond,
		multi: true, reclaim: oldSameTokenPrefix, ok: rOK, notOwned: rNil, absent: rNil}, true),
	"a21da2c9d6ef172c13365d68de8c6b3be57cd153": addedView(oldSpec{name: "bsm/redislock 0.10 release", kind: OpRelease, multi: true, ok: rOK, notOwned: rNil, absent: rNil}, true),
	"47ab636bc3cfd74bcce2e1da3fbadeaf0780adf2": addedView(oldSpec{name: "bsm/redislock 0.10 refresh", kind: OpExtend, ttlArg: 1, ttlUnit: time.Millisecond, mode: engine.ExtendSet,
		multi: true, ok: rOK, notOwned: rNil, absent: rNil}, true),
	"67b4f502051effbba4e88871c0d7a41d91e1509a": addedView(oldSpec{name: "bsm/redislock 0.10 pttl", kind: OpOwnerTTL, positive: true, multi: true, notOwned: rNil, absent: rNil}, false),
}

var addedWireSHAs = map[string]string{
	"eb0c00d98f6f33b4262419a509002884540f30be": "cc316b783714c963a08dee836e4e12e2943eb8e8", // bsm_redislock_v0.10 obtain.lua
	"9470c810040e272ee6c579d8d4331aaf6332a7b1": "a21da2c9d6ef172c13365d68de8c6b3be57cd153", // bsm_redislock_v0.10 release.lua
	"5a22d7e8431313862816d4416b5e46dd70fc340d": "47ab636bc3cfd74bcce2e1da3fbadeaf0780adf2", // bsm_redislock_v0.10 refresh.lua
	"66e1084c2d842a7e8c271925aae90219fac4e129": "67b4f502051effbba4e88871c0d7a41d91e1509a", // bsm_redislock_v0.10 pttl.lua
}

// The built-in table as it was written in Go, before it became a
// declaration in the [[scripts]] vocabulary: kept here, and only here, as
// the reference the declared table must match, digest by digest and wire
// SHA1 by wire SHA1. oldSpec is the Go type those literals were written in.
type oldSpec struct {
	name     string
	kind     Op
	tokenArg int
	ttlArg   int
	ttlUnit  time.Duration
	minArg   int
	limitArg int
	absolute bool
	mode     engine.ExtendMode
	addIf    func(argv [][]byte) bool
	positive bool
	multi    bool
	publish  func(key, token string) string
	dbArg    int
	shared   bool
	form     int
	reclaim  func(argv [][]byte, held string) bool
	ok       string
	notOwned string
	absent   string
	noTTL    string
}

// rNeg1 is the one reply the old table spelled that the vocabulary has no
// constant for.
const rNeg1 = ":-1\r\n"

var oldBuiltinTable = map[string]*oldSpec{
	// The Redlock spec's compare-and-delete and its many spellings: redlock-php,
	// Yii2, php-lock, Laravel, ShedLock, RedLock.net, redlock-rb, pottery,
	// redsync < 4.15, bsm/redislock 0.9, node-redlock 3, Symfony ≤ 5.1.
	"278b7fc39f087c6276c7b7c08962022c4fe73ba6": {name: "unlock", kind: OpRelease, ok: rOne, notOwned: rZero, absent: rZero},
	// redis-py Lock.release.
	"16d4f25a8b1272dc33002e333ca708ee3f94da4e": {name: "redis-py release", kind: OpRelease, ok: rOne, notOwned: rZero, absent: rZero},
	// go-redsync ≥ 4.15 delete: -1 when the key is gone.
	"d40d763d8f1fdb770873ffdbdc1cc2112866366a": {name: "redsync delete", kind: OpRelease, ok: rOne, notOwned: rZero, absent: rNeg1},
	// cheprasov/php-redis-lock release.
	"9bb732dd8024616f3c8a318fb9d477afc14e9c02": {name: "cheprasov release", kind: OpRelease, ok: rOne, notOwned: rZero, absent: rZero},

	// Compare-and-PEXPIRE: ShedLock, pottery, redsync touch, bsm/redislock 0.9,
	// node-redlock 3, Symfony ≤ 5.1.
	"43e9817a622cba86ea5a7b09b0c27646e33f4699": {name: "extend", kind: OpExtend, ttlArg: 1, ttlUnit: time.Millisecond, mode: engine.ExtendSet, ok: rOne, notOwned: rZero, absent: rZero},
	// cheprasov/php-redis-lock update.
	"af915ddea5a7aaf75f7681fe9f99b463b02faff1": {name: "cheprasov update", kind: OpExtend, ttlArg: 1, ttlUnit: time.Millisecond, mode: engine.ExtendSet, ok: rOne, notOwned: rZero, absent: rZero},
	// redis-py Lock.reacquire.
	"b57b48d5536ae982a91ca9929e89a43a617db101": {name: "redis-py reacquire", kind: OpExtend, ttlArg: 1, ttlUnit: time.Millisecond, mode: engine.ExtendSet, ok: rOne, notOwned: rZero, absent: rZero},
	// redis-py Lock.extend: ARGV[3] "0" adds to the remaining TTL, "1"
	// replaces it; either way a key without a TTL is refused.
	"bce326b8a0b21cc21af307b604335bbdd4e6ad86": {name: "redis-py extend", kind: OpExtend, ttlArg: 1, ttlUnit: time.Millisecond, mode: engine.ExtendSetIfTTL,
		addIf: func(argv [][]byte) bool { return len(argv) > 2 && string(argv[2]) == "0" }, ok: rOne, notOwned: rZero, absent: rZero, noTTL: rZero},
	// redis-py 3.0–3.4 Lock.extend: always additive.
	"ea4493c90772bac177fcb31b5f6309873fd77401": {name: "redis-py extend (3.0-3.4)", kind: OpExtend, ttlArg: 1, ttlUnit: time.Millisecond, mode: engine.ExtendAdd, ok: rOne, notOwned: rZero, absent: rZero, noTTL: rZero},
	// go-redsync ≥ 4.15 touch that also takes an absent key.
	"cd1017704a59c673128c6e8b08da814d6bf271c5": {name: "redsync touch (set nx)", kind: OpExtend, ttlArg: 1, ttlUnit: time.Millisecond, mode: engine.ExtendClaim, ok: rOne, notOwned: rZero, absent: rZero},
	// RedLock.net extend: takes an absent key; -1 when held by another value.
	"6838d32fb323a7aafb04f969031273b772d7f909": {name: "RedLock.net extend", kind: OpExtend, ttlArg: 1, ttlUnit: time.Millisecond, mode: engine.ExtendClaim, ok: rOne, notOwned: rNeg1, absent: rZero},
	// Laravel refreshLock: seconds; 0 or less persists.
	"3a1c45aa4afd4ee51fc9ac7ebbbda9388e05866d": {name: "Laravel refreshLock", kind: OpExtend, ttlArg: 1, ttlUnit: time.Second, mode: engine.ExtendPersist0, ok: rOne, notOwned: rZero, absent: rZero},
	// Spring Integration ≥ 6.4 renew: true / false (nil).
	"fb00299e89f5ced6edc3926e0f407d0579b0b935": {name: "Spring renew", kind: OpExtend, ttlArg: 1, ttlUnit: time.Millisecond, mode: engine.ExtendSet, ok: rOne, notOwned: rNil, absent: rNil},
	// python-redis-lock extend: 0 done, 1 not the owner, 2 no TTL; seconds.
	// The Go table renewed a key without a TTL, which the script answers 2.
	"2b7f23e28e42f568dd06c8b2ce170ed24766260e": {name: "python-redis-lock extend", kind: OpExtend, ttlArg: 1, ttlUnit: time.Second, mode: engine.ExtendSetIfTTL, ok: rZero, notOwned: rOne, absent: rOne, noTTL: ":2\r\n"},

	// node-redlock 4.x and 5: multi-key acquire, extend and release, each
	// answering the number of keys it acted on.
	"edd4ddecf1460b13c093d7cb4fd999c17d3d76d8": {name: "node-redlock acquire", kind: OpAcquire, tokenArg: 0, ttlArg: 1, ttlUnit: time.Millisecond, multi: true, ok: rOne, notOwned: rZero, absent: rZero},
	"5bc16a755c30caf54d7fd7bde02e9b34632e9846": {name: "node-redlock 4.0 acquire", kind: OpAcquire, tokenArg: 0, ttlArg: 1, ttlUnit: time.Millisecond, multi: true, ok: rOne, notOwned: rZero, absent: rZero},
	"ad59565c53ba1d8128343d84e98a5aaca5739479": {name: "node-redlock extend", kind: OpExtend, ttlArg: 1, ttlUnit: time.Millisecond, mode: engine.ExtendSet, multi: true, ok: rOne, notOwned: rZero, absent: rZero},
	"be1fdf0fd785e3494203f029dcb1825e7d1bec67": {name: "node-redlock 4.0 extend", kind: OpExtend, ttlArg: 1, ttlUnit: time.Millisecond, mode: engine.ExtendSet, multi: true, ok: rOne, notOwned: rZero, absent: rZero},
	"872463717b9d8763339c3b80e81ba68c1dbb28c2": {name: "node-redlock release", kind: OpRelease, multi: true, ok: rOne, notOwned: rZero, absent: rZero},
	// @sesamecare-oss/redlock 1.x (the maintained node-redlock fork): node-redlock
	// 5's scripts after a redis.pcall("SELECT", ARGV[1]), the token in ARGV[2]
	// and the TTL in ARGV[3].
	"10c07aaec82e2c07140bf4c9a5d32b56bb1b4198": {name: "sesamecare redlock acquire", kind: OpAcquire, tokenArg: 1, ttlArg: 2, ttlUnit: time.Millisecond, multi: true, dbArg: 1, ok: rOne, notOwned: rZero, absent: rZero},
	"39bb3b0174099abf24d4dd100ba83387441e18c6": {name: "sesamecare redlock extend", kind: OpExtend, tokenArg: 1, ttlArg: 2, ttlUnit: time.Millisecond, mode: engine.ExtendSet, multi: true, dbArg: 1, ok: rOne, notOwned: rZero, absent: rZero},
	"a2bd082eb5b850c50e40c345c53c6e3fa7a94022": {name: "sesamecare redlock release", kind: OpRelease, tokenArg: 1, multi: true, dbArg: 1, ok: rOne, notOwned: rZero, absent: rZero},
	// redis-semaphore 5 Mutex: compare-and-delete (the DEL's count or 0) and
	// compare-and-PEXPIRE (1 or 0), the key and token in locals.
	"e2a196b0eec41712d70355978832fd2a7bdfc554": {name: "redis-semaphore release", kind: OpRelease, ok: rOne, notOwned: rZero, absent: rZero},
	"8b94bead10f334fb89b934d1872f79565791a3fc": {name: "redis-semaphore refresh", kind: OpExtend, ttlArg: 1, ttlUnit: time.Millisecond, mode: engine.ExtendSet, ok: rOne, notOwned: rZero, absent: rZero},
	// rueidislock (rueidis 1.0): SET NX PX or PXAT (a Unix time in ms), each
	// followed by a GET for client-side caching (OK or nil);
	// compare-and-PEXPIREAT (1 or 0); compare-and-delete (1 or 0).
	"7c5d51c98d5832d3d6826234a6ea3cc67ca6bcc7": {name: "rueidislock acquire", kind: OpAcquire, tokenArg: 0, ttlArg: 1, ttlUnit: time.Millisecond, ok: rOK, notOwned: rNil, absent: rNil},
	"c3690ca2eef8232e443b9599590e6648baf79d4d": {name: "rueidislock acquire (PXAT)", kind: OpAcquire, tokenArg: 0, ttlArg: 1, ttlUnit: time.Millisecond, absolute: true, ok: rOK, notOwned: rNil, absent: rNil},
	"57589715d151abeb56a65fa025acf56adcfe9b23": {name: "rueidislock extend", kind: OpExtend, ttlArg: 1, ttlUnit: time.Millisecond, absolute: true, mode: engine.ExtendSet, ok: rOne, notOwned: rZero, absent: rZero},
	"4a2b93c641e26a1ee37fe8a6683a72a507f6895b": {name: "rueidislock release", kind: OpRelease, ok: rOne, notOwned: rZero, absent: rZero},
	// redlock-universal 0.8 atomic extend: ARGV[1] token, ARGV[2] the least
	// TTL left (ms) for the extension to go ahead, ARGV[3] the new TTL (ms);
	// answers {1, TTL left before}, {0, TTL left} or {-1, TTL left or -2}.
	"0ff9c332243cf5594adb1b999ee61e4d0802b2b8": {name: "redlock-universal atomic extend", kind: OpExtendIfLeft, minArg: 1, ttlArg: 2, ttlUnit: time.Millisecond},
	// redlock-universal 0.8 inspect: {value, PTTL}, or nil.
	"9f19889350c73604172c1f050842e481e9c2de08": {name: "redlock-universal inspect", kind: OpInspect, tokenArg: -1},
	// simple-redis-mutex 3 release: compare-and-delete, then PUBLISH on
	// KEYS[2] a JSON naming the key and value; no reply (nil).
	"36895f946fac8aac0ec42897a05528aef70c9c8d": {name: "simple-redis-mutex release", kind: OpRelease, ok: rNil, notOwned: rNil, absent: rNil,
		publish: func(key, token string) string { return fmt.Sprintf(`{ "key": "%s", "value": "%s" }`, key, token) }},
	// node-redlock 3 acquire: SET NX PX; OK or nil.
	"14d3bdded247160c6b86c7101b069fd841a18ace": {name: "node-redlock 3 acquire", kind: OpAcquire, tokenArg: 0, ttlArg: 1, ttlUnit: time.Millisecond, ok: rOK, notOwned: rNil, absent: rNil},

	// Laravel add: SETEX if absent; OK or false (nil).
	"8b64e514a958adffb2013946c36c6a8935f374d8": {name: "Laravel add", kind: OpAcquire, tokenArg: 0, ttlArg: 1, ttlUnit: time.Second, ok: rOK, notOwned: rNil, absent: rNil},

	// bsm/redislock 0.9 obtain: SET NX PX ARGV[3]; a key whose value starts
	// with the caller's token (its first ARGV[2] bytes) is taken over.
	"42dbf8a0109452946aab1cee671db213d843abc6": {name: "bsm/redislock obtain", kind: OpAcquire, tokenArg: 0, ttlArg: 2, ttlUnit: time.Millisecond,
		reclaim: oldSameTokenPrefix, ok: rOK, notOwned: rNil, absent: rNil},

	// go-zero RedisLock acquire (core/stores/redis/lockscript.lua): the
	// holder's id renews the lock (SET PX, "OK"), anyone else's is SET NX
	// PX (OK or nil).
	"8d93ad09d858f56a5ee04aa2e6dc2be3b2c667cf": {name: "go-zero acquire", kind: OpAcquire, tokenArg: 0, ttlArg: 1, ttlUnit: time.Millisecond,
		reclaim: oldSameToken, ok: rOK, notOwned: rNil, absent: rNil},

	// bsm/redislock 0.9 PTTL: the TTL if owned, else -3.
	"2a7eeb58bfd3bfd5e34ac2be357d77d7a0039f6a": {name: "bsm/redislock pttl", kind: OpOwnerTTL, notOwned: ":-3\r\n", absent: ":-3\r\n"},
	// pottery acquired: the TTL if owned and positive, else 0.
	"c76f40668b25c4be7c7e4e8fc67c7940b862be5a": {name: "pottery acquired", kind: OpOwnerTTL, positive: true, notOwned: rZero, absent: rZero},

	// Symfony Lock RedisStore 5.2 and later: save, saveRead,
	// putOffExpiration, delete and exists, each answering true (1) or false
	// (nil). ARGV[1] is the client's clock, used only by the second spelling
	// of each (for servers without TIME in scripts); the masters' own clocks
	// are used either way. ARGV[2] is the token, ARGV[3] the TTL in ms;
	// delete takes the token in ARGV[1].
	"9e6d15809a448e2c82f1f44edb08b511cd5941a7": oldSymfonySave,
	"8ec68819744701b309faeae516a91b3f411403fe": oldSymfonySave,
	"91e4ff4a4d3d56651f34517e64086a0037b99d40": oldSymfonySaveRead,
	"f6ef36595e7a6d430f8705a26b404cf6929c4224": oldSymfonySaveRead,
	"66215d21223c5b311ddf1883e62153ad9314c506": oldSymfonyPutOff,
	"d848612c10009dde53989542a5c4f675eb1a5c35": oldSymfonyPutOff,
	"fb4a50a2578344f4c218bc37fce4f5bf6c458a59": {name: "Symfony delete", kind: OpRWRelease, tokenArg: 0, ok: rOne, notOwned: rNil, absent: rNil},
	"845477e89104dd3de331782e61f7e606675b97b8": oldSymfonyExists,
	"a80c280c07fa62d13edd27345ea637112d72befc": oldSymfonyExists,
	// Symfony Lock RedisStore 5.2 and later asks once whether scripts may
	// call TIME: SET symfony_check_support_time 1 PX 1.
	"8c35639982895b67a6132bb4d2250524aafbdd22": {name: "Symfony TIME probe", kind: OpTimeProbe},
}

var (
	oldSymfonySave     = &oldSpec{name: "Symfony save", kind: OpRWAcquire, tokenArg: 1, ttlArg: 2, ttlUnit: time.Millisecond, ok: rOne, notOwned: rNil, absent: rNil}
	oldSymfonySaveRead = &oldSpec{name: "Symfony saveRead", kind: OpRWAcquire, shared: true, tokenArg: 1, ttlArg: 2, ttlUnit: time.Millisecond, ok: rOne, notOwned: rNil, absent: rNil}
	oldSymfonyPutOff   = &oldSpec{name: "Symfony putOffExpiration", kind: OpRWExtend, tokenArg: 1, ttlArg: 2, ttlUnit: time.Millisecond, ok: rOne, notOwned: rNil, absent: rNil}
	oldSymfonyExists   = &oldSpec{name: "Symfony exists", kind: OpRWHeld, tokenArg: 1, ok: rOne, notOwned: rNil, absent: rNil}
)

// oldBuiltin is oldBuiltinTable with Redisson's and redis-semaphore's
// entries, which init() blocks beside their operations added to it.
var oldBuiltin = func() map[string]*oldSpec {
	out := map[string]*oldSpec{}
	for d, sp := range oldBuiltinTable {
		out[d] = sp
	}
	acquire := &oldSpec{name: "Redisson lock", kind: OpHashAcquire, tokenArg: 1, ttlArg: 0, ttlUnit: time.Millisecond}
	renew := &oldSpec{name: "Redisson renewal", kind: OpHashExtend, tokenArg: 1, ttlArg: 0, ttlUnit: time.Millisecond}
	specs := map[string]*oldSpec{
		// RedissonLock.tryLockInnerAsync: ≤ 3.12, 3.13–3.18, ≥ 3.19.
		"0314dfd8f9eeb2303970822567285dd2f66f6eb3": acquire,
		"da8a82c267e63ebd0715f98d9d629855a952bd11": acquire,
		"768f500d461721e3c7d2b4d9c02011c9e3f920c2": acquire,
		// unlockInnerAsync: 3.11–3.21, 3.22–3.23, ≥ 3.24.
		"e8ba4578b34d5a72da67296df9c5cb5511d6463a": {name: "Redisson unlock (3.11-3.21)", kind: OpHashRelease, tokenArg: 2, ttlArg: 1, ttlUnit: time.Millisecond, form: HashPublishFixed},
		"d737cf5921f1aa2b1799d2b5bb492337375a1a40": {name: "Redisson unlock (3.22-3.23)", kind: OpHashRelease, tokenArg: 2, ttlArg: 1, ttlUnit: time.Millisecond, form: HashPublishArg},
		"ab6cd014de9972ca9a2c54e5a840467b51e29c4e": {name: "Redisson unlock", kind: OpHashRelease, tokenArg: 2, ttlArg: 1, ttlUnit: time.Millisecond, form: HashPublishLatch},
		// renewExpirationAsync (≤ 3.43) and LockTask's batch (≥ 3.44).
		"de633ca364455db1e1d33351ffd9d8cc7add3421": renew,
		"e06c2cadc840d716824e9a18aa02b6ed4b3ee973": {name: "Redisson batched renewal", kind: OpHashExtendBatch, tokenArg: 1, ttlArg: 0, ttlUnit: time.Millisecond, multi: true},
		// forceUnlockAsync.
		"6a7677933c73c152a3f522c00e1e923d2efcbfdf": {name: "Redisson forceUnlock", kind: OpHashForceUnlock, tokenArg: -1},
	}
	for d, sp := range specs {
		out[d] = sp
	}
	// redis-semaphore 5's Semaphore: acquire and refresh, answering 1 or 0;
	// ARGV[1] the number of permits, ARGV[2] the identifier, ARGV[3] the
	// lock timeout in ms.
	out["9338369f2f18a09b23526b0aaf2d5439dfd9dbc1"] = &oldSpec{name: "redis-semaphore Semaphore acquire", kind: OpPermitAcquire, limitArg: 0, tokenArg: 1, ttlArg: 2, ttlUnit: time.Millisecond, ok: rOne, notOwned: rZero, absent: rZero}
	out["7f9d954992712b09267a025c87dc9d4591085c2c"] = &oldSpec{name: "redis-semaphore Semaphore refresh", kind: OpPermitRefresh, limitArg: 0, tokenArg: 1, ttlArg: 2, ttlUnit: time.Millisecond, ok: rOne, notOwned: rZero, absent: rZero}
	return out
}()

var oldWireSHAs = map[string]string{
	"4e92fdc63815b3a0a2dd1c1df3694de73607c88d": "278b7fc39f087c6276c7b7c08962022c4fe73ba6", // antirez_redlock_rb
	"80a1b5f2cfccec3b7119ba7721d2127682b691a7": "42dbf8a0109452946aab1cee671db213d843abc6", // bsm_redislock_v0
	"6484da7d58920897fdc22b7f9afd1a3d47524ea8": "2a7eeb58bfd3bfd5e34ac2be357d77d7a0039f6a", // bsm_redislock_v0
	"a7aba3bc5d6e99b3003da8b9d80a63b9f4092ecf": "43e9817a622cba86ea5a7b09b0c27646e33f4699", // bsm_redislock_v0, node_redlock_v3
	"cf0e94b2e9ffc7e04395cf88f7583fc309985910": "278b7fc39f087c6276c7b7c08962022c4fe73ba6", // bsm_redislock_v0, node_redlock_v3
	"9bdce90060b1eb1923ba581ffba7051865f063d7": "9bb732dd8024616f3c8a318fb9d477afc14e9c02", // cheprasov
	"b414769872ec8518662b9f29e83fc691b0349f45": "af915ddea5a7aaf75f7681fe9f99b463b02faff1", // cheprasov
	"a08c9c69b7c07ae2485190873b90d128a23e502d": "8b64e514a958adffb2013946c36c6a8935f374d8", // laravel
	"d5f94f1848f0c54fff99d99dbc4d54184a157c02": "3a1c45aa4afd4ee51fc9ac7ebbbda9388e05866d", // laravel
	"647c65a442733a1aa440f99908d249d13b4d6c4a": "278b7fc39f087c6276c7b7c08962022c4fe73ba6", // laravel
	"acaf90b4697bb48bb5f603e9e613a54df7536c70": "be1fdf0fd785e3494203f029dcb1825e7d1bec67", // node_redlock_4
	"d01fb69e6ecc8bad3ca9bacba9f4f9e96862313f": "5bc16a755c30caf54d7fd7bde02e9b34632e9846", // node_redlock_4
	"1d48b4c6fea2cdadc46b3346de5c2eaf121c7bb3": "ad59565c53ba1d8128343d84e98a5aaca5739479", // node_redlock_4
	"517e7ed95f00c0c4a209c6a7afcc6ab797d30b85": "872463717b9d8763339c3b80e81ba68c1dbb28c2", // node_redlock_4
	"e5a322e2634ef59a516e8ea150cb085afafee684": "edd4ddecf1460b13c093d7cb4fd999c17d3d76d8", // node_redlock_4, node_redlock_v4
	"862f31bf38e9b63ce28d6e9e5143551bb34ef981": "14d3bdded247160c6b86c7101b069fd841a18ace", // node_redlock_v3
	"ce46f80993d5dac20dd066eb301a4e37994bdbed": "ad59565c53ba1d8128343d84e98a5aaca5739479", // node_redlock_v4
	"0f0f23b9048b36752b5be114f357ba083449f908": "872463717b9d8763339c3b80e81ba68c1dbb28c2", // node_redlock_v4
	"96da70f7716f27d278a5218544df37fd8b0a5e4c": "edd4ddecf1460b13c093d7cb4fd999c17d3d76d8", // node_redlock_v5
	"aed6f382e410db8ba7926d4e5e9aab410bf2a78a": "ad59565c53ba1d8128343d84e98a5aaca5739479", // node_redlock_v5
	"e4612211c9f8f51c257e26e056b0a654b3187242": "872463717b9d8763339c3b80e81ba68c1dbb28c2", // node_redlock_v5
	"a3c474d56e072c9dde09ba0b8a0018a026cdff7f": "278b7fc39f087c6276c7b7c08962022c4fe73ba6", // php_lock_2x
	"d220654d7721ae520b15ed0e24a4cc97024efa08": "278b7fc39f087c6276c7b7c08962022c4fe73ba6", // php_lock_3x
	"f5f7bd3a3aa4a63c507c1155c5ea1219b350d992": "c76f40668b25c4be7c7e4e8fc67c7940b862be5a", // pottery
	"ba015a80261b616e7a62d35df0b8e3edbe6c9414": "43e9817a622cba86ea5a7b09b0c27646e33f4699", // pottery
	"a4aada0b36710970eedaaaeec4a6b7d8c78c4f80": "278b7fc39f087c6276c7b7c08962022c4fe73ba6", // pottery
	"fed16109024d968d9496e4140fe1355bac05ebff": "2b7f23e28e42f568dd06c8b2ce170ed24766260e", // python_redis_lock
	"a4e8783852e6b949f9ef3a97212805108459a890": "bce326b8a0b21cc21af307b604335bbdd4e6ad86", // redispy
	"4a484ac024e9b025224cd9f8e1d59dbf3c15d00d": "ea4493c90772bac177fcb31b5f6309873fd77401", // redispy
	"1cac51482acf5858da00f6d685d68f886cd6b6b2": "b57b48d5536ae982a91ca9929e89a43a617db101", // redispy
	"c3f8721cbb97f72bc19e972846bd7aaf91901658": "16d4f25a8b1272dc33002e333ca708ee3f94da4e", // redispy
	"9f614a785a5f9ae8c6396c6b4bf94d2087342603": "6838d32fb323a7aafb04f969031273b772d7f909", // redlock_net
	"18b2a577dbe847b16bebde190d69a1613d68e60e": "278b7fc39f087c6276c7b7c08962022c4fe73ba6", // redlock_net
	"8e4905cee18e7c3188d10f2b8b170e403baed34f": "278b7fc39f087c6276c7b7c08962022c4fe73ba6", // redlock_rb_gem
	"00583931c4e4d483f6233879c133c71ed5393f9d": "278b7fc39f087c6276c7b7c08962022c4fe73ba6", // redsync_v4
	"e950836ed1e694540c503ef9972b8de518044d3b": "d40d763d8f1fdb770873ffdbdc1cc2112866366a", // redsync_v4
	"d75bb8b5bd13532ddedd17762e772346e39b321e": "43e9817a622cba86ea5a7b09b0c27646e33f4699", // redsync_v4
	"b6b55c439e02c6f52ffb8be7ec8c0d0ac816ea79": "cd1017704a59c673128c6e8b08da814d6bf271c5", // redsync_v4
	"bec85b1c518b7ba0348a49c79b24adbb1ca95d3b": "278b7fc39f087c6276c7b7c08962022c4fe73ba6", // ronnylt_redlock_php, symfony_le5
	"194f3902b2dd08557818d09fc2e7682d91480e53": "278b7fc39f087c6276c7b7c08962022c4fe73ba6", // shedlock
	"67256370c2d1c87e2250898075542b1a7fa5b917": "43e9817a622cba86ea5a7b09b0c27646e33f4699", // shedlock
	"879e0f7b8d83c3266d4e996627438c05dbda0b89": "fb00299e89f5ced6edc3926e0f407d0579b0b935", // spring_int_ge6
	"ae948f48c8da9feb2e215c474a412c605d33ff30": "43e9817a622cba86ea5a7b09b0c27646e33f4699", // symfony_le5
	"64fb5624bc429fd3a7351146e3f479a4c8bb251e": "278b7fc39f087c6276c7b7c08962022c4fe73ba6", // yii2
	// Symfony Lock 5.2 and later (the same text that 7.2 and later send by EVALSHA).
	"6fdee501a3714553b74c0d67687b921b90b05d18": "9e6d15809a448e2c82f1f44edb08b511cd5941a7", // symfony save
	"abdbb1413a25737fc4cfb9cf79ace1a22dad6ab3": "8ec68819744701b309faeae516a91b3f411403fe", // symfony save, ARGV clock
	"b5745b5be27d9033eb5d3eb254df2faf502b88df": "91e4ff4a4d3d56651f34517e64086a0037b99d40", // symfony saveRead
	"dee54f77398d3c6d122b4111f3af8ccf1a93ac93": "f6ef36595e7a6d430f8705a26b404cf6929c4224", // symfony saveRead, ARGV clock
	"63be12a3515941092212f15c08327d60916de9fa": "66215d21223c5b311ddf1883e62153ad9314c506", // symfony putOffExpiration
	"fe7bee082a8220c6b621ace999a1ab57c4ab5145": "d848612c10009dde53989542a5c4f675eb1a5c35", // symfony putOffExpiration, ARGV clock
	"a70f7f5087a0cb2c2c9ca50d1f64e234c2628f0c": "fb4a50a2578344f4c218bc37fce4f5bf6c458a59", // symfony delete
	"3b6bdbbe16f821f49177b16c7707f331f015a779": "845477e89104dd3de331782e61f7e606675b97b8", // symfony exists
	"e27f94ac94f5d96f23f2e8697462233b6349a566": "a80c280c07fa62d13edd27345ea637112d72befc", // symfony exists, ARGV clock
	// Redisson (redisson.go's init).
	"9401052d872adfd0179ef8c8e8c028512707629a": "0314dfd8f9eeb2303970822567285dd2f66f6eb3",
	"dad0f8d619e548e04f21fb48d50be5034df3adae": "da8a82c267e63ebd0715f98d9d629855a952bd11",
	"149c5a8bf18676fd99e9e6e24923bd64d9b62f94": "768f500d461721e3c7d2b4d9c02011c9e3f920c2",
	"3ffe249c16dee540ac8ab32e39bd408626b9aff7": "e8ba4578b34d5a72da67296df9c5cb5511d6463a",
	"778cea8aada230ae060b432fc333adaec85f2f4c": "d737cf5921f1aa2b1799d2b5bb492337375a1a40",
	"6866459238a13a701d42f4971f12d9f3a50e2442": "ab6cd014de9972ca9a2c54e5a840467b51e29c4e",
	"8e19a1ddbdee9138df9f32a480c57addab4353d1": "de633ca364455db1e1d33351ffd9d8cc7add3421",
	"6a3d31570dc6f4b0bd32bcdc8e75667747c6f635": "e06c2cadc840d716824e9a18aa02b6ed4b3ee973",
	"605e338249a7a1d40df83b04f7658354f883b41b": "6a7677933c73c152a3f522c00e1e923d2efcbfdf",
	// redis-semaphore 5.8 (its init).
	"43ebdb49120d170e08af560cb4e46e36f8585936": "9338369f2f18a09b23526b0aaf2d5439dfd9dbc1",
	"999a49a1d07671a8027165641001f5bad44608b3": "7f9d954992712b09267a025c87dc9d4591085c2c",
}

// oldSameTokenPrefix: ARGV[2] is the length of the token that starts
// ARGV[1], read as bsm/redislock's obtain script reads it (GETRANGE held 0
// n-1 against string.sub(ARGV[1], 1, n)): the old table's reading, which
// took a length of 0 for "any value" and refused lengths beyond the token
// and negative ones, was not the script's.
func oldSameTokenPrefix(argv [][]byte, held string) bool {
	if len(argv) < 2 {
		return false
	}
	n, ok := ParseInt(string(argv[1]))
	return ok && engine.Holder{Prefix: string(argv[0]), Range: true, Len: n}.Holds(held)
}

// oldSameToken is a reclaim for scripts that let the holder of a key take it
// again: the key holds the caller's token (ARGV[1]) on a quorum.
func oldSameToken(argv [][]byte, held string) bool {
	return len(argv) > 0 && held == string(argv[0])
}
