package redlock

import (
	"context"
	"fmt"
	"sort"
	"time"

	"github.com/redis/go-redis/v9"
)

// KeyState is a key as a single Redis holding the quorum's state would
// report it.
type KeyState struct {
	Exists bool
	Value  string
	// PTTL is the time until fewer than a quorum of masters hold the value:
	// the quorum-th largest remaining TTL among the holders. -1: no expiry;
	// -2: the key does not exist on a quorum.
	PTTL time.Duration
}

type readVote struct {
	exists bool
	value  string
	pttl   time.Duration // -1 for no expiry
}

// Read answers the value held by at least a quorum of masters, and how long
// it will stay so. It waits for every master (each within the node
// timeout), because the PTTL depends on all the holders.
func (c *Client) Read(ctx context.Context, key string) (KeyState, error) {
	keys := []string{key}
	ch := fanoutScript(c, readScript, keys, nil, func(cmd *redis.Cmd) (readVote, error) {
		vals, err := cmd.Slice()
		if err != nil {
			return readVote{}, err
		}
		if len(vals) != 2 {
			return readVote{}, fmt.Errorf("unexpected read reply %v", vals)
		}
		v := readVote{pttl: time.Duration(toInt(vals[1])) * time.Millisecond}
		if s, ok := vals[0].(string); ok {
			v.exists, v.value = true, s
		}
		if v.pttl < 0 {
			v.pttl = -1
		}
		return v, nil
	}, nil)
	holders := map[string][]time.Duration{}
	absent, failed := 0, 0
	var errs []error
	var st KeyState
	collect(ch, len(c.nodes), func(got []reply[readVote]) bool {
		r := got[len(got)-1]
		switch {
		case r.err != nil:
			failed++
			errs = append(errs, &NodeError{Addr: r.node.addr, Err: r.err})
		case !r.val.exists:
			absent++
		default:
			holders[r.val.value] = append(holders[r.val.value], r.val.pttl)
		}
		return false
	})
	for v, ttls := range holders {
		if len(ttls) >= c.quorum {
			st = KeyState{Exists: true, Value: v, PTTL: quorumTTL(ttls, c.quorum)}
		}
	}
	if st.Exists {
		return st, nil
	}
	if len(c.nodes)-failed < c.quorum {
		return KeyState{PTTL: -2}, &QuorumError{Reachable: len(c.nodes) - failed, Needed: c.quorum, Nodes: errs}
	}
	return KeyState{PTTL: -2}, nil
}

// quorumTTL is the quorum-th largest TTL: after it, fewer than a quorum of
// holders remain. -1 (no expiry) counts as the largest.
func quorumTTL(ttls []time.Duration, quorum int) time.Duration {
	s := append([]time.Duration(nil), ttls...)
	sort.Slice(s, func(i, j int) bool { return rank(s[i]) > rank(s[j]) })
	return s[quorum-1]
}

func rank(d time.Duration) time.Duration {
	if d < 0 {
		return 1<<63 - 1
	}
	return d
}

func toInt(v any) int64 {
	switch x := v.(type) {
	case int64:
		return x
	case int:
		return int64(x)
	}
	return 0
}

// Result is one master's answer to a broadcast command.
type Result struct {
	Addr string
	Val  any
	Err  error // redis.Nil for a nil reply
}

// Broadcast sends one command to every master and returns as soon as done
// reports that the answers so far decide the outcome, or when every master
// has answered or timed out. Masters that have not answered by then still
// receive the command.
func (c *Client) Broadcast(ctx context.Context, done func(got []Result) bool, args ...any) []Result {
	ch := fanoutCmd(c, func(_ *node, cl *call) { cl.args = args }, (*redis.Cmd).Result, nil)
	var out []Result
	collect(ch, len(c.nodes), func(got []reply[any]) bool {
		r := got[len(got)-1]
		out = append(out, Result{Addr: r.node.addr, Val: r.val, Err: r.err})
		return done != nil && done(out)
	})
	return out
}
