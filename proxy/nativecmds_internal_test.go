package proxy

import "testing"

// FuzzParseAcquire: any arguments either parse to a usable acquire or give
// an error reply; nothing panics.
func FuzzParseAcquire(f *testing.F) {
	f.Add("k", "1000", "TOKEN", "t", "REENTRANT")
	f.Add("k", "lease", "WAIT", "10", "token")
	f.Add("k", "-1", "", "", "")
	f.Add("k", "99999999999999999999", "WAIT", "-1", "x")
	f.Fuzz(func(t *testing.T, key, ttl, a, b, c string) {
		args := [][]byte{[]byte("lock.acquire"), []byte(key), []byte(ttl)}
		for _, x := range []string{a, b, c} {
			if x != "" {
				args = append(args, []byte(x))
			}
		}
		o, msg := parseAcquire(args)
		if msg != "" {
			return
		}
		if o.key != key || (o.ttl <= 0) != o.lease || (o.reentrant && o.token == "") {
			t.Fatalf("%q parsed to %+v", args, o)
		}
	})
}
