// Package scripteq is the differential test of the lock scripts the proxy
// recognises: each built-in script, with random arguments and random prior
// states of its keys, runs through the proxy binary in front of three
// masters (as a quorum operation) and, as the library's own Lua, by EVAL
// on a plain redis-server given the same prior state; the replies and the
// keys left on every master must be what the plain Redis answered and
// kept.
package scripteq

import (
	"crypto/sha1"
	"encoding/hex"
	"encoding/json"
	"flag"
	"fmt"
	"maps"
	"math/rand"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redlock-proxy/redlock-proxy/internal/redistest"
	"github.com/redlock-proxy/redlock-proxy/proxy/lockscripts"
)

var binary string

func TestMain(m *testing.M) { redistest.MainWithProxy(m, "../cmd/redlock-proxy", &binary) }

var (
	eqSeed     = flag.Int64("scripteq.seed", 0, "seed of the differential test of lock scripts (0: from the clock)")
	eqCases    = flag.Int("scripteq.cases", 0, "cases to run (0: the short form's, unless -scripteq.duration)")
	eqDuration = flag.Duration("scripteq.duration", 0, "run cases for this long (the long form)")
	eqKeepOn   = flag.Bool("scripteq.keepgoing", false, "report every difference rather than stop at the tenth")
)

// shortCases is the short form's number of cases: a few seconds.
const shortCases = 1500

// tolerance is how far apart two PTTLs (or scores, or TTLs in a reply)
// may be and still be the same: the proxy and the plain Redis run the
// script some milliseconds apart.
const tolerance = 750

// scriptTexts reads the libraries' texts.
func scriptTexts(t *testing.T) map[string]string {
	b, err := os.ReadFile("testdata/scripts.json")
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]string
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatal(err)
	}
	for _, d := range catalog {
		if d.src != "" {
			m[d.texts[0]] = d.src
		}
	}
	return m
}

func sha1hex(s string) string {
	h := sha1.Sum([]byte(s))
	return hex.EncodeToString(h[:])
}

// Every text of the catalog is the built-in script it is listed under, by
// its text and, where builtin.toml lists it, by its SHA1.
func TestCatalogIsRecognised(t *testing.T) {
	texts := scriptTexts(t)
	seen := map[string]bool{}
	for _, d := range catalog {
		if d.src != "" {
			continue // declared to the proxy in [[scripts]]
		}
		for _, name := range d.texts {
			src, ok := texts[name]
			if !ok {
				t.Errorf("%s: no text %q in testdata/scripts.json", d.name, name)
				continue
			}
			sp := lockscripts.Builtin(src)
			if sp == nil || sp.Name != d.name {
				t.Errorf("%s: the text %s is recognised as %v", d.name, name, sp)
				continue
			}
			if by := lockscripts.BySHA(sha1hex(src)); by != nil && by != sp {
				t.Errorf("%s: the SHA1 of %s is %q's", d.name, name, by.Name)
			}
			seen[d.name] = true
		}
	}
	// Every built-in lock script is in the catalog, but the TIME probe
	// (not a lock: it runs on the backend as it is).
	for _, sha := range lockscripts.WireSHAs() {
		if sp := lockscripts.BySHA(sha); !seen[sp.Name] && sp.Op != lockscripts.OpNotALock {
			t.Errorf("the built-in script %q is not in the catalog", sp.Name)
		}
	}
}

// stack is the proxy binary in front of three masters, and a plain Redis.
type stack struct {
	proxy   *conn
	masters []*conn
	plain   *conn
	addr    string
}

func startStack(t *testing.T) *stack {
	masters := redistest.StartN(t, 3)
	plain := redistest.Start(t)
	// The scripts of the catalog that are not built in, declared.
	var decls strings.Builder
	dir := t.TempDir()
	for _, d := range catalog {
		if d.src == "" {
			continue
		}
		file := filepath.Join(dir, d.name)
		if err := os.WriteFile(file, []byte(d.src), 0o644); err != nil {
			t.Fatal(err)
		}
		fmt.Fprintf(&decls, "[[scripts]]\nfile = %q\n%s", file, d.decl)
	}
	p := redistest.StartProxy(t, binary, func(listen string) string {
		return fmt.Sprintf("[proxy]\nlisten = %q\n[redlock]\nmasters = [%s]\nrestart_guard = false\nnode_timeout = \"1s\"\n[log]\nformat = \"json\"\nlevel = \"warn\"\n%s",
			listen, redistest.Quote(redistest.Addrs(masters)), decls.String())
	}, redistest.WithProxyLog())
	s := &stack{addr: p.Addr}
	var err error
	mustDial := func(addr string) *conn {
		c, err2 := dial(addr)
		if err2 != nil {
			t.Fatal(err2)
		}
		t.Cleanup(c.Close)
		return c
	}
	s.proxy = mustDial(p.Addr)
	for _, m := range masters {
		s.masters = append(s.masters, mustDial(m.Addr))
	}
	s.plain = mustDial(plain.Addr)
	_ = err
	return s
}

