package engine

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strconv"
	"strings"
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

// ValueTooLargeError answers a read of a key that enough masters hold with
// a value longer than the client keeps (WithMaxValue) for it to matter:
// the value was not read.
type ValueTooLargeError struct {
	Len int // bytes
	Max int // WithMaxValue
}

func (e *ValueTooLargeError) Error() string {
	return fmt.Sprintf("redlock: the value is %d bytes, more than the %d a read brings back", e.Len, e.Max)
}

// Read answers the value held by at least a quorum of masters, and how long
// it will stay so. It waits for every master (each within the node
// timeout), because the PTTL depends on all the holders. Masters that did
// not answer, and those whose answers do not count (the restart guard, a
// taint of the value's rollback), are counted as unknown: the key is
// absent only when no value could reach a quorum even if every unknown
// master held it; when the answer cannot be known, the error is a
// *QuorumError.
//
// Values longer than the shared pipeline carries are not read with the
// rest (readScript answers their length): when they could decide the
// answer, they are read on connections of their own, one copy kept and the
// others hashed as they arrive (fetchLong), or, beyond WithMaxValue, not
// at all: a *ValueTooLargeError.
func (c *Client) Read(ctx context.Context, key string) (KeyState, error) {
	keys := []string{key}
	ch := fanoutScript(c, readScript, keys, []any{c.opts.inlineMax()}, parseCopy, nil)
	got := collect(ch, len(c.nodes), func([]reply[heldCopy]) bool { return false })
	copies := make([]heldCopy, len(got))
	for i, r := range got {
		copies[i] = r.val
		copies[i].node, copies[i].err, copies[i].trusted, copies[i].guard = r.node, r.err, r.trusted, r.guard
	}
	for rounds := 0; ; rounds++ {
		v, pttl, err := c.majority(key, copies)
		var f *fetchNeeded
		if errors.As(err, &f) {
			if rounds < 3 {
				c.fetchLong(key, copies, f)
				continue
			}
			// The long value kept changing while it was read.
			err = &QuorumError{Reachable: c.quorum, Needed: c.quorum}
		}
		if v == nil {
			return KeyState{PTTL: -2}, err
		}
		return KeyState{Exists: true, Value: *v, PTTL: pttl}, nil
	}
}

