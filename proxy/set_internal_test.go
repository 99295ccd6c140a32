package proxy

import (
	"strings"
	"testing"
)

func TestParseSet(t *testing.T) {
	ok := [][]string{
		{"set", "k", "v", "nx", "px", "10"},
		{"set", "k", "v", "PX", "10", "NX"},
		{"set", "k", "v", "nx", "get", "ex", "1"},
		{"set", "k", "v", "keepttl", "xx"},
		{"set", "k", "v"},
	}
	for _, a := range ok {
		if _, msg := parseSet(bs(a)); msg != "" {
			t.Errorf("%v: %s", a, msg)
		}
	}
}

// SET's options are read in any case of their ASCII letters, as Redis
// reads them (strcasecmp), and without an allocation.
func TestSetOptionsInAnyCase(t *testing.T) {
	for _, name := range setOptionNames {
		up := strings.ToUpper(name)
		mixed := []byte(name)
		mixed[0] = up[0]
		for _, in := range []string{name, up, string(mixed)} {
			if got := setOption([]byte(in)); got != name {
				t.Fatalf("setOption(%q) = %q", in, got)
			}
		}
	}
	// Not options: other words, prefixes, and a Kelvin sign for the K of
	// KEEPTTL, which Redis does not take for a k either.
	for _, in := range []string{"", "n", "nxx", "p x", "EXATT", "\u212aEEPTTL", "n\x00"} {
		if got := setOption([]byte(in)); got != "" {
			t.Fatalf("setOption(%q) = %q", in, got)
		}
	}
	args := bs([]string{"SET", "lock:k", "token", "NX", "PX", "30000"})
	if n := testing.AllocsPerRun(100, func() { _, _ = parseSet(args) }); n != 0 {
		t.Fatalf("parseSet: %v allocations", n)
	}
}

func bs(a []string) [][]byte {
	out := make([][]byte, len(a))
	for i, s := range a {
		out[i] = []byte(s)
	}
	return out
}

func FuzzParseSet(f *testing.F) {
	f.Add("k", "v", "nx", "px", "100")
	f.Add("k", "v", "EX", "-1", "NX")
	f.Fuzz(func(t *testing.T, a, b, c, d, e string) {
		o, msg := parseSet(bs([]string{"set", a, b, c, d, e}))
		if msg == "" && o.expire != "" && o.n <= 0 {
			t.Fatalf("accepted a non-positive expire: %+v", o)
		}
	})
}
