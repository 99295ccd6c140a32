package scripteq

import (
	"fmt"
	"math/rand"
	"strconv"
	"strings"
	"time"
)

// A case: one script text, its KEYS and ARGV, and the state of each key
// before it runs.

type tcase struct {
	n       int
	def     *scriptDef
	text    string // the name of the text in testdata/scripts.json
	keys    []string
	argv    []string
	prior   map[string]keyState // each distinct key of KEYS, as the masters hold it
	plain   map[string]keyState // as the plain Redis holds it, where its form differs (a semaphore's)
	evalsha bool                // sent through the proxy by EVALSHA
	edge    []string            // why it is off the libraries' path: the proxy may refuse it
}

func (c *tcase) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "case %d: %s (%s)", c.n, c.def.name, c.text)
	if c.evalsha {
		b.WriteString(" by EVALSHA")
	}
	fmt.Fprintf(&b, "\n  KEYS %q\n  ARGV [", c.keys)
	for i, a := range c.argv {
		if i > 0 {
			b.WriteString(" ")
		}
		b.WriteString(strconv.Quote(clip(a)))
	}
	b.WriteString("]")
	for _, k := range distinct(c.keys) {
		fmt.Fprintf(&b, "\n  before %s: %s", k, c.prior[k])
		if p, ok := c.plain[k]; ok {
			fmt.Fprintf(&b, " (plain Redis: %s)", p)
		}
	}
	if len(c.edge) > 0 {
		fmt.Fprintf(&b, "\n  edge: %s", strings.Join(c.edge, "; "))
	}
	return b.String()
}

func distinct(keys []string) []string {
	var out []string
	seen := map[string]bool{}
	for _, k := range keys {
		if !seen[k] {
			seen[k] = true
			out = append(out, k)
		}
	}
	return out
}

// gen draws cases from one seed.
type gen struct {
	r *rand.Rand
}

func (g *gen) pick(xs ...string) string { return xs[g.r.Intn(len(xs))] }
func (g *gen) chance(p float64) bool    { return g.r.Float64() < p }

var longToken = strings.Repeat("L", 4000)

// tokens are what the libraries send as a lock's token, and values near
// them: a prefix of one, one with a suffix, empty, spaces, bytes.
func (g *gen) token() string {
	if g.chance(0.03) {
		return longToken
	}
	return g.pick("tokA", "tokA", "tokB", "tok", "tokA:m1", "tokA:m2", "tokB:m1", "", " tokA", "tokA ", "t\x00k\xff", "0", "-1", "__write__")
}

// holder is a Redisson holder.
func (g *gen) holder() string {
	return g.pick("c1:1", "c1:1", "c2:7", "c1:2", "", "c1")
}

// numEdges are the values of a numeric argument that no library sends.
var numEdges = []string{
	"", "abc", " 100", "100 ", "1.5", "1e3", "0x10", "+100", "007", "-0", "1.0", "0.5", "-1.5",
	"9223372036854775807", "9223372036854775808", "-9223372036854775808", "99999999999999999999",
	"4611686018427387904", "9007199254740993", "nan", "inf", "-inf", " ", "1 2",
}