// parseCopy reads one master's reply to readScript (or readFullScript).
func parseCopy(cmd *redis.Cmd) (heldCopy, error) {
	vals, err := cmd.Slice()
	if err != nil {
		return heldCopy{}, err
	}
	if len(vals) != 2 {
		return heldCopy{}, fmt.Errorf("unexpected read reply %v", vals)
	}
	v := heldCopy{pttl: pttlOf(vals[1])}
	switch x := vals[0].(type) {
	case error: // in EXEC's reply (fetchLong): WRONGTYPE
		return heldCopy{}, x
	case string:
		v.value = &x
	case int64: // readScript: a value this long, not read
		v.long = int(x)
	case LargeValue: // read, not kept
		v.large = &x
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
	// Or a value that was not kept: one whose length alone is known
	// (long: readScript), or one read on a connection of its own and
	// hashed (large: fetchLong).
	long  int
	large *LargeValue
}

// fetchNeeded is majority's answer when a value that was not kept would
// decide the read: of length long (not read yet), or large (read on a
// connection of its own and hashed).
type fetchNeeded struct {
	long  int
	large *LargeValue
}

func (f *fetchNeeded) Error() string { return "redlock: a long value decides the read" }

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
//
// Copies whose value was not kept are grouped by length (as if every
// long value of one length were the same: a group can only be thought
// larger than it is, which answers NOQUORUM rather than "absent") or by
// their hash. When such a group holds a quorum, the answer is a
// *fetchNeeded (the value must be read) or, beyond WithMaxValue, a
// *ValueTooLargeError.
func (c *Client) majority(key string, copies []heldCopy) (*string, time.Duration, error) {
	loose := c.off(GuardNotHeldNeedsQuorum)
	holders := map[string][]time.Duration{}
	var longs map[int][]time.Duration
	var larges map[LargeValue][]time.Duration
	t := c.newVotes()
	for _, h := range copies {
		withheld := !h.trusted
		switch {
		case h.value != nil:
			withheld = withheld || c.taintedFor(h.node, taintKey([]string{key}, *h.value))
		case h.large != nil:
			// Its bytes are not known here: withheld if any token of the
			// key is tainted on that master.
			withheld = withheld || !c.off(GuardTaint) && h.node.taintedPrefix(taintKey([]string{key}, ""))
		}
		if loose {
			withheld = false
		}
		if h.err == nil && !h.trusted {
			t.guardedBy(h.node, h.guard)
		}
		if h.err == nil && !withheld {
			switch {
			case h.value != nil:
				holders[*h.value] = append(holders[*h.value], h.pttl)
			case h.large != nil:
				if larges == nil {
					larges = map[LargeValue][]time.Duration{}
				}
				larges[*h.large] = append(larges[*h.large], h.pttl)
			case h.long > 0:
				if longs == nil {
					longs = map[int][]time.Duration{}
				}
				longs[h.long] = append(longs[h.long], h.pttl)
			}
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
	keep := c.opts.keepMax()
	for v, ttls := range larges {
		switch {
		case len(ttls) < c.quorum:
		case v.Len > keep:
			return nil, -2, &ValueTooLargeError{Len: v.Len, Max: keep}
		default:
			return nil, -2, &fetchNeeded{large: &v}
		}
		most = max(most, len(ttls))
	}
	for n, ttls := range longs {
		switch {
		case len(ttls) < c.quorum:
		case n > keep:
			return nil, -2, &ValueTooLargeError{Len: n, Max: keep}
		default:
			return nil, -2, &fetchNeeded{long: n}
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

// fetchLong reads the values that f says decide a read, each on a
// connection of its own (off the shared pipelines): the copies of length
// f.long, or of f.large. One master's value is kept; the others' are hashed
// as they arrive and compared with it, so a read holds one copy of a long
// value, not one per master. It updates copies with what it read: a value,
// a LargeValue, an absent key or an error.
func (c *Client) fetchLong(key string, copies []heldCopy, f *fetchNeeded) {
	keeper := -1
	var idx []int
	for i, h := range copies {
		match := f.large != nil && h.large != nil && *h.large == *f.large ||
			f.large == nil && h.long > 0 && h.long == f.long
		if h.err != nil || !match {
			continue
		}
		if keeper < 0 {
			keeper = i
		} else if f.large != nil {
			continue // known to hold the same as the keeper: one is read
		}
		idx = append(idx, i)
	}
	type result struct {
		i   int
		cmd *redis.Cmd
	}
	done := make(chan result, len(idx))
	deadline := time.Now().Add(c.opts.nodeTimeout)
	// GET and PTTL in a transaction, not a script: a script would copy
	// the value into Lua and back, blocking the master meanwhile.
	noop := func(*redis.Cmd) {}
	multi := func(args ...any) *call {
		return &call{args: args, readOnly: true, deadline: deadline, done: noop}
	}
	for _, i := range idx {
		exec := multi("exec")
		exec.digest = i != keeper
		exec.done = func(cmd *redis.Cmd) { done <- result{i, cmd} }
		t, err := copies[i].node.target([]string{key})
		if err != nil {
			go exec.fail(err)
			continue
		}
		go t.batch.runAlone(multi("multi"), multi("get", key), multi("pttl", key), exec)
	}
	var kept *string
	var keptSum uint64
	start := time.Now()
	for range idx {
		r := <-done
		h := &copies[r.i]
		v, err := parseCopy(r.cmd)
		now := time.Now()
		h.node.record(r.cmd.Err(), now.Sub(start), now)
		h.trusted = h.trusted && h.node.trusted(now)
		h.err, h.value, h.long, h.large = err, v.value, 0, v.large
		if err == nil {
			h.pttl = v.pttl
		}
		if r.i == keeper && v.value != nil {
			kept, keptSum = v.value, sumOf(*v.value)
		}
	}
	if kept == nil {
		return
	}
	// The copies whose hash is the kept value's hold it: they share it.
	for i := range copies {
		h := &copies[i]
		if h.large != nil && h.large.Len == len(*kept) && h.large.Sum == keptSum {
			h.value, h.large = kept, nil
		}
	}
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
	Val  any   // a LargeValue for a string longer than WithMaxValue
	Err  error // redis.Nil for a nil reply
	// Counts reports whether the answer may count as the master's vote:
	// the restart guard does not withhold it on the command's key.
	Counts bool
}

// BroadcastValue is Broadcast of a command on key whose reply is the
// key's value (GETDEL, GETEX, SET … GET; args[1] is the key): a master
// where that value is longer than WithMaxValue does not run it, and its
// answer is a LargeValue of that length (Sum 0), so that nothing is
// changed that the client would not be told of.
func (c *Client) BroadcastValue(ctx context.Context, key string, done func(got []Result) bool, args ...any) []Result {
	if c.off(GuardBigPayloads) || len(args) < 2 {
		return c.Broadcast(ctx, key, done, args...)
	}
	keys := []string{key}
	argv := append([]any{c.opts.keepMax(), args[0]}, args[2:]...)
	return c.broadcast(keys, done, scriptCall(valueScript, keys, argv), parseValueReply)
}

// parseValueReply reads a reply of valueScript.
func parseValueReply(cmd *redis.Cmd) (any, error) {
	v, err := cmd.Result()
	if re, ok := err.(replyError); ok {
		if n, ok := strings.CutPrefix(string(re), "VALUETOOLONG "); ok {
			l, _ := strconv.Atoi(n)
			return LargeValue{Len: l}, nil
		}
	}
	return v, err
}

// Broadcast sends one command on key to every master and returns as soon
// as done reports that the answers so far decide the outcome, or when
// every master has answered or timed out. Masters that have not answered
// by then still receive the command.
func (c *Client) Broadcast(ctx context.Context, key string, done func(got []Result) bool, args ...any) []Result {
	return c.broadcast([]string{key}, done, func(_ *node, cl *call) { cl.args = args }, (*redis.Cmd).Result)
}

// broadcast sends every master the call build makes on keys and collects
// the answers as Broadcast does.
func (c *Client) broadcast(keys []string, done func(got []Result) bool, build func(*node, *call), parse func(*redis.Cmd) (any, error)) []Result {
	ch := fanoutCmd(c, keys, build, parse, nil)
	var out []Result
	collect(ch, len(c.nodes), func(got []reply[any]) bool {
		r := got[len(got)-1]
		out = append(out, Result{Addr: r.node.addr, Val: r.val, Err: r.err, Counts: r.trusted || c.off(GuardNotHeldNeedsQuorum)})
		return done != nil && done(out)
	})
	return out
}
