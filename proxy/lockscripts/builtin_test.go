package lockscripts

import (
	"strings"
	"testing"
)

// A table of built-in scripts is refused, with the key at fault, when an
// entry is not keyed as a built-in one or says what the vocabulary does
// not.
func TestParseBuiltinRefuses(t *testing.T) {
	const (
		d1 = "278b7fc39f087c6276c7b7c08962022c4fe73ba6"
		d2 = "16d4f25a8b1272dc33002e333ca708ee3f94da4e"
	)
	entry := func(keys string) string {
		return "[[scripts]]\n" + keys + "\nop = \"release\"\ntoken_arg = 1\n"
	}
	for _, c := range []struct{ src, want string }{
		{entry(`name = "a"` + "\n" + `digests = ["` + d1 + `"]` + "\nwho = 1"), "unknown key scripts.who"},
		{entry(`digests = ["` + d1 + `"]`), "name is missing"},
		{entry(`name = "a"` + "\n" + `file = "a.lua"` + "\n" + `digests = ["` + d1 + `"]`), "file: a built-in script is known by its digests"},
		{entry(`name = "a"`), "digests: at least one"},
		{entry(`name = "a"` + "\n" + `digests = ["278B7FC39F087C6276C7B7C08962022C4FE73BA6"]`), "digests: \"278B7F"},
		{entry(`name = "a"` + "\n" + `digests = ["` + d1 + `", "` + d1 + `"]`), "digests: " + d1 + " is listed twice"},
		{entry(`name = "a"`+"\n"+`digests = ["`+d1+`"]`) + entry(`name = "b"`+"\n"+`digests = ["`+d1+`"]`), `scripts[1] (b): digests: ` + d1 + ` is already "a"'s`},
		{entry(`name = "a"`+"\n"+`digests = ["`+d1+`"]`+"\n"+`wire_shas = ["`+d2+`"]`) +
			entry(`name = "b"`+"\n"+`digests = ["`+d2+`"]`+"\n"+`wire_shas = ["`+d2+`"]`), `wire_shas: ` + d2 + ` is already "a"'s`},
		{entry(`name = "a"` + "\n" + `digests = ["` + d1 + `"]` + "\n" + `wire_shas = ["abc"]`), `wire_shas: "abc" is not a SHA1`},
		{entry(`name = "a"` + "\n" + `digests = ["` + d1 + `"]` + "\npositive = true"), `scripts[0] (a): positive is for op "owner_ttl"`},
		{entry(`name = "a"` + "\n" + `digests = ["` + d1 + `"]` + "\nmulti_reply = \"outcome\""), `scripts[0] (a): multi_reply is for multi = true`},
	} {
		_, _, err := parseBuiltin(c.src)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s\ngot %v, want %q", c.src, err, c.want)
		}
	}
	byDigest, bySHA, err := parseBuiltin(entry(`name = "a"` + "\n" + `digests = ["` + d1 + `", "` + d2 + `"]`))
	if err != nil || len(byDigest) != 2 || byDigest[d1] != byDigest[d2] || len(bySHA) != 0 {
		t.Fatalf("two digests of one entry: %v %v %v", byDigest, bySHA, err)
	}
}