// arg draws one argument of kind k; edge says why it is off the
// libraries' path ("" when it is on it).
func (g *gen) arg(k argKind, now time.Time, value string) (v, edge string) {
	num := func(valid ...string) (string, string) {
		if g.chance(0.25) {
			e := g.pick(numEdges...)
			return e, "numeric argument " + strconv.Quote(e)
		}
		if g.chance(0.15) {
			// Not 1 ms: a lock that expires before the quorum answers
			// has no validity, and the proxy answers "not acquired" (or
			// "not extended") where one Redis answers that it took it
			// (docs/commands.md).
			switch e := g.pick("0", "-1", "-5000", "50", "86400000", "3600001"); e {
			case "50":
				return e, ""
			case "86400000", "3600001":
				return e, "a TTL beyond an hour"
			default:
				return e, "a TTL of " + e
			}
		}
		return g.pick(valid...), ""
	}
	switch k {
	case aToken, aValue:
		t := g.token()
		if k == aValue && g.chance(0.7) && t != longToken {
			t += g.pick(":m1", ":m2", "")
		}
		if t == longToken {
			return t, "a token of 4000 bytes"
		}
		return t, ""
	case aTTLms, aMinMs:
		return num("10000", "30000", "2500", "60000")
	case aTTLs:
		return num("10", "30", "3")
	case aLatchMs:
		return num("10000", "5000")
	case aUnixMs:
		ms := now.UnixMilli()
		if g.chance(0.2) {
			e := g.pick(strconv.FormatInt(ms-5000, 10), "0", "-1", "1")
			return e, "an expiry time in the past"
		}
		if g.chance(0.2) {
			e := g.pick(numEdges...)
			return e, "numeric argument " + strconv.Quote(e)
		}
		return strconv.FormatInt(ms+int64(g.pick2(10000, 30000, 2500)), 10), ""
	case aUnixS:
		sec := now.Unix()
		if g.chance(0.2) {
			e := g.pick(strconv.FormatInt(sec-5, 10), "0", "-1", "1")
			return e, ""
		}
		if g.chance(0.2) {
			e := g.pick(numEdges...)
			return e, "numeric argument " + strconv.Quote(e)
		}
		return strconv.FormatInt(sec+int64(g.pick2(10, 30, 3)), 10), ""
	case aPrefixLen:
		// Every integer is read exactly as the script reads it: 0,
		// negative, beyond the value.
		if g.chance(0.15) {
			e := g.pick(numEdges...)
			return e, "numeric argument " + strconv.Quote(e)
		}
		n := len(value)
		if n > 20 {
			n = 20
		}
		return strconv.Itoa(g.r.Intn(2*n+9) - n - 4), ""
	case aAddFlag:
		if g.chance(0.2) {
			return g.pick("", "00", "2", " 0", "0 "), ""
		}
		return g.pick("0", "1"), ""
	case aClockS:
		if g.chance(0.15) {
			e := g.pick("", "abc", "x1", " ")
			return e, "clock " + strconv.Quote(e)
		}
		return fmt.Sprintf("%.4f", float64(now.UnixMicro())/1e6), ""
	case aClockMs:
		if g.chance(0.15) {
			e := g.pick("", "abc", "x1", " ")
			return e, "clock " + strconv.Quote(e)
		}
		return strconv.FormatInt(now.UnixMilli(), 10), ""
	case aLimit:
		if g.chance(0.2) {
			e := g.pick(numEdges...)
			return e, "numeric argument " + strconv.Quote(e)
		}
		return g.pick("1", "2", "3", "1", "0", "-1", "100"), ""
	case aDB:
		if g.chance(0.2) {
			e := g.pick("1", "-1", "abc", "", "0.0", " 0", "0x0", "1.5", "15", "16")
			return e, "database " + strconv.Quote(e)
		}
		return "0", ""
	case aHolder:
		return g.holder(), ""
	case aMsg:
		return g.pick("0", "1", "msg"), ""
	case aPubCmd:
		if g.chance(0.2) {
			e := g.pick("PUBLISH", "set", "", "del", "publishx")
			return e, "publish command " + strconv.Quote(e)
		}
		return g.pick("publish", "spublish"), ""
	}
	panic("arg kind")
}

func (g *gen) pick2(xs ...int) int { return xs[g.r.Intn(len(xs))] }

// next draws case n.
func (g *gen) next(n int, now time.Time, scripts map[string]string) *tcase {
	def := &catalog[g.r.Intn(len(catalog))]
	c := &tcase{n: n, def: def, text: def.texts[g.r.Intn(len(def.texts))], prior: map[string]keyState{}, plain: map[string]keyState{}}
	c.evalsha = g.chance(0.2)
	base := fmt.Sprintf("eq%d:", n)
	lock := func(i int) string {
		if def.state == sPermit {
			return base + "semaphore:" + strconv.Itoa(i)
		}
		return base + "k" + strconv.Itoa(i)
	}
	switch def.keys {
	case kOne:
		c.keys = []string{lock(1)}
	case kMulti, kBatch:
		m := 1 + g.r.Intn(3)
		for i := 1; i <= m; i++ {
			c.keys = append(c.keys, lock(i))
		}
		if m > 1 && g.chance(0.3) { // a key repeated
			c.keys[g.r.Intn(m)] = c.keys[g.r.Intn(m)]
			if c.keys[0] != c.keys[1] || m > 2 && c.keys[1] == c.keys[2] || m > 2 && c.keys[0] == c.keys[2] {
				c.edge = append(c.edge, "a key repeated")
			}
		}
	case kLockChannel:
		c.keys = []string{lock(1), base + "channel"}
	case kLockChannelLatch:
		c.keys = []string{lock(1), base + "channel", base + "latch"}
	}
	var token, holder string
	for i, k := range def.argv {
		v, edge := g.arg(k, now, token)
		switch k {
		case aToken, aValue:
			token = v
		case aHolder:
			holder = v
		}
		if i == 0 && k == aPrefixLen {
			panic("prefix length before the value")
		}
		c.argv = append(c.argv, v)
		if edge != "" {
			c.edge = append(c.edge, fmt.Sprintf("ARGV[%d] %s", i+1, edge))
		}
	}
	if def.keys == kBatch {
		for range c.keys {
			h := g.holder()
			c.argv = append(c.argv, h)
			holder = h
		}
	}
	switch {
	case len(c.argv) > 0 && g.chance(0.07):
		d := 1 + g.r.Intn(len(c.argv))
		c.argv = c.argv[:len(c.argv)-d]
		c.edge = append(c.edge, fmt.Sprintf("%d ARGV missing", d))
	case g.chance(0.07):
		c.argv = append(c.argv, g.pick("x", "0", "extra"))
		if def.keys != kBatch && def.name != "redlock-universal inspect" {
			c.edge = append(c.edge, "an extra ARGV")
		}
	}
	switch def.keys {
	case kLockChannel, kLockChannelLatch:
		if g.chance(0.05) {
			c.keys = c.keys[:1]
			c.edge = append(c.edge, "KEYS missing")
		}
	case kOne:
		if g.chance(0.04) {
			c.keys = append(c.keys, lock(2))
			c.edge = append(c.edge, "an extra key")
		}
	}
	ttlArg := int64(10000)
	for i, k := range def.argv {
		if k == aTTLms && i < len(c.argv) {
			if n, err := strconv.ParseInt(c.argv[i], 10, 64); err == nil && n > 0 && n < 1e9 {
				ttlArg = n
			}
		}
	}
	for i, k := range distinct(c.keys) {
		if def.keys == kLockChannelLatch && i == 2 {
			c.prior[k] = g.latchState()
			continue
		}
		if (def.keys == kLockChannel || def.keys == kLockChannelLatch) && i == 1 {
			c.prior[k] = absent()
			continue
		}
		st, plain, wrong := g.state(def.state, token, holder, now, ttlArg)
		c.prior[k] = st
		if plain != nil {
			c.plain[k] = *plain
		}
		if wrong {
			c.edge = append(c.edge, k+" holds another type")
		}
	}
	return c
}

