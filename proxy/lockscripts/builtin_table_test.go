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
	if v.Op == OpNotALock {
		// Never run: it passes through to the backend as it is.
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
	base := *oldBuiltin["f450802dd75d333e0f6e746befbe093331bc1869"] // redis-py extend: add-if and no-TTL
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
		"e16f7c44afa75fbb95a41921267d0e13df09bad5": "reclaim",  // bsm/redislock obtain: a token prefix
		"92f8764d904ca76b901c158faf6af0f73d334991": "positive", // pottery acquired
		"f7d725f6ae106cab687e309ef04801ba17f0d6e4": "shared",   // Symfony saveRead
		"dbb31ff491c13918cf2cdc841aa196676b2a62ab": "form",     // Redisson unlock
		"ce66ba022a51fcfb9fc9ccc53e6451072ae9472d": "minArg",   // redlock-universal atomic extend
		"16bb7f81b527b9fa30be08f188ce183e6120d85b": "limitArg", // redis-semaphore acquire
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
	"47eee42d938455f4ba712875fa59b383f094d84a": addedView(oldSpec{name: "bsm/redislock 0.10 obtain", kind: OpAcquire, tokenArg: 0, ttlArg: 2, ttlUnit: time.Millisecond,
		multi: true, reclaim: oldSameTokenPrefix, ok: rOK, notOwned: rNil, absent: rNil}, true),
	"0a19f20235f7dd022c036e0b53f8b6bac7ae07d8": addedView(oldSpec{name: "bsm/redislock 0.10 release", kind: OpRelease, multi: true, ok: rOK, notOwned: rNil, absent: rNil}, true),
	"f4cb418cbf1659d296fd536e27fad8df115c49f9": addedView(oldSpec{name: "bsm/redislock 0.10 refresh", kind: OpExtend, ttlArg: 1, ttlUnit: time.Millisecond, mode: engine.ExtendSet,
		multi: true, ok: rOK, notOwned: rNil, absent: rNil}, true),
	"8a95f6890b25a53bfe1f836ce3352991a9d21134": addedView(oldSpec{name: "bsm/redislock 0.10 pttl", kind: OpOwnerTTL, positive: true, multi: true, notOwned: rNil, absent: rNil}, false),
}

