package proxy

import (
	"testing"
)

// Plain passthrough asks every command whether it names a lock key: the
// answer costs no allocation when it does not, whatever the command's
// case, a subcommand's keys included.
func TestLockKeyCheckDoesNotAllocate(t *testing.T) {
	s := serverOnMasters(t, func(c *Config) { c.Proxy.LockKeys = []string{"lock:*"} })
	for _, c := range []struct {
		args [][]byte
		key  int // the index of a key
	}{
		{[][]byte{[]byte("incr"), []byte("counter")}, 1},
		{[][]byte{[]byte("MSET"), []byte("a"), []byte("1"), []byte("b"), []byte("2")}, 3},
		{[][]byte{[]byte("Object"), []byte("ENCODING"), []byte("a")}, 2},
	} {
		args := c.args
		if msg := s.lockKeyRefusal(nil, args); msg != "" {
			t.Fatalf("%q: %s", args, msg)
		}
		if n := testing.AllocsPerRun(100, func() { s.lockKeyRefusal(nil, args) }); n != 0 {
			t.Errorf("%q: %.1f allocations", args, n)
		}
		args[c.key] = []byte("lock:x")
		if msg := s.lockKeyRefusal(nil, args); msg == "" {
			t.Errorf("%q: not refused", args)
		}
	}
}