// TestScriptsEquivalent runs the differential test: the short form in the
// suite, the long form with -scripteq.duration (scripts/scripteq.sh).
func TestScriptsEquivalent(t *testing.T) {
	texts := scriptTexts(t)
	seed := *eqSeed
	if seed == 0 {
		seed = time.Now().UnixNano()
	}
	t.Logf("seed %d (replay: go test ./scripteq -run TestScriptsEquivalent -args -scripteq.seed=%d)", seed, seed)
	s := startStack(t)
	g := &gen{r: rand.New(rand.NewSource(seed))}
	cases := *eqCases
	if cases == 0 && *eqDuration == 0 {
		cases = shortCases
	}
	deadline := time.Now().Add(*eqDuration)
	st := stats{perScript: map[string]int{}, outcomes: map[string]int{}, refusals: map[string]int{}}
	start := time.Now()
	for n := 1; ; n++ {
		if cases > 0 && n > cases || *eqDuration > 0 && time.Now().After(deadline) {
			break
		}
		c := g.next(n, time.Now(), texts)
		diff := s.run(t, c, texts[c.text], &st)
		if diff != "" {
			st.diffs++
			t.Errorf("seed %d, %s\n  %s", seed, c, strings.ReplaceAll(diff, "\n", "\n  "))
			if st.diffs >= 10 && !*eqKeepOn {
				t.Fatalf("stopped after %d differences", st.diffs)
			}
		}
		st.cases++
	}
	t.Logf("seed %d: %d cases in %s, %d differences; %s", seed, st.cases, time.Since(start).Round(time.Millisecond), st.diffs, st.summary())
	if testing.Verbose() {
		for _, k := range slices.Sorted(maps.Keys(st.refusals)) {
			t.Logf("refused %d× %s", st.refusals[k], k)
		}
	}
}

type stats struct {
	cases, diffs int
	perScript    map[string]int
	outcomes     map[string]int
	refusals     map[string]int // script: the proxy's refusal, where the plain Redis answered otherwise
}

func (s stats) summary() string {
	var parts []string
	for _, k := range []string{"same reply", "both errors", "refused by the proxy"} {
		parts = append(parts, fmt.Sprintf("%s %d", k, s.outcomes[k]))
	}
	return strings.Join(parts, ", ") + fmt.Sprintf("; %d scripts", len(s.perScript))
}

// run runs one case on both sides and answers what differs ("" when
// nothing).
func (s *stack) run(t *testing.T, c *tcase, src string, st *stats) string {
	st.perScript[c.def.name]++
	keys := distinct(c.keys)
	for _, k := range keys {
		for _, m := range s.masters {
			write(m, k, c.prior[k])
		}
		p := c.prior[k]
		if lib, ok := c.plain[k]; ok {
			p = lib
		}
		write(s.plain, k, p)
	}
	before := make([]map[string]keyState, len(s.masters))
	for i, m := range s.masters {
		before[i] = map[string]keyState{}
		for _, k := range keys {
			before[i][k] = read(m, k)
		}
	}
	nk := strconv.Itoa(len(c.keys))
	args := append(append([]string{"EVAL", src, nk}, c.keys...), c.argv...)
	lr, err := s.plain.do(args...)
	if err != nil {
		t.Fatalf("plain Redis: %v", err)
	}
	if c.evalsha {
		args[0], args[1] = "EVALSHA", sha1hex(src)
		if lockscripts.BySHA(args[1]) == nil {
			args[0], args[1] = "EVAL", src
		}
	}
	pr, err := s.proxy.do(args...)
	if err != nil {
		// The proxy closed the connection: a difference, and a new one.
		if s.proxy, err = dial(s.addr); err != nil {
			t.Fatal(err)
		}
		return fmt.Sprintf("the proxy closed the connection (plain Redis answered %s)", lr)
	}
	mode := compareAll
	if c.def.state == sPermit {
		mode = compareMembers
	}
	var want func(i int, k string) keyState
	outcome := "same reply"
	switch {
	case pr.isErr() && (isRefusal(pr) || wrongType(c, pr)) && !lr.isErr():
		// A refusal: only of what no library sends, and changing nothing.
		if len(c.edge) == 0 {
			return fmt.Sprintf("the proxy refused a case on the libraries' path: %s (plain Redis: %s)", pr, lr)
		}
		outcome = "refused by the proxy"
		msg := strings.TrimPrefix(pr.s, "ERR redlock-proxy: the '"+c.def.name+"' script ")
		st.refusals[fmt.Sprintf("%s: %s (plain Redis: %c)", c.def.name, msg, lr.t)]++
		want = func(i int, k string) keyState { return before[i][k] }
	case pr.isErr() && lr.isErr():
		outcome = "both errors"
		if isRefusal(pr) {
			want = func(i int, k string) keyState { return before[i][k] }
		}
	case pr.isErr() || lr.isErr():
		return fmt.Sprintf("replies differ: proxy %s, plain Redis %s", pr, lr)
	case !sameReply(pr, lr, c.def.ttlReply):
		return fmt.Sprintf("replies differ: proxy %s, plain Redis %s", pr, lr)
	}
	if want == nil {
		plainAfter := map[string]keyState{}
		for _, k := range keys {
			plainAfter[k] = read(s.plain, k)
		}
		want = func(_ int, k string) keyState { return plainAfter[k] }
	}
	// The proxy answers once a quorum decided; the last master may take
	// a moment more.
	var diff string
	for deadline := time.Now().Add(time.Second); ; time.Sleep(20 * time.Millisecond) {
		diff = ""
		for i, m := range s.masters {
			for _, k := range keys {
				if got, w := read(m, k), want(i, k); !sameState(got, w, tolerance, mode) {
					diff += fmt.Sprintf("\nmaster %d %s: %s, want %s", i, k, got, w)
				}
			}
		}
		if diff == "" || time.Now().After(deadline) {
			break
		}
	}
	st.outcomes[outcome]++
	if diff != "" {
		return fmt.Sprintf("replies: proxy %s, plain Redis %s (%s); states differ:%s", pr, lr, outcome, diff)
	}
	return ""
}