func (g *gen) latchState() keyState {
	if g.chance(0.8) {
		return absent()
	}
	return keyState{typ: "string", str: g.pick("0", "1", "x"), pttl: 5000}
}

func (g *gen) ttl() int64 {
	if g.chance(0.3) {
		return -1
	}
	return int64(2000 + g.r.Intn(58000))
}

// wrongType is a key of a type the script does not expect.
func (g *gen) wrongType(lock stateKind) keyState {
	types := []string{"hash", "list", "zset", "set"}
	switch lock {
	case sHash:
		types = []string{"string", "list", "zset"}
	case sRW, sPermit:
		types = []string{"string", "hash", "list"}
	}
	s := keyState{typ: g.pick(types...), pttl: g.ttl()}
	switch s.typ {
	case "string":
		s.str = g.token()
	case "hash":
		s.fields = [][2]string{{g.holder(), "1"}}
	case "zset":
		s.fields = [][2]string{{g.token(), "1"}}
	default:
		s.fields = [][2]string{{g.token(), ""}}
	}
	return s
}

// state draws the state of a lock key before a case: absent, held by the
// case's token, by another, by a value that starts with it, with and
// without a TTL, or of another type.
func (g *gen) state(kind stateKind, token, holder string, now time.Time, ttlArg int64) (st keyState, plain *keyState, wrong bool) {
	if g.chance(0.12) {
		return g.wrongType(kind), nil, true
	}
	if g.chance(0.3) {
		return absent(), nil, false
	}
	switch kind {
	case sString:
		v := g.token()
		switch {
		case g.chance(0.4):
			v = token
		case g.chance(0.3) && token != "":
			v = g.pick(token+"x", token+":m1", token[:len(token)/2], token[:len(token)-1])
		}
		return keyState{typ: "string", str: v, pttl: g.ttl()}, nil, false
	case sHash:
		h := g.holder()
		if g.chance(0.5) {
			h = holder
		}
		s := keyState{typ: "hash", fields: [][2]string{{h, g.pick("1", "1", "2", "3", "0", "x")}}, pttl: g.ttl()}
		if g.chance(0.15) {
			s.fields = append(s.fields, [2]string{h + "b", "1"})
		}
		return s, nil, false
	}
	// A sorted set of members, each alive or expired by some seconds.
	members := []string{g.token()}
	if g.chance(0.5) {
		members[0] = token
	}
	for g.chance(0.4) && len(members) < 4 {
		members = append(members, g.token())
	}
	if kind == sRW && g.chance(0.4) {
		members = append(members, "__write__")
	}
	s := keyState{typ: "zset", pttl: -1}
	lib := keyState{typ: "zset", pttl: ttlArg}
	ms := now.UnixMilli()
	maxLeft := int64(-1 << 62)
	for _, m := range members {
		left := int64(3000 + g.r.Intn(50000))
		if g.chance(0.3) {
			left = -int64(3000 + g.r.Intn(50000))
		}
		maxLeft = max(maxLeft, left)
		s.fields = append(s.fields, [2]string{m, strconv.FormatInt(ms+left, 10)})
		// redis-semaphore scores a permit by when it was taken, and
		// prunes those older than the caller's TTL.
		lib.fields = append(lib.fields, [2]string{m, strconv.FormatInt(ms-ttlArg+left, 10)})
	}
	if maxLeft > 0 && g.chance(0.85) {
		s.pttl = maxLeft
	}
	if kind == sPermit {
		return s, &lib, false
	}
	return s, nil, false
}
