package lockscripts

import "testing"

func TestNormalizeScript(t *testing.T) {
	same := [][2]string{
		{"return redis.call('GET', KEYS[1])", "return redis.call(\"get\",KEYS[1])"},
		{"if a then\n\treturn 1;\nend", "if a then return 1 end"},
		{"-- a comment\nreturn 1", "return 1"},
		{"return 1 --[[ long\ncomment ]]", "return 1"},
	}
	for _, p := range same {
		if Normalize(p[0]) != Normalize(p[1]) {
			t.Errorf("%q and %q normalise differently: %q vs %q", p[0], p[1], Normalize(p[0]), Normalize(p[1]))
		}
	}
	differ := [][2]string{
		{"return a b", "return ab"},
		{"return redis.call('get', KEYS[1])", "return redis.call('del', KEYS[1])"},
		{"return '--x'", "return ''"},
	}
	for _, p := range differ {
		if Normalize(p[0]) == Normalize(p[1]) {
			t.Errorf("%q and %q normalise alike", p[0], p[1])
		}
	}
}

func FuzzNormalizeScript(f *testing.F) {
	f.Add("if redis.call('get', KEYS[1]) == ARGV[1] then return 1 end -- x")
	f.Fuzz(func(t *testing.T, s string) {
		n := Normalize(s)
		if Normalize(s) != n {
			t.Fatalf("not deterministic: %q", s)
		}
		for i := 1; i < len(n); i++ {
			if n[i] == ' ' && n[i-1] == ' ' {
				t.Fatalf("white space left unfolded in %q", n)
			}
		}
	})
}