// wrongType reports whether the proxy answered WRONGTYPE for a key that
// holds another type: it refuses every lock script on such a key, also
// where the library's script answers "not acquired" (docs/commands.md).
func wrongType(c *tcase, r reply) bool {
	return strings.HasPrefix(r.s, "WRONGTYPE") && slices.ContainsFunc(c.edge, func(e string) bool { return strings.HasSuffix(e, "holds another type") })
}

// isRefusal reports whether an error is the proxy's own refusal of a
// script's arguments or keys.
func isRefusal(r reply) bool {
	return strings.Contains(r.s, "redlock-proxy")
}

// sameReply compares two replies exactly, type included; two errors are
// the same whatever their text. With ttl, two integers of at least 100
// within the tolerance are the same (a TTL read some milliseconds apart).
func sameReply(a, b reply, ttl bool) bool {
	if a.t != b.t {
		return false
	}
	switch a.t {
	case '-':
		return true
	case ':':
		if ttl && a.n >= 100 && b.n >= 100 {
			d := a.n - b.n
			return d <= tolerance && d >= -tolerance
		}
		return a.n == b.n
	case '*':
		if len(a.a) != len(b.a) {
			return false
		}
		for i := range a.a {
			if !sameReply(a.a[i], b.a[i], ttl) {
				return false
			}
		}
		return true
	}
	return a.s == b.s
}

// bsm/redislock's obtain with every token length it may be sent, against
// a lock held by another client: 0 (GETRANGE k 0 -1 is the whole value, not
// "": the script takes over an empty value only), negative, beyond the
// token; and the holder's own lengths. The reply and the keys must be the
// script's on a plain Redis.
func TestBsmObtainTokenLengths(t *testing.T) {
	texts := scriptTexts(t)
	s := startStack(t)
	st := stats{perScript: map[string]int{}, outcomes: map[string]int{}, refusals: map[string]int{}}
	n := 0
	for _, name := range []string{"bsm/redislock obtain", "bsm/redislock 0.10 obtain"} {
		def := &catalog[slices.IndexFunc(catalog, func(d scriptDef) bool { return d.name == name })]
		for _, held := range []string{"other:meta", "tok:old", "tok", "to", "", "tok:new", "x"} {
			for _, length := range []string{"0", "-1", "-2", "-3", "-4", "-9", "1", "2", "3", "4", "7", "8", "9", "100"} {
				n++
				k := fmt.Sprintf("bsm%d:k", n)
				c := &tcase{n: n, def: def, text: def.texts[0], keys: []string{k}, argv: []string{"tok:new", length, "10000"},
					prior: map[string]keyState{k: {typ: "string", str: held, pttl: 20000}}}
				if def.keys == kMulti {
					c.keys = append(c.keys, k+"2") // absent: read as "" by GETRANGE
					c.prior[k+"2"] = absent()
				}
				if diff := s.run(t, c, texts[c.text], &st); diff != "" {
					t.Errorf("%s\n  %s", c, strings.ReplaceAll(diff, "\n", "\n  "))
				}
			}
		}
	}
	t.Logf("%d cases: %v", n, st.outcomes)
}
