package proxy

import (
	"fmt"

	"github.com/tidwall/redcon"
)

// What one lock operation may carry is bounded (proxy.max_lock_value):
// every byte of a lock operation goes to every master, on the pipeline
// that every client's lock operations share there (engine/batch.go), and
// a rollback sends it again. Lock tokens are tens of bytes in every
// library (a UUID, a base64 of 16 to 32 random bytes, Redisson's
// "<UUID>:<thread id>"), keys a lock name and a prefix. So:
//
//   - a lock operation whose keys and arguments together (a token, a key,
//     a script's ARGV, LOCK.*'s options; not a script's text) exceed the
//     bound is refused before anything is sent (oversized); key names have
//     no bound of their own, they count with the rest;
//   - a value longer than the bound on a lock key (written on the masters
//     directly) is not brought into the proxy: a read answers an error
//     naming the setting (engine.ValueTooLargeError), GETDEL and GETEX
//     change nothing (engine.BroadcastValue), SET … NX GET refused by it
//     answers the error too;
//   - the engine keeps long values and long commands off the shared
//     pipelines whatever the bound (engine.GuardBigPayloads).

// guardLockValue: lock operations beyond proxy.max_lock_value are refused.
// Off (tests only), they are sent to every master.
const guardLockValue = "max-lock-value"

// oversized answers the refusal, and reports true, when the keys and
// arguments of a lock operation (parts) together exceed
// proxy.max_lock_value.
func (s *Server) oversized(c redcon.Conn, parts ...[][]byte) bool {
	n := 0
	for _, p := range parts {
		for _, a := range p {
			n += len(a)
		}
	}
	if n <= int(s.cfg.Proxy.MaxLockValue) || s.off(guardLockValue) {
		return false
	}
	c.WriteError(fmt.Sprintf("ERR redlock-proxy: lock operation of %d bytes (keys and arguments) exceeds proxy.max_lock_value (%d bytes)", n, s.cfg.Proxy.MaxLockValue))
	return true
}
