package proxy

import (
	"errors"
	"fmt"
	"testing"

	"github.com/redlock-proxy/redlock-proxy/redlock/engine"
)

type masterReply string

func (e masterReply) Error() string { return string(e) }
func (masterReply) RedisError()     {}

// errorReply maps each error of a quorum operation to the reply a client
// sees: NOQUORUM with the reason, a master's own error reply, or a generic
// error; never a master's address.
func TestErrorReply(t *testing.T) {
	node := &engine.NodeError{Addr: "10.0.0.7:6379", Err: errors.New("i/o timeout")}
	cases := []struct {
		err  error
		want string
	}{
		{&engine.QuorumError{Reachable: 1, Needed: 2, Nodes: []error{node}},
			"NOQUORUM 1 of the masters reachable, 2 needed; lock commands are refused until enough masters are back"},
		{&engine.QuorumError{Reachable: 2, Needed: 2},
			"NOQUORUM the outcome is not known: the 2 masters that could vote do not settle it (2 needed), and the others did not answer or are under the restart guard; try again"},
		{fmt.Errorf("acquire: %w", &engine.QuorumError{Reachable: 0, Needed: 3}),
			"NOQUORUM 0 of the masters reachable, 3 needed; lock commands are refused until enough masters are back"},
		{masterReply("WRONGTYPE Operation against a key holding the wrong kind of value"),
			"WRONGTYPE Operation against a key holding the wrong kind of value"},
		{node, "ERR redlock-proxy: quorum operation failed"},
	}
	for _, c := range cases {
		if got := errorReply(c.err); got != c.want {
			t.Errorf("errorReply(%v) = %q, want %q", c.err, got, c.want)
		}
	}
}
