package proxy_test

import (
	"strings"
	"testing"
	"time"

	"github.com/redlock-proxy/redlock-proxy/proxy"
)

// An extend script the proxy does not know, written as a library might.
const unknownExtend = `local v = redis.call('get', KEYS[1])
if v == ARGV[1] then redis.call('pexpire', KEYS[1], ARGV[2]) return 'extended' end
return 'lost'`

// A script the proxy does not recognise, on a lock key, is refused with an
// error that says how to declare it: on the backend alone it would change
// one master's copy of the lock. An extend run that way renews master 0
// only; the lock expires on the others on time, and a second client is
// granted it while its holder believes it extended it (shown with
// proxy.unknown_scripts = "passthrough").
func TestUnknownScriptOnLockKey(t *testing.T) {
	for _, policy := range []string{"refuse", "passthrough"} {
		name := map[string]string{"refuse": "refuse", "passthrough": "passthrough_grants_the_lock_twice"}[policy]
		t.Run(name, func(t *testing.T) {
			e := newEnv(t, 3, func(c *proxy.Config) { c.Proxy.UnknownScripts = policy })
			key := e.key("k")
			mustEqual(t, "acquire", must(e.do("SET", key, "A", "NX", "PX", 1000)), any("OK"))
			v, err := e.do("EVAL", unknownExtend, 1, key, "A", 10000)
			if policy == "refuse" {
				if err == nil || !strings.Contains(err.Error(), "[[scripts]]") {
					t.Fatalf("unknown script on a lock key: %v %v, want refused", v, err)
				}
				for _, cmd := range [][]any{{"EVAL_RO", "return redis.call('get', KEYS[1])", 1, key}, {"FCALL", "myfn", 1, key}, {"FCALL_RO", "myfn", 1, key}} {
					if _, err := e.do(cmd...); err == nil || !strings.Contains(err.Error(), "[[scripts]]") {
						t.Errorf("%v: %v, want refused", cmd[0], err)
					}
				}
				// With no lock key among its keys, a script passes.
				mustEqual(t, "keyless script", must(e.do("EVAL", "return 7", 0)), any(int64(7)))
				return
			}
			mustEqual(t, "extend on the backend", v, any("extended"))
			time.Sleep(1100 * time.Millisecond) // the holder believes it holds the lock for 10 s
			if b, _ := e.do("SET", key, "B", "NX", "PX", 10000); b != "OK" {
				t.Fatalf("with passthrough the second client should be granted the lock (%v)", b)
			}
		})
	}
}