var addedWireSHAs = map[string]string{
	"eb0c00d98f6f33b4262419a509002884540f30be": "47eee42d938455f4ba712875fa59b383f094d84a", // bsm_redislock_v0.10 obtain.lua
	"9470c810040e272ee6c579d8d4331aaf6332a7b1": "0a19f20235f7dd022c036e0b53f8b6bac7ae07d8", // bsm_redislock_v0.10 release.lua
	"5a22d7e8431313862816d4416b5e46dd70fc340d": "f4cb418cbf1659d296fd536e27fad8df115c49f9", // bsm_redislock_v0.10 refresh.lua
	"66e1084c2d842a7e8c271925aae90219fac4e129": "8a95f6890b25a53bfe1f836ce3352991a9d21134", // bsm_redislock_v0.10 pttl.lua
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
	"c0c707c4bec016dafd187acc09028350cd8b3f6d": {name: "unlock", kind: OpRelease, ok: rOne, notOwned: rZero, absent: rZero},
	// redis-py Lock.release.
	"7207705fe594df3ae9284ac1bb02cb839e6bb6d6": {name: "redis-py release", kind: OpRelease, ok: rOne, notOwned: rZero, absent: rZero},
	// go-redsync ≥ 4.15 delete: -1 when the key is gone.
	"5f851f2ef1cdcac21aa82b064c9ac022a9a7adb0": {name: "redsync delete", kind: OpRelease, ok: rOne, notOwned: rZero, absent: rNeg1},
	// cheprasov/php-redis-lock release.
	"42caa3859bd6037743b55b0464defac8bf080b0e": {name: "cheprasov release", kind: OpRelease, ok: rOne, notOwned: rZero, absent: rZero},

	// Compare-and-PEXPIRE: ShedLock, pottery, redsync touch, bsm/redislock 0.9,
	// node-redlock 3, Symfony ≤ 5.1.
	"d4477b9f7579af482457f0c2f363525cff4ea1d4": {name: "extend", kind: OpExtend, ttlArg: 1, ttlUnit: time.Millisecond, mode: engine.ExtendSet, ok: rOne, notOwned: rZero, absent: rZero},
	// cheprasov/php-redis-lock update.
	"efecc536fe048aed035d9ea11146c51a22a50835": {name: "cheprasov update", kind: OpExtend, ttlArg: 1, ttlUnit: time.Millisecond, mode: engine.ExtendSet, ok: rOne, notOwned: rZero, absent: rZero},
	// redis-py Lock.reacquire.
	"7e5b8b1c8492617cc2e01b1f67de23df28f74ccb": {name: "redis-py reacquire", kind: OpExtend, ttlArg: 1, ttlUnit: time.Millisecond, mode: engine.ExtendSet, ok: rOne, notOwned: rZero, absent: rZero},
	// redis-py Lock.extend: ARGV[3] "0" adds to the remaining TTL, "1"
	// replaces it; either way a key without a TTL is refused.
	"f450802dd75d333e0f6e746befbe093331bc1869": {name: "redis-py extend", kind: OpExtend, ttlArg: 1, ttlUnit: time.Millisecond, mode: engine.ExtendSetIfTTL,
		addIf: func(argv [][]byte) bool { return len(argv) > 2 && string(argv[2]) == "0" }, ok: rOne, notOwned: rZero, absent: rZero, noTTL: rZero},
	// redis-py 3.0–3.4 Lock.extend: always additive.
	"9c88fe13df0b37e65edadc538dd26de4f193ce68": {name: "redis-py extend (3.0-3.4)", kind: OpExtend, ttlArg: 1, ttlUnit: time.Millisecond, mode: engine.ExtendAdd, ok: rOne, notOwned: rZero, absent: rZero, noTTL: rZero},
	// go-redsync ≥ 4.15 touch that also takes an absent key.
	"1f9a1f028f75d4d6ce17714651295ce404fad2d5": {name: "redsync touch (set nx)", kind: OpExtend, ttlArg: 1, ttlUnit: time.Millisecond, mode: engine.ExtendClaim, ok: rOne, notOwned: rZero, absent: rZero},
	// RedLock.net extend: takes an absent key; -1 when held by another value.
	"a8d0ab9aabea86c076b4e2acded05cc1c8f238df": {name: "RedLock.net extend", kind: OpExtend, ttlArg: 1, ttlUnit: time.Millisecond, mode: engine.ExtendClaim, ok: rOne, notOwned: rNeg1, absent: rZero},
	// Laravel refreshLock: seconds; 0 or less persists.
	"105542cc6c99ee666eb2c60b9e8e4a24ad25e140": {name: "Laravel refreshLock", kind: OpExtend, ttlArg: 1, ttlUnit: time.Second, mode: engine.ExtendPersist0, ok: rOne, notOwned: rZero, absent: rZero},
	// Spring Integration ≥ 6.4 renew: true / false (nil).
	"5f194d0f0fe0cffeffeffe4f82addee2324a1e7d": {name: "Spring renew", kind: OpExtend, ttlArg: 1, ttlUnit: time.Millisecond, mode: engine.ExtendSet, ok: rOne, notOwned: rNil, absent: rNil},
	// python-redis-lock extend: 0 done, 1 not the owner, 2 no TTL; seconds.
	// The Go table renewed a key without a TTL, which the script answers 2 (builtin_args.toml).
	"e3f5b07401d88811169ce7df28a07bdf06e990bd": {name: "python-redis-lock extend", kind: OpExtend, ttlArg: 1, ttlUnit: time.Second, mode: engine.ExtendSetIfTTL, ok: rZero, notOwned: rOne, absent: rOne, noTTL: ":2\r\n"},

	// node-redlock 4.x and 5: multi-key acquire, extend and release, each
	// answering the number of keys it acted on.
	"d4e6fca49c680bb234bf373ae1a42e30a8ff8a08": {name: "node-redlock acquire", kind: OpAcquire, tokenArg: 0, ttlArg: 1, ttlUnit: time.Millisecond, multi: true, ok: rOne, notOwned: rZero, absent: rZero},
	"935fa90b5b162c7b7ab562f5982b279224fe39e1": {name: "node-redlock 4.0 acquire", kind: OpAcquire, tokenArg: 0, ttlArg: 1, ttlUnit: time.Millisecond, multi: true, ok: rOne, notOwned: rZero, absent: rZero},
	"04401a2dcbdc523ea08ed84c75cca97e9929a74a": {name: "node-redlock extend", kind: OpExtend, ttlArg: 1, ttlUnit: time.Millisecond, mode: engine.ExtendSet, multi: true, ok: rOne, notOwned: rZero, absent: rZero},
	"f4a8a79d6104fa5573d6e182920d5b6a3e148ffd": {name: "node-redlock 4.0 extend", kind: OpExtend, ttlArg: 1, ttlUnit: time.Millisecond, mode: engine.ExtendSet, multi: true, ok: rOne, notOwned: rZero, absent: rZero},
	"12c93ff475b2fa8badc1bcee7255b6a36daa3582": {name: "node-redlock release", kind: OpRelease, multi: true, ok: rOne, notOwned: rZero, absent: rZero},
	// @sesamecare-oss/redlock 1.x (the maintained node-redlock fork): node-redlock
	// 5's scripts after a redis.pcall("SELECT", ARGV[1]), the token in ARGV[2]
	// and the TTL in ARGV[3].
	"839536552af886818e0813b5d81bec3336d94ab9": {name: "sesamecare redlock acquire", kind: OpAcquire, tokenArg: 1, ttlArg: 2, ttlUnit: time.Millisecond, multi: true, dbArg: 1, ok: rOne, notOwned: rZero, absent: rZero},
	"2244312780c468362b1ed6c55fd72cc5e3517638": {name: "sesamecare redlock extend", kind: OpExtend, tokenArg: 1, ttlArg: 2, ttlUnit: time.Millisecond, mode: engine.ExtendSet, multi: true, dbArg: 1, ok: rOne, notOwned: rZero, absent: rZero},
	"662a3c3e8e989c83166a9791723691b618d27881": {name: "sesamecare redlock release", kind: OpRelease, tokenArg: 1, multi: true, dbArg: 1, ok: rOne, notOwned: rZero, absent: rZero},
	// redis-semaphore 5 Mutex: compare-and-delete (the DEL's count or 0) and
	// compare-and-PEXPIRE (1 or 0), the key and token in locals.
	"9c3a455e708879fedd31f9be93c7f57a228dd6b6": {name: "redis-semaphore release", kind: OpRelease, ok: rOne, notOwned: rZero, absent: rZero},
	"91e12f6ebb7ea534f5ad5273c84a2181b727f30a": {name: "redis-semaphore refresh", kind: OpExtend, ttlArg: 1, ttlUnit: time.Millisecond, mode: engine.ExtendSet, ok: rOne, notOwned: rZero, absent: rZero},
	// rueidislock (rueidis 1.0): SET NX PX or PXAT (a Unix time in ms), each
	// followed by a GET for client-side caching (OK or nil);
	// compare-and-PEXPIREAT (1 or 0); compare-and-delete (1 or 0).
	"cf9786bcf2df2734ef4283a1bb09d9dbf5eeffd6": {name: "rueidislock acquire", kind: OpAcquire, tokenArg: 0, ttlArg: 1, ttlUnit: time.Millisecond, ok: rOK, notOwned: rNil, absent: rNil},
	"9cd973e88e094776eb1ee4b10dd4a0f1d49ae5c1": {name: "rueidislock acquire (PXAT)", kind: OpAcquire, tokenArg: 0, ttlArg: 1, ttlUnit: time.Millisecond, absolute: true, ok: rOK, notOwned: rNil, absent: rNil},
	"636482d07912dd888d0e3d870b75d862078fff7f": {name: "rueidislock extend", kind: OpExtend, ttlArg: 1, ttlUnit: time.Millisecond, absolute: true, mode: engine.ExtendSet, ok: rOne, notOwned: rZero, absent: rZero},
	"8345b63e9cdf43d4b40c02277dd8095639769f07": {name: "rueidislock release", kind: OpRelease, ok: rOne, notOwned: rZero, absent: rZero},
	// redlock-universal 0.8 atomic extend: ARGV[1] token, ARGV[2] the least
	// TTL left (ms) for the extension to go ahead, ARGV[3] the new TTL (ms);
	// answers {1, TTL left before}, {0, TTL left} or {-1, TTL left or -2}.
	"ce66ba022a51fcfb9fc9ccc53e6451072ae9472d": {name: "redlock-universal atomic extend", kind: OpExtendIfLeft, minArg: 1, ttlArg: 2, ttlUnit: time.Millisecond},
	// redlock-universal 0.8 inspect: {value, PTTL}, or nil.
	"d1bebdba7250f1ac928f967364832c96b10a6f31": {name: "redlock-universal inspect", kind: OpInspect, tokenArg: -1},
	// simple-redis-mutex 3 release: compare-and-delete, then PUBLISH on
	// KEYS[2] a JSON naming the key and value; no reply (nil).
	"7965b247008f47847a66205eb399c8bfc1a358cd": {name: "simple-redis-mutex release", kind: OpRelease, ok: rNil, notOwned: rNil, absent: rNil,
		publish: func(key, token string) string { return fmt.Sprintf(`{ "key": "%s", "value": "%s" }`, key, token) }},
	// node-redlock 3 acquire: SET NX PX; OK or nil.
	"af941bd341c75f42f71417c790ff831ddf365132": {name: "node-redlock 3 acquire", kind: OpAcquire, tokenArg: 0, ttlArg: 1, ttlUnit: time.Millisecond, ok: rOK, notOwned: rNil, absent: rNil},

	// Laravel add: SETEX if absent; OK or false (nil).
	"b8dfde8c861025bd12fb6398edfed6323c49d945": {name: "Laravel add", kind: OpAcquire, tokenArg: 0, ttlArg: 1, ttlUnit: time.Second, ok: rOK, notOwned: rNil, absent: rNil},

	// bsm/redislock 0.9 obtain: SET NX PX ARGV[3]; a key whose value starts
	// with the caller's token (its first ARGV[2] bytes) is taken over.
	"e16f7c44afa75fbb95a41921267d0e13df09bad5": {name: "bsm/redislock obtain", kind: OpAcquire, tokenArg: 0, ttlArg: 2, ttlUnit: time.Millisecond,
		reclaim: oldSameTokenPrefix, ok: rOK, notOwned: rNil, absent: rNil},

	// go-zero RedisLock acquire (core/stores/redis/lockscript.lua): the
	// holder's id renews the lock (SET PX, "OK"), anyone else's is SET NX
	// PX (OK or nil).
	"219aeced36860dc998017dffe18ecace408fa461": {name: "go-zero acquire", kind: OpAcquire, tokenArg: 0, ttlArg: 1, ttlUnit: time.Millisecond,
		reclaim: oldSameToken, ok: rOK, notOwned: rNil, absent: rNil},

	// bsm/redislock 0.9 PTTL: the TTL if owned, else -3.
	"0346cd486b0a21da6d24adcd2e2905865b5df13d": {name: "bsm/redislock pttl", kind: OpOwnerTTL, notOwned: ":-3\r\n", absent: ":-3\r\n"},
	// pottery acquired: the TTL if owned and positive, else 0.
	"92f8764d904ca76b901c158faf6af0f73d334991": {name: "pottery acquired", kind: OpOwnerTTL, positive: true, notOwned: rZero, absent: rZero},

	// Symfony Lock RedisStore 5.2 and later: save, saveRead,
	// putOffExpiration, delete and exists, each answering true (1) or false
	// (nil). ARGV[1] is the client's clock, used only by the second spelling
	// of each (for servers without TIME in scripts); the masters' own clocks
	// are used either way. ARGV[2] is the token, ARGV[3] the TTL in ms;
	// delete takes the token in ARGV[1].
	"5636a2a41323829f84c41e69ddcf2de7d7432b11": oldSymfonySave,
	"73d182f8abc521a91383df48dbf6e9dac99da9b0": oldSymfonySave,
	"f7d725f6ae106cab687e309ef04801ba17f0d6e4": oldSymfonySaveRead,
	"a5c0beea97d22dc08ccabb88e8c3340f3e38d8be": oldSymfonySaveRead,
	"25f9def9e2d06f4ad37130d4e10bfca1bc6f9b51": oldSymfonyPutOff,
	"87537dcf221e968c1355721883d95274fa80dbe0": oldSymfonyPutOff,
	"9d9428c355c9b0b9f7715b2aff124bec14160056": {name: "Symfony delete", kind: OpRWRelease, tokenArg: 0, ok: rOne, notOwned: rNil, absent: rNil},
	"0c77bafc6b9e48ba001199b3012319d11cebfb0a": oldSymfonyExists,
	"86a7d5a034ce28460ceeb2cc0d07b713d9863558": oldSymfonyExists,
	// Symfony Lock RedisStore 5.2 and later asks once whether scripts may
	// call TIME: SET symfony_check_support_time 1 PX 1.
	"ae83ba9b54b4150309803e466914769c75170175": {name: "Symfony TIME probe", kind: OpNotALock},
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
		"a090809f49e3ad9e52bb5785603c33d083bc0e10": acquire,
		"3c2d4161e58dd28beae8f7fee7fcc19a70eb3bb6": acquire,
		"98a0c017653008bb69b9eb3e64c3f78e0849c37d": acquire,
		// unlockInnerAsync: 3.11–3.21, 3.22–3.23, ≥ 3.24.
		"9c374801314dc6ea9bf16c7e257250d9b8a80609": {name: "Redisson unlock (3.11-3.21)", kind: OpHashRelease, tokenArg: 2, ttlArg: 1, ttlUnit: time.Millisecond, form: HashPublishFixed},
		"fdbf71922b92b6210097a1c91f2ff2bf50bc77d6": {name: "Redisson unlock (3.22-3.23)", kind: OpHashRelease, tokenArg: 2, ttlArg: 1, ttlUnit: time.Millisecond, form: HashPublishArg},
		"dbb31ff491c13918cf2cdc841aa196676b2a62ab": {name: "Redisson unlock", kind: OpHashRelease, tokenArg: 2, ttlArg: 1, ttlUnit: time.Millisecond, form: HashPublishLatch},
		// renewExpirationAsync (≤ 3.43) and LockTask's batch (≥ 3.44).
		"0750b1c76f1074d998f2ecb995bcc0b87fcd1cf5": renew,
		"abfa810b3dac879e8a0feed07ff81e7052f11252": {name: "Redisson batched renewal", kind: OpHashExtendBatch, tokenArg: 1, ttlArg: 0, ttlUnit: time.Millisecond, multi: true},
		// forceUnlockAsync.
		"4f5061130d3cfcc31c73ca88d614f1e3587f4e34": {name: "Redisson forceUnlock", kind: OpHashForceUnlock, tokenArg: -1},
	}
	for d, sp := range specs {
		out[d] = sp
	}
	// redis-semaphore 5's Semaphore: acquire and refresh, answering 1 or 0;
	// ARGV[1] the number of permits, ARGV[2] the identifier, ARGV[3] the
	// lock timeout in ms.
	out["16bb7f81b527b9fa30be08f188ce183e6120d85b"] = &oldSpec{name: "redis-semaphore Semaphore acquire", kind: OpPermitAcquire, limitArg: 0, tokenArg: 1, ttlArg: 2, ttlUnit: time.Millisecond, ok: rOne, notOwned: rZero, absent: rZero}
	out["e739f8051b6611c4bad5b041b79a24fce45a6069"] = &oldSpec{name: "redis-semaphore Semaphore refresh", kind: OpPermitRefresh, limitArg: 0, tokenArg: 1, ttlArg: 2, ttlUnit: time.Millisecond, ok: rOne, notOwned: rZero, absent: rZero}
	return out
}()

