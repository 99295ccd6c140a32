package engine

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

// Read answers the value held by at least a quorum of masters, and how long
// it will stay so. It waits for every master (each within the node
// timeout), because the PTTL depends on all the holders. Masters that did
// not answer, and those whose answers do not count (the restart guard, a
// taint of the value's rollback), are counted as unknown: the key is
// absent only when no value could reach a quorum even if every unknown
// master held it; when the answer cannot be known, the error is a
// *QuorumError.
func (c *Client) Read(ctx context.Context, key string) (KeyState, error) {
	keys := []string{key}
	ch := fanoutScript(c, readScript, keys, nil, parseCopy, nil)
	got := collect(ch, len(c.nodes), func([]reply[heldCopy]) bool { return false })
	copies := make([]heldCopy, len(got))
	for i, r := range got {
		copies[i] = r.val
		copies[i].node, copies[i].err, copies[i].trusted, copies[i].guard = r.node, r.err, r.trusted, r.guard
	}
	v, pttl, err := c.majority(key, copies)
	if v == nil {
		return KeyState{PTTL: -2}, err
	}
	return KeyState{Exists: true, Value: *v, PTTL: pttl}, nil
}

// parseCopy reads one master's reply to readScript.
func parseCopy(cmd *redis.Cmd) (heldCopy, error) {
	vals, err := cmd.Slice()
	if err != nil {
		return heldCopy{}, err
	}
	if len(vals) != 2 {
		return heldCopy{}, fmt.Errorf("unexpected read reply %v", vals)
	}
	v := heldCopy{pttl: pttlOf(vals[1])}
	if s, ok := vals[0].(string); ok {
		v.value = &s
	}
	return v, nil
}

// heldCopy is what one master holds of a key: its value (nil: absent) and
// PTTL (-1: no expiry).
type heldCopy struct {
	node    *node
	err     error   // no answer
	trusted bool    // the restart guard lets its answer count
	guard   guardOf // when not trusted: why
	value   *string
	pttl    time.Duration
}

// pttlOf reads a PTTL reply: a duration, or the codes -1 (no expiry) and
// -2 (absent) as they are.
func pttlOf(v any) time.Duration {
	if p := toInt(v); p < 0 {
		return time.Duration(p)
	} else {
		return time.Duration(p) * time.Millisecond
	}
}

// majority decides from every master's copy of key which value a quorum
// holds, and until when: the quorum-th largest PTTL of its holders. A
// value's holders are the masters whose answers count (see votes) and that
// are not tainted for it. No value is held when none could reach a quorum
// even if every master whose answer is unknown held it; otherwise, with no
// value at a quorum, the error is a *QuorumError.
func (c *Client) majority(key string, copies []heldCopy) (*string, time.Duration, error) {
	loose := c.off(GuardNotHeldNeedsQuorum)
	holders := map[string][]time.Duration{}
	t := c.newVotes()
	for _, h := range copies {
		withheld := !h.trusted || h.value != nil && c.taintedFor(h.node, taintKey([]string{key}, *h.value))
		if loose {
			withheld = false
		}
		if h.err == nil && !h.trusted {
			t.guardedBy(h.node, h.guard)
		}
		if h.err == nil && !withheld && h.value != nil {
			holders[*h.value] = append(holders[*h.value], h.pttl)
		}
		t.add(h.node, h.err, voteNo, withheld)
	}
	most := 0
	for v, ttls := range holders {
		if len(ttls) >= c.quorum {
			return &v, quorumTTL(ttls, c.quorum), nil
		}
		most = max(most, len(ttls))
	}
	// No value holds a quorum. Counted as votes for the likeliest holder:
	// not held when even it could not reach a quorum.
	t.yes, t.no = most, t.no-most
	if t.lost() {
		return nil, -2, nil
	}
	return nil, -2, t.err()
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
	// Counts reports whether the answer may count as the master's vote:
	// the restart guard does not withhold it on the command's key.
	Counts bool
}

// Broadcast sends one command on key to every master and returns as soon
// as done reports that the answers so far decide the outcome, or when
// every master has answered or timed out. Masters that have not answered
// by then still receive the command.
func (c *Client) Broadcast(ctx context.Context, key string, done func(got []Result) bool, args ...any) []Result {
	ch := fanoutCmd(c, []string{key}, func(_ *node, cl *call) { cl.args = args }, (*redis.Cmd).Result, nil)
	var out []Result
	collect(ch, len(c.nodes), func(got []reply[any]) bool {
		r := got[len(got)-1]
		out = append(out, Result{Addr: r.node.addr, Val: r.val, Err: r.err, Counts: r.trusted || c.off(GuardNotHeldNeedsQuorum)})
		return done != nil && done(out)
	})
	return out
}
