package lockscripts

import (
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
	Publish  string // the message for publishSample, "" for none
	DBArg    int
	Shared   bool
	Form     int
	Reclaim  string // the answers on reclaimSamples
	OK       string
	NotOwned string
	Absent   string
	NoTTL    string
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
		OK: sp.OK, NotOwned: sp.NotOwned, Absent: sp.Absent, NoTTL: sp.NoTTL}
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
// each to the spec of the same digest.
func TestBuiltinTableMatchesTheGoTable(t *testing.T) {
	if got, want := slices.Sorted(maps.Keys(builtin)), slices.Sorted(maps.Keys(oldBuiltin)); !slices.Equal(got, want) {
		t.Fatalf("digests:\n got %v\nwant %v", got, want)
	}
	for d, old := range oldBuiltin {
		if got, want := viewSpec(builtin[d]), viewOld(old); got != want {
			t.Errorf("%s:\n got %+v\nwant %+v", d, got, want)
		}
	}
	if got, want := WireSHAs(), slices.Sorted(maps.Keys(oldWireSHAs)); !slices.Equal(got, want) {
		t.Fatalf("wire SHA1s:\n got %v\nwant %v", got, want)
	}
	for sha, d := range oldWireSHAs {
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
}
