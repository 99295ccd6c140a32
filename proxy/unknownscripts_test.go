package proxy_test

import (
	"strings"
	"testing"
	"time"

	"github.com/redlock-proxy/redlock-proxy/internal/redistest"
	"github.com/redlock-proxy/redlock-proxy/proxy"
)

// An extend script the proxy does not know, written as a library might.
const unknownExtend = `local v = redis.call('get', KEYS[1])
if v == ARGV[1] then redis.call('pexpire', KEYS[1], ARGV[2]) return 'extended' end
return 'lost'`

// A script the proxy does not recognise is refused, with an error that says
// how to declare it, when it could change a lock on one master: on a
// voting backend whatever keys it declares (a script can write a key it
// does not declare), and with a backend of its own when its keys include a
// lock key and proxy.unknown_scripts says "refuse" (there it would act on
// the backend's key, not on the lock; the default with every key a lock
// key and a backend of its own is to run it there, as data: mixed.go).
// Functions likewise.
func TestUnknownScriptOnLockKey(t *testing.T) {
	for _, backend := range []string{"voting", "own"} {
		t.Run(backend, func(t *testing.T) {
			var own string
			if backend == "own" {
				own = redistest.Start(t).Addr
			}
			e := newEnv(t, 3, func(c *proxy.Config) {
				c.Proxy.Backend = own
				if own != "" {
					c.Proxy.UnknownScripts = "refuse"
				}
			})
			key := e.key("k")
			mustEqual(t, "acquire", must(e.do("SET", key, "A", "NX", "PX", 1000)), any("OK"))
			for _, cmd := range [][]any{
				{"EVAL", unknownExtend, 1, key, "A", 10000},
				{"EVAL_RO", "return redis.call('get', KEYS[1])", 1, key},
				{"FCALL", "myfn", 1, key},
				{"FCALL_RO", "myfn", 1, key},
			} {
				if _, err := e.do(cmd...); err == nil || !strings.Contains(err.Error(), "[[scripts]]") {
					t.Errorf("%v: %v, want refused", cmd[0], err)
				}
			}
			undeclared := []any{"EVAL", "return redis.call('del', ARGV[1])", 0, key}
			keyless := []any{"EVAL", "return 7", 0}
			if backend == "voting" {
				for _, cmd := range [][]any{undeclared, keyless, {"FCALL", "myfn", 0}} {
					if _, err := e.do(cmd...); err == nil || !strings.Contains(err.Error(), "voting master") {
						t.Errorf("%v on a voting backend: %v, want refused", cmd, err)
					}
				}
				mustEqual(t, "the lock on every master", strings.Join(e.onMasters(key), "|"), "A|A|A")
				return
			}
			// With a backend of its own, a script with no lock key among its
			// keys runs there, and cannot reach the masters.
			mustEqual(t, "keyless script", must(e.do(keyless...)), any(int64(7)))
			// The lock's mirror in the application's keyspace (mixed.go).
			mustEqual(t, "a delete of an undeclared key, on the backend", must(e.do(undeclared...)), any(int64(1)))
			mustEqual(t, "the lock on every master", strings.Join(e.onMasters(key), "|"), "A|A|A")
		})
	}
}

// The control: with the guard backend-scripts off, a script the proxy does
// not know runs on the voting backend. An extend run that way renews
// master 0 only; the lock expires on the others on time, and a second
// client is granted it while its holder believes it extended it.
func TestUnknownScriptOnVotingBackendGrantsTwice(t *testing.T) {
	e := newEnv(t, 3, func(c *proxy.Config) { c.GuardsOff = []string{"backend-scripts"} })
	key := e.key("k")
	mustEqual(t, "acquire", must(e.do("SET", key, "A", "NX", "PX", 1000)), any("OK"))
	mustEqual(t, "extend on the backend", must(e.do("EVAL", unknownExtend, 1, key, "A", 10000)), any("extended"))
	time.Sleep(1100 * time.Millisecond) // the holder believes it holds the lock for 10 s
	if b, _ := e.do("SET", key, "B", "NX", "PX", 10000); b != "OK" {
		t.Fatalf("with the guard off the second client should be granted the lock (%v)", b)
	}
}
