package quorum

import (
	"errors"
	"fmt"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/tidwall/redcon"

	"github.com/redlock-proxy/redlock-proxy/redlock/engine"
)

// ErrorReply maps an error of a quorum operation to the RESP error a client
// sees. Master addresses and credentials never reach clients.
func ErrorReply(err error) string {
	var qe *engine.QuorumError
	var te *engine.TTLError
	var re redis.Error
	var large *engine.ValueTooLargeError
	switch {
	case errors.As(err, &te):
		return fmt.Sprintf("ERR redlock-proxy: a lock TTL of %s exceeds redlock.max_lock_ttl (%s)", engine.FormatTTL(te.TTL), engine.FormatTTL(te.Max))
	case errors.As(err, &qe) && qe.Reachable < qe.Needed && len(qe.Guarded) > 0:
		return fmt.Sprintf("NOQUORUM %d of the masters can vote, %d needed; %s", qe.Reachable, qe.Needed, guardedText(qe.Guarded))
	case errors.As(err, &large):
		return TooLargeReply(large.Len, large.Max)
	case errors.As(err, &qe) && qe.Reachable < qe.Needed:
		return fmt.Sprintf("NOQUORUM %d of the masters reachable, %d needed; lock commands are refused until enough masters are back", qe.Reachable, qe.Needed)
	case errors.As(err, &qe) && len(qe.Guarded) > 0:
		return fmt.Sprintf("NOQUORUM the outcome is not known: the %d masters that could vote do not settle it (%d needed); %s; try again", qe.Reachable, qe.Needed, guardedText(qe.Guarded))
	case errors.As(err, &qe):
		// Enough masters answered, yet their answers do not settle it:
		// the others may hold what would.
		return fmt.Sprintf("NOQUORUM the outcome is not known: the %d masters that could vote do not settle it (%d needed), and the others did not answer or are under the restart guard; try again", qe.Reachable, qe.Needed)
	case errors.As(err, &re):
		return re.Error()
	case errors.Is(err, engine.ErrCrossSlot):
		// The keys are the client's and the proxy's own records'
		// (a fenced lock's counter, a hash lock's attempt): not echoed.
		return "CROSSSLOT redlock-proxy: the keys of this lock operation, with the records kept beside its lock, hash to different slots and a voter is a Redis Cluster: give the lock key a hash tag ({…})"
	}
	return "ERR redlock-proxy: quorum operation failed"
}

// WriteErr answers err as ErrorReply maps it.
func WriteErr(c redcon.Conn, err error) { c.WriteError(ErrorReply(err)) }

// clock is time.Now, but for tests.
var clock = time.Now

// guardedText names the masters under the restart guard, as INFO does
// (master0 first), and until when: on every key, or on the key named.
func guardedText(gs []engine.GuardedMaster) string {
	return engine.GuardedText(gs, clock(), false, func(k string) string { return "'" + Echo([]byte(k)) + "'" })
}

// Echo makes client input safe to quote in an error reply, as Redis does:
// at most 128 bytes, and no CR or LF that would end the reply early.
func Echo(b []byte) string {
	if len(b) > 128 {
		b = b[:128]
	}
	out := []byte(string(b))
	for i, c := range out {
		if c == '\r' || c == '\n' {
			out[i] = ' '
		}
	}
	return string(out)
}

// TooLargeReply is the error for a value of n bytes on a lock key, more
// than proxy.max_lock_value (max), that a quorum operation would bring
// back.
func TooLargeReply(n, max int) string {
	return fmt.Sprintf("ERR redlock-proxy: the value of this lock key is %d bytes, more than proxy.max_lock_value (%d bytes); it is not read or changed through the quorum", n, max)
}
