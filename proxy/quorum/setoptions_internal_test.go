package quorum

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
		if _, msg := ParseSet(bs(a)); msg != "" {
			t.Errorf("%v: %s", a, msg)
		}
	}
	// Repeated options, as Redis takes them: the last expiry counts, and
	// only its value is read.
	for _, tc := range []struct {
		args   []string
		expire string
		n      int64
		msg    string
	}{
		{[]string{"nx", "px", "100", "px", "200"}, "px", 200, ""},
		{[]string{"nx", "ex", "1", "EX", "2"}, "ex", 2, ""},
		{[]string{"px", "abc", "px", "5"}, "px", 5, ""},
		{[]string{"nx", "nx", "keepttl", "keepttl", "get", "get"}, "", 0, ""},
		{[]string{"NX\x00junk", "PX", "7"}, "px", 7, ""},
		{[]string{"px", "5", "px", "abc"}, "", 0, "ERR value is not an integer or out of range"},
		{[]string{"px", "5", "ex", "5"}, "", 0, "ERR syntax error"},
		{[]string{"ex", "5", "px", "5"}, "", 0, "ERR syntax error"},
		{[]string{"px", "5", "pxat", "5"}, "", 0, "ERR syntax error"},
		{[]string{"px", "5", "px"}, "", 0, "ERR syntax error"},
		{[]string{"px", "5", "keepttl"}, "", 0, "ERR syntax error"},
	} {
		o, msg := ParseSet(bs(append([]string{"set", "k", "v"}, tc.args...)))
		if msg != tc.msg || msg == "" && (o.Expire != tc.expire || o.N != tc.n) {
			t.Errorf("%q: %+v %q, want %s %d %q", tc.args, o, msg, tc.expire, tc.n, tc.msg)
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
			if got := SetOption([]byte(in)); got != name {
				t.Fatalf("SetOption(%q) = %q", in, got)
			}
		}
	}
	// Not options: other words, prefixes, and a Kelvin sign for the K of
	// KEEPTTL, which Redis does not take for a k either.
	for _, in := range []string{"", "n", "nxx", "p x", "EXATT", "\u212aEEPTTL", "n\x00"} {
		if got := SetOption([]byte(in)); got != "" {
			t.Fatalf("SetOption(%q) = %q", in, got)
		}
	}
	args := bs([]string{"SET", "lock:k", "token", "NX", "PX", "30000"})
	if n := testing.AllocsPerRun(100, func() { _, _ = ParseSet(args) }); n != 0 {
		t.Fatalf("ParseSet: %v allocations", n)
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
	f.Add("px", "1", "px", "2", "nx")
	f.Fuzz(func(t *testing.T, a, b, c, d, e string) {
		args := bs([]string{"set", "k", "v", a, b, c, d, e})
		o, msg := ParseSet(args)
		if msg == "" && o.Expire != "" && o.N <= 0 {
			t.Fatalf("accepted a non-positive expire: %+v", o)
		}
		// The expiry taken is the last one, and every expiry option
		// before it is of the same kind (Redis refuses two kinds).
		if msg == "" && o.Expire != "" {
			last := -1
			for i := 3; i < len(args); i++ {
				switch SetOption(args[i]) {
				case "ex", "px", "exat", "pxat":
					if SetOption(args[i]) != o.Expire {
						t.Fatalf("%q: took %s beside %q", args, o.Expire, args[i])
					}
					last = i
					i++
				}
			}
			if n, err := ParseInt(args[last+1]); err != nil || n != o.N {
				t.Fatalf("%q: took %d, the last expiry is %q", args, o.N, args[last+1])
			}
		}
	})
}
