package proxy

import (
	"errors"
	"fmt"

	"github.com/redis/go-redis/v9"
	"github.com/tidwall/redcon"

	"github.com/redlock-proxy/redlock-proxy/redlock/engine"
)

// errorReply maps an error of a quorum operation to the RESP error a client
// sees. Master addresses and credentials never reach clients.
func errorReply(err error) string {
	var qe *engine.QuorumError
	var re redis.Error
	var large *engine.ValueTooLargeError
	switch {
	case errors.As(err, &large):
		return tooLargeReply(large.Len, large.Max)
	case errors.As(err, &qe) && qe.Reachable < qe.Needed:
		return fmt.Sprintf("NOQUORUM %d of the masters reachable, %d needed; lock commands are refused until enough masters are back", qe.Reachable, qe.Needed)
	case errors.As(err, &qe):
		// Enough masters answered, yet their answers do not settle it:
		// the others may hold what would.
		return fmt.Sprintf("NOQUORUM the outcome is not known: the %d masters that could vote do not settle it (%d needed), and the others did not answer or are under the restart guard; try again", qe.Reachable, qe.Needed)
	case errors.As(err, &re):
		return re.Error()
	}
	return "ERR redlock-proxy: quorum operation failed"
}

func writeErr(c redcon.Conn, err error) { c.WriteError(errorReply(err)) }

// echo makes client input safe to quote in an error reply, as Redis does:
// at most 128 bytes, and no CR or LF that would end the reply early.
func echo(b []byte) string {
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
