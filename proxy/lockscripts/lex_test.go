package lockscripts

import (
	"strings"
	"testing"
)

// The lexer reads Lua 5.1's tokens: long brackets of every level, short
// comments that end at "\r" as at "\n", every operator.
func TestLexTokens(t *testing.T) {
	for src, want := range map[string][]string{
		"a..b...c==d~=e<=f>=g<h>i=j":            {"a", "..", "b", "...", "c", "==", "d", "~=", "e", "<=", "f", ">=", "g", "<", "h", ">", "i", "=", "j"},
		"0x1F 1e10 1.5e-3 .5 3. 1E+2 0XaBc":     {"0x1F", "1e10", "1.5e-3", ".5", "3.", "1E+2", "0XaBc"},
		"x -- c\ry --[[ c ]] z --[==[ ]] ]==]w": {"x", "y", "z", "w"},
		"--[=x\ny":                              {"y"},
		"--[\ny":                                {"y"},
		"a-b - -c":                              {"a", "-", "b", "-", "-", "c"},
		"t[ [=[x]] ]=] ]":                       {"t", "[", "x]] ", "]"},
		"[==[a]=]b]===]c]==]":                   {"a]=]b]===]c"},
		"[=[[[x]]]=]":                           {"[[x]]"},
		"[==[ [=[ ]==]":                         {" [=[ "},
		"goto x":                                {"goto", "x"},
		"f{a;b}:m'x'":                           {"f", "{", "a", ";", "b", "}", ":", "m", "x"},
		"#t%2^3/4*5":                            {"#", "t", "%", "2", "^", "3", "/", "4", "*", "5"},
	} {
		toks, err := lex(src)
		if err != nil {
			t.Errorf("%q: %v", src, err)
			continue
		}
		var got []string
		for _, tk := range toks {
			got = append(got, tk.text)
		}
		if strings.Join(got, "\x00") != strings.Join(want, "\x00") {
			t.Errorf("%q: got %q, want %q", src, got, want)
		}
	}
	toks, _ := lex("f\n(g) h --[[\n]](i) j -- x\r(k) l [[\n]](m) n '\\\n'(o)")
	var nl []string
	for _, tk := range toks {
		if tk.nl {
			nl = append(nl, tk.text)
		}
	}
	if strings.Join(nl, " ") != "( ( (" {
		t.Errorf("tokens after a line break: %q, want the first three (", nl)
	}
}