var oldWireSHAs = map[string]string{
	"4e92fdc63815b3a0a2dd1c1df3694de73607c88d": "c0c707c4bec016dafd187acc09028350cd8b3f6d", // antirez_redlock_rb
	"80a1b5f2cfccec3b7119ba7721d2127682b691a7": "e16f7c44afa75fbb95a41921267d0e13df09bad5", // bsm_redislock_v0
	"6484da7d58920897fdc22b7f9afd1a3d47524ea8": "0346cd486b0a21da6d24adcd2e2905865b5df13d", // bsm_redislock_v0
	"a7aba3bc5d6e99b3003da8b9d80a63b9f4092ecf": "d4477b9f7579af482457f0c2f363525cff4ea1d4", // bsm_redislock_v0, node_redlock_v3
	"cf0e94b2e9ffc7e04395cf88f7583fc309985910": "c0c707c4bec016dafd187acc09028350cd8b3f6d", // bsm_redislock_v0, node_redlock_v3
	"9bdce90060b1eb1923ba581ffba7051865f063d7": "42caa3859bd6037743b55b0464defac8bf080b0e", // cheprasov
	"b414769872ec8518662b9f29e83fc691b0349f45": "efecc536fe048aed035d9ea11146c51a22a50835", // cheprasov
	"a08c9c69b7c07ae2485190873b90d128a23e502d": "b8dfde8c861025bd12fb6398edfed6323c49d945", // laravel
	"d5f94f1848f0c54fff99d99dbc4d54184a157c02": "105542cc6c99ee666eb2c60b9e8e4a24ad25e140", // laravel
	"647c65a442733a1aa440f99908d249d13b4d6c4a": "c0c707c4bec016dafd187acc09028350cd8b3f6d", // laravel
	"acaf90b4697bb48bb5f603e9e613a54df7536c70": "f4a8a79d6104fa5573d6e182920d5b6a3e148ffd", // node_redlock_4
	"d01fb69e6ecc8bad3ca9bacba9f4f9e96862313f": "935fa90b5b162c7b7ab562f5982b279224fe39e1", // node_redlock_4
	"1d48b4c6fea2cdadc46b3346de5c2eaf121c7bb3": "04401a2dcbdc523ea08ed84c75cca97e9929a74a", // node_redlock_4
	"517e7ed95f00c0c4a209c6a7afcc6ab797d30b85": "12c93ff475b2fa8badc1bcee7255b6a36daa3582", // node_redlock_4
	"e5a322e2634ef59a516e8ea150cb085afafee684": "d4e6fca49c680bb234bf373ae1a42e30a8ff8a08", // node_redlock_4, node_redlock_v4
	"862f31bf38e9b63ce28d6e9e5143551bb34ef981": "af941bd341c75f42f71417c790ff831ddf365132", // node_redlock_v3
	"ce46f80993d5dac20dd066eb301a4e37994bdbed": "04401a2dcbdc523ea08ed84c75cca97e9929a74a", // node_redlock_v4
	"0f0f23b9048b36752b5be114f357ba083449f908": "12c93ff475b2fa8badc1bcee7255b6a36daa3582", // node_redlock_v4
	"96da70f7716f27d278a5218544df37fd8b0a5e4c": "d4e6fca49c680bb234bf373ae1a42e30a8ff8a08", // node_redlock_v5
	"aed6f382e410db8ba7926d4e5e9aab410bf2a78a": "04401a2dcbdc523ea08ed84c75cca97e9929a74a", // node_redlock_v5
	"e4612211c9f8f51c257e26e056b0a654b3187242": "12c93ff475b2fa8badc1bcee7255b6a36daa3582", // node_redlock_v5
	"a3c474d56e072c9dde09ba0b8a0018a026cdff7f": "c0c707c4bec016dafd187acc09028350cd8b3f6d", // php_lock_2x
	"d220654d7721ae520b15ed0e24a4cc97024efa08": "c0c707c4bec016dafd187acc09028350cd8b3f6d", // php_lock_3x
	"f5f7bd3a3aa4a63c507c1155c5ea1219b350d992": "92f8764d904ca76b901c158faf6af0f73d334991", // pottery
	"ba015a80261b616e7a62d35df0b8e3edbe6c9414": "d4477b9f7579af482457f0c2f363525cff4ea1d4", // pottery
	"a4aada0b36710970eedaaaeec4a6b7d8c78c4f80": "c0c707c4bec016dafd187acc09028350cd8b3f6d", // pottery
	"fed16109024d968d9496e4140fe1355bac05ebff": "e3f5b07401d88811169ce7df28a07bdf06e990bd", // python_redis_lock
	"a4e8783852e6b949f9ef3a97212805108459a890": "f450802dd75d333e0f6e746befbe093331bc1869", // redispy
	"4a484ac024e9b025224cd9f8e1d59dbf3c15d00d": "9c88fe13df0b37e65edadc538dd26de4f193ce68", // redispy
	"1cac51482acf5858da00f6d685d68f886cd6b6b2": "7e5b8b1c8492617cc2e01b1f67de23df28f74ccb", // redispy
	"c3f8721cbb97f72bc19e972846bd7aaf91901658": "7207705fe594df3ae9284ac1bb02cb839e6bb6d6", // redispy
	"9f614a785a5f9ae8c6396c6b4bf94d2087342603": "a8d0ab9aabea86c076b4e2acded05cc1c8f238df", // redlock_net
	"18b2a577dbe847b16bebde190d69a1613d68e60e": "c0c707c4bec016dafd187acc09028350cd8b3f6d", // redlock_net
	"8e4905cee18e7c3188d10f2b8b170e403baed34f": "c0c707c4bec016dafd187acc09028350cd8b3f6d", // redlock_rb_gem
	"00583931c4e4d483f6233879c133c71ed5393f9d": "c0c707c4bec016dafd187acc09028350cd8b3f6d", // redsync_v4
	"e950836ed1e694540c503ef9972b8de518044d3b": "5f851f2ef1cdcac21aa82b064c9ac022a9a7adb0", // redsync_v4
	"d75bb8b5bd13532ddedd17762e772346e39b321e": "d4477b9f7579af482457f0c2f363525cff4ea1d4", // redsync_v4
	"b6b55c439e02c6f52ffb8be7ec8c0d0ac816ea79": "1f9a1f028f75d4d6ce17714651295ce404fad2d5", // redsync_v4
	"bec85b1c518b7ba0348a49c79b24adbb1ca95d3b": "c0c707c4bec016dafd187acc09028350cd8b3f6d", // ronnylt_redlock_php, symfony_le5
	"194f3902b2dd08557818d09fc2e7682d91480e53": "c0c707c4bec016dafd187acc09028350cd8b3f6d", // shedlock
	"67256370c2d1c87e2250898075542b1a7fa5b917": "d4477b9f7579af482457f0c2f363525cff4ea1d4", // shedlock
	"879e0f7b8d83c3266d4e996627438c05dbda0b89": "5f194d0f0fe0cffeffeffe4f82addee2324a1e7d", // spring_int_ge6
	"ae948f48c8da9feb2e215c474a412c605d33ff30": "d4477b9f7579af482457f0c2f363525cff4ea1d4", // symfony_le5
	"64fb5624bc429fd3a7351146e3f479a4c8bb251e": "c0c707c4bec016dafd187acc09028350cd8b3f6d", // yii2
	// Symfony Lock 5.2 and later (the same text that 7.2 and later send by EVALSHA).
	"6fdee501a3714553b74c0d67687b921b90b05d18": "5636a2a41323829f84c41e69ddcf2de7d7432b11", // symfony save
	"abdbb1413a25737fc4cfb9cf79ace1a22dad6ab3": "73d182f8abc521a91383df48dbf6e9dac99da9b0", // symfony save, ARGV clock
	"b5745b5be27d9033eb5d3eb254df2faf502b88df": "f7d725f6ae106cab687e309ef04801ba17f0d6e4", // symfony saveRead
	"dee54f77398d3c6d122b4111f3af8ccf1a93ac93": "a5c0beea97d22dc08ccabb88e8c3340f3e38d8be", // symfony saveRead, ARGV clock
	"63be12a3515941092212f15c08327d60916de9fa": "25f9def9e2d06f4ad37130d4e10bfca1bc6f9b51", // symfony putOffExpiration
	"fe7bee082a8220c6b621ace999a1ab57c4ab5145": "87537dcf221e968c1355721883d95274fa80dbe0", // symfony putOffExpiration, ARGV clock
	"a70f7f5087a0cb2c2c9ca50d1f64e234c2628f0c": "9d9428c355c9b0b9f7715b2aff124bec14160056", // symfony delete
	"3b6bdbbe16f821f49177b16c7707f331f015a779": "0c77bafc6b9e48ba001199b3012319d11cebfb0a", // symfony exists
	"e27f94ac94f5d96f23f2e8697462233b6349a566": "86a7d5a034ce28460ceeb2cc0d07b713d9863558", // symfony exists, ARGV clock
	// Redisson (redisson.go's init).
	"9401052d872adfd0179ef8c8e8c028512707629a": "a090809f49e3ad9e52bb5785603c33d083bc0e10",
	"dad0f8d619e548e04f21fb48d50be5034df3adae": "3c2d4161e58dd28beae8f7fee7fcc19a70eb3bb6",
	"149c5a8bf18676fd99e9e6e24923bd64d9b62f94": "98a0c017653008bb69b9eb3e64c3f78e0849c37d",
	"3ffe249c16dee540ac8ab32e39bd408626b9aff7": "9c374801314dc6ea9bf16c7e257250d9b8a80609",
	"778cea8aada230ae060b432fc333adaec85f2f4c": "fdbf71922b92b6210097a1c91f2ff2bf50bc77d6",
	"6866459238a13a701d42f4971f12d9f3a50e2442": "dbb31ff491c13918cf2cdc841aa196676b2a62ab",
	"8e19a1ddbdee9138df9f32a480c57addab4353d1": "0750b1c76f1074d998f2ecb995bcc0b87fcd1cf5",
	"6a3d31570dc6f4b0bd32bcdc8e75667747c6f635": "abfa810b3dac879e8a0feed07ff81e7052f11252",
	"605e338249a7a1d40df83b04f7658354f883b41b": "4f5061130d3cfcc31c73ca88d614f1e3587f4e34",
	// redis-semaphore 5.8 (its init).
	"43ebdb49120d170e08af560cb4e46e36f8585936": "16bb7f81b527b9fa30be08f188ce183e6120d85b",
	"999a49a1d07671a8027165641001f5bad44608b3": "e739f8051b6611c4bad5b041b79a24fce45a6069",
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
