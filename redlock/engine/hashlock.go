package engine

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
)

// Reentrant hash locks, in the format of Redisson's RLock: the lock key is
// a hash whose one field, the holder (Redisson's "<client id>:<thread
// id>"), counts its holds; the key expires as a whole. Each master runs
// the per-master half below; the quorum decides as for any other lock: a
// hold is granted when a quorum of trusted masters took it with validity
// left, and taken back everywhere otherwise.
//
// The take-back names the attempt: every take records its attempt id
// beside the lock (HashAttemptKey), and the undo gives back one hold only
// where that id is still recorded. A take that never landed is not
// undone, so a holder's earlier holds survive a refused reentry.

// HashAttemptKey is where a master records the last attempt that took or
// reentered the hash lock key.
func HashAttemptKey(key string) string { return FenceStatePrefix + "hattempt:" + key }

// hashAcquireScript takes KEYS[1] for the holder ARGV[1] for ARGV[2] ms,
// recording the attempt ARGV[3] in KEYS[2]: {1, 1} taken, {2, holds}
// reentered, {0, PTTL} held by another holder; WRONGTYPE when not a hash,
// as Redisson's script fails there.
var hashAcquireScript = newScript(hashTypeCheck + `
if t == 'none' then
  redis.call('HSET', KEYS[1], ARGV[1], 1)
  redis.call('PEXPIRE', KEYS[1], ARGV[2])
  redis.call('SET', KEYS[2], ARGV[3], 'PX', ARGV[2])
  return {1, 1}
end
if t == 'hash' and redis.call('HEXISTS', KEYS[1], ARGV[1]) == 1 then
  local n = redis.call('HINCRBY', KEYS[1], ARGV[1], 1)
  redis.call('PEXPIRE', KEYS[1], ARGV[2])
  redis.call('SET', KEYS[2], ARGV[3], 'PX', ARGV[2])
  return {2, n}
end
return {0, redis.call('PTTL', KEYS[1])}`)

// hashTypeCheck begins the per-master hash lock scripts: t is the type
// of KEYS[1], and a type other than a hash fails with WRONGTYPE, as
// Redisson's scripts do.
const hashTypeCheck = `
local t = redis.call('TYPE', KEYS[1]).ok
if t ~= 'none' and t ~= 'hash' then
  return redis.error_reply('WRONGTYPE Operation against a key holding the wrong kind of value')
end`

// hashUndoScript gives back the hold that attempt ARGV[2] of holder
// ARGV[1] took, if it is the last attempt recorded: 1; else 0.
var hashUndoScript = newScript(`
if redis.call('GET', KEYS[2]) ~= ARGV[2] then return 0 end
redis.call('DEL', KEYS[2])
if redis.call('TYPE', KEYS[1]).ok ~= 'hash' then return 0 end
local n = tonumber(redis.call('HGET', KEYS[1], ARGV[1]) or '0') or 0
if n <= 1 then
  redis.call('HDEL', KEYS[1], ARGV[1])
else
  redis.call('HINCRBY', KEYS[1], ARGV[1], -1)
end
return 1`)

// hashReleaseScript gives back one hold of holder ARGV[1]; the last one
// deletes the key, others set its TTL to ARGV[2] ms. With a latch key
// (KEYS[2]) present, nothing is done and its value answered as Redisson's
// script answers it, tonumber(value): {-3, value}, or {-4, 0} for nil.
// Else {1, 0} deleted, {2, holds left}, {0, 0} held by another holder,
// {-1, 0} absent.
var hashReleaseScript = newScript(`
if #KEYS > 1 then
  local v = redis.call('GET', KEYS[2])
  if v then
    local n = tonumber(v)
    if n == nil then return {-4, 0} end
    return {-3, n}
  end
end` + hashTypeCheck + `
if t == 'none' then return {-1, 0} end
if t ~= 'hash' or redis.call('HEXISTS', KEYS[1], ARGV[1]) == 0 then return {0, 0} end
local n = redis.call('HINCRBY', KEYS[1], ARGV[1], -1)
if n > 0 then
  redis.call('PEXPIRE', KEYS[1], ARGV[2])
  return {2, n}
end
redis.call('DEL', KEYS[1])
return {1, 0}`)

// hashExtendScript sets the TTL of KEYS[1] to ARGV[2] ms where holder
// ARGV[1] holds it: 1; 0 held by another holder; -1 absent.
var hashExtendScript = newScript(hashTypeCheck + `
if t == 'none' then return -1 end
if t ~= 'hash' or redis.call('HEXISTS', KEYS[1], ARGV[1]) == 0 then return 0 end
redis.call('PEXPIRE', KEYS[1], ARGV[2])
return 1`)

// hashReadScript answers {type, PTTL, fields and values} of KEYS[1] (the
// value itself for a string).
var hashReadScript = newReadScript(`
local t = redis.call('TYPE', KEYS[1]).ok
local p = redis.call('PTTL', KEYS[1])
if t == 'hash' then return {t, p, redis.call('HGETALL', KEYS[1])} end
if t == 'string' then return {t, p, {redis.call('GET', KEYS[1])}} end
return {t, p, {}}`)

// HashResult is the outcome of AcquireHash.
type HashResult struct {
	Holds    int64         // granted: the holder's holds, as a quorum counts them
	Validity time.Duration // granted: time left, less the drift allowance
	// PTTL, when not granted, is the remaining TTL of the other holder's
	// lock, the quorum-th longest of the copies that refused (-1: no
	// expiry, 0: none known).
	PTTL time.Duration
}

type hashVote struct {
	state int64 // 1 taken, 2 reentered, 0 refused
	n     int64 // holds, or the PTTL of a refusal (ms, or -1, -2)
}

func parseHashVote(cmd *redis.Cmd) (hashVote, error) {
	v, err := cmd.Slice()
	if err != nil {
		return hashVote{}, err
	}
	if len(v) != 2 {
		return hashVote{}, fmt.Errorf("unexpected hash lock reply %v", v)
	}
	return hashVote{state: toInt(v[0]), n: toInt(v[1])}, nil
}

// AcquireHash takes the hash lock key for holder with the given ttl
// (positive): a free key, or one holder already holds (one more hold). It
// returns ErrNotAcquired (ErrHeld, ErrValiditySpent, ErrSplitVote) when
// not granted, with the other holder's PTTL in the result, and a
// *QuorumError when too few masters could vote. Every TTL it writes
// stretches the restart guard.
func (c *Client) AcquireHash(ctx context.Context, key, holder string, ttl time.Duration) (HashResult, error) {
	if err := c.checkSlots([]string{key, HashAttemptKey(key)}); err != nil {
		return HashResult{}, err
	}
	if ttl <= 0 {
		return HashResult{}, errors.New("redlock: a hash lock needs a positive TTL")
	}
	if err := c.CheckTTL(ttl); err != nil {
		return HashResult{}, err
	}
	for attempt := 0; ; attempt++ {
		r, err := c.acquireHashOnce(ctx, key, holder, ttl)
		if !errors.Is(err, ErrSplitVote) && !errors.Is(err, ErrValiditySpent) || attempt >= c.opts.retries {
			return r, err
		}
		if err := sleep(ctx, c.retryDelay()); err != nil {
			return r, errors.Join(err, ErrNotAcquired)
		}
	}
}

func (c *Client) acquireHashOnce(ctx context.Context, key, holder string, ttl time.Duration) (HashResult, error) {
	if ok := c.votersAvailable([]string{key}); ok < c.quorum {
		return HashResult{}, c.quorumErr(ok, c.quorum, []string{key})
	}
	c.WaitWrites(ctx, key)
	keys, id := []string{key, HashAttemptKey(key)}, newAttemptID()
	which := id
	if c.opts.undoByToken {
		which = "" // tests: an undo that ignores the attempt
	}
	c.flights.begin(keys[:1], len(c.nodes))
	// The undo names the attempt, so it cannot give back a hold another
	// attempt took; it is tried again until it lands, as an acquire's is,
	// the master's votes for the holder withheld meanwhile.
	run := newAcquireRun(c, keys[:1], ttl, holder, func(_ *node, v hashVote, err error) (*call, bool) {
		if err == nil && v.state == 0 || isReplyError(err) {
			return nil, false
		}
		return &call{script: hashUndoScript, keys: keys, args: []any{holder, which}}, true
	})
	note := c.noteTTL(keys[:1], ttl, true, 0)
	start := time.Now()
	ch := fanoutScript(c, hashAcquireScript, keys, []any{holder, ttl.Milliseconds(), id}, parseHashVote, run.onVote)
	var refusals []time.Duration
	var holds []int64
	t, got := countVotes(c, ch, "", decidedOrLost, func(v hashVote) vote {
		if v.state > 0 {
			holds = append(holds, v.n)
			return voteYes
		}
		refusals = append(refusals, pttlOf(v.n))
		return voteNo
	})
	elapsed := time.Since(start)
	note.settle(refusedBy(got, func(v hashVote) bool { return v.state > 0 }))
	var r HashResult
	var err error
	if r.Validity, err = c.acquireOutcome(&t, len(refusals) >= c.quorum, ttl, elapsed); err == nil {
		r.Holds = quorumCount(holds, c.quorum)
	} else {
		r.PTTL = refusedPTTL(refusals, c.quorum)
	}
	run.decide(err != nil)
	return r, err
}

// refusedPTTL is the remaining TTL of a lock that refused an acquire: the
// quorum-th longest of the refusing copies, or the longest when fewer
// refused. A copy's last millisecond (PTTL 0) counts as 1 ms.
func refusedPTTL(ps []time.Duration, quorum int) time.Duration {
	var live []time.Duration
	for _, p := range ps {
		switch {
		case p == -1:
			live = append(live, p)
		case p >= 0:
			live = append(live, max(p, time.Millisecond))
		}
	}
	if len(live) == 0 {
		return 0
	}
	if len(live) >= quorum {
		return quorumTTL(live, quorum)
	}
	return quorumTTL(live, 1)
}

// HashRelease is the outcome of ReleaseHash.
type HashRelease struct {
	Held     bool  // a quorum held the holder's hold, and one was given back
	Freed    bool  // … and fewer than a quorum hold it now: the lock is free
	Holds    int64 // when held and not freed: the holds left, as a quorum counts them
	Latched  bool  // a quorum answered from the latch: nothing was done
	LatchVal int64 // its value
	LatchNil bool  // … which is not a number: nil
}

// ReleaseHash gives back one hold of the hash lock key by holder on every
// master; the last hold deletes the key, and otherwise its TTL becomes ttl.
// With latch (not empty), a master where that key exists does nothing and
// answers its value. The holds left are the quorum-th largest count of
// the masters that held it, so the lock is free when fewer than a quorum
// still hold it. It decides as Release does.
func (c *Client) ReleaseHash(ctx context.Context, key, holder string, ttl time.Duration, latch string) (HashRelease, error) {
	if err := c.CheckTTL(ttl); err != nil {
		return HashRelease{}, err
	}
	keys := []string{key}
	if latch != "" {
		keys = append(keys, latch)
	}
	if err := c.checkSlots(keys); err != nil {
		return HashRelease{}, err
	}
	c.WaitWrites(ctx, key)
	note := c.noteTTL([]string{key}, ttl, false, 0)
	ch := fanoutScript(c, hashReleaseScript, keys, []any{holder, ttl.Milliseconds()}, parseHashVote, nil)
	taint := taintKey(keys[:1], holder)
	var left []int64 // holds left where a counted vote gave one back
	latched, latchedNil := map[int64]int{}, 0
	t := c.newVotes()
	// A hold still held on a quorum is final at once (more answers can
	// only raise the quorum-th count); a freed lock waits for every
	// master.
	got := collect(ch, len(c.nodes), func(got []reply[hashVote]) bool {
		x := got[len(got)-1]
		if x.err != nil {
			t.add(x.node, x.err, voteNo, false)
			return t.lost()
		}
		v := voteNo
		if x.val.state == 1 || x.val.state == 2 {
			v = voteYes
		}
		withheld := !x.trusted || v == voteYes && c.taintedFor(x.node, taint)
		if !x.trusted {
			t.guardedBy(x.node, x.guard)
		}
		t.add(x.node, nil, v, withheld)
		switch {
		case withheld:
		case v == voteYes:
			left = append(left, x.val.n)
		case x.val.state == -3:
			latched[x.val.n]++
		case x.val.state == -4:
			latchedNil++
		}
		return t.lost() || t.won() && quorumCount(left, c.quorum) > 0
	})
	// Only a master that kept holds set the TTL.
	note.settle(refusedBy(got, func(v hashVote) bool { return v.state == 2 }))
	var r HashRelease
	if latchedNil >= c.quorum {
		r.Latched, r.LatchNil = true, true
		return r, nil
	}
	for v, n := range latched {
		if n >= c.quorum {
			r.Latched, r.LatchVal = true, v
			return r, nil
		}
	}
	if !t.decided() {
		return r, t.err()
	}
	if t.won() {
		r.Held = true
		r.Holds = quorumCount(left, c.quorum)
		r.Freed = r.Holds <= 0
	}
	return r, nil
}

// quorumCount is the quorum-th largest of ns (0 when fewer).
func quorumCount(ns []int64, quorum int) int64 {
	if len(ns) < quorum {
		return 0
	}
	s := slices.Clone(ns)
	slices.Sort(s)
	slices.Reverse(s)
	return s[quorum-1]
}

// ExtendHash sets the TTL of the hash lock key to ttl where holder holds
// it. ok reports that a quorum of voting masters did so with validity
// left. It decides as Extend does, and stretches the restart guard.
func (c *Client) ExtendHash(ctx context.Context, key, holder string, ttl time.Duration) (r ExtendResult, ok bool, err error) {
	return c.extendWith(ctx, key, ttl, hashExtendScript, holder, strconv.FormatInt(ttl.Milliseconds(), 10))
}

// hashExtendBatchScript is Redisson's batched renewal on one master: in
// order, each key KEYS[i] that holder ARGV[i+1] holds gets the TTL ARGV[1]
// ms. Answers, per key, 1 renewed, 0 held by another holder, -1 absent; a
// key that is not a hash fails the whole with WRONGTYPE, the keys before
// it renewed, as Redisson's script does.
var hashExtendBatchScript = newScript(`
local out = {}
for i, k in ipairs(KEYS) do
  local t = redis.call('TYPE', k).ok
  if t ~= 'none' and t ~= 'hash' then
    return redis.error_reply('WRONGTYPE Operation against a key holding the wrong kind of value')
  end
  if t == 'none' then out[i] = -1
  elseif redis.call('HEXISTS', k, ARGV[i + 1]) == 1 then
    redis.call('PEXPIRE', k, ARGV[1])
    out[i] = 1
  else out[i] = 0 end
end
return out`)

// ExtendHashBatch is ExtendHash of keys[i] for holders[i], each decided
// on its own, in one step on each master, as Redisson's batched renewal
// runs: ok[i] reports that key i was renewed on a quorum with validity
// left. A key whose renewal is not decided either way makes the answer a
// *QuorumError (or the error a quorum of masters answered).
func (c *Client) ExtendHashBatch(ctx context.Context, keys, holders []string, ttl time.Duration) ([]bool, error) {
	if len(keys) != len(holders) {
		return nil, errors.New("redlock: a holder for each key")
	}
	if err := c.checkSlots(keys); err != nil {
		return nil, err
	}
	if err := c.CheckTTL(ttl); err != nil {
		return nil, err
	}
	for _, k := range keys {
		c.WaitWrites(ctx, k)
	}
	notes := make([]*ttlNote, len(keys))
	for i := range keys {
		notes[i] = c.noteTTL(keys[i:i+1], ttl, false, 0)
	}
	args := []any{ttl.Milliseconds()}
	for _, h := range holders {
		args = append(args, h)
	}
	start := time.Now()
	ch := fanoutScript(c, hashExtendBatchScript, keys, args, (*redis.Cmd).Int64Slice, nil)
	ts := make([]votes, len(keys))
	for i := range ts {
		ts[i] = c.newVotes()
	}
	got := collect(ch, len(c.nodes), func(got []reply[[]int64]) bool {
		r := got[len(got)-1]
		decided := true
		for i := range ts {
			x := r // each key's count marks its own copy
			countReply(c, &ts[i], &x, taintKey(keys[i:i+1], holders[i]), func(v []int64) vote {
				if i < len(v) && v[i] == 1 {
					return voteYes
				}
				return voteNo
			})
			decided = decided && ts[i].decided()
		}
		return decided
	})
	for i, n := range notes {
		// Only a master that renewed the key set its TTL.
		n.settle(refusedBy(got, func(v []int64) bool { return i < len(v) && v[i] == 1 }))
	}
	v := validity(ttl, time.Since(start), c.opts.drift)
	out := make([]bool, len(keys))
	for i, t := range ts {
		switch {
		case t.won():
			out[i] = ttl <= 0 || v > 0
		case !t.lost():
			return out, t.err()
		}
	}
	return out, nil
}

// HashState is a key as a single Redis holding the quorum's state would
// report it, whatever its type.
type HashState struct {
	Type   string            // "hash", "string"…; "none" when no copy holds a quorum
	Fields map[string]string // a hash's fields; a string's value under ""
	PTTL   time.Duration     // the quorum-th largest PTTL of the holders; -2 none
}

// ReadHash reads key, of any type, from every master. The copies that
// count together are those of the same type and the same field names (a
// string's: the same value); the key exists when such a group holds a
// quorum, with the quorum-th largest PTTL of the group. A field's value
// is the one a quorum of the group holds, or when its values are counts,
// the quorum-th largest. It decides as Read does.
func (c *Client) ReadHash(ctx context.Context, key string) (HashState, error) {
	type hcopy struct {
		typ    string
		pttl   time.Duration
		fields map[string]string
	}
	keys := []string{key}
	ch := fanoutScript(c, hashReadScript, keys, nil, func(cmd *redis.Cmd) (hcopy, error) {
		v, err := cmd.Slice()
		if err != nil {
			return hcopy{}, err
		}
		if len(v) != 3 {
			return hcopy{}, fmt.Errorf("unexpected read reply %v", v)
		}
		h := hcopy{typ: fmt.Sprint(v[0]), pttl: pttlOf(v[1]), fields: map[string]string{}}
		kv, _ := v[2].([]any)
		switch {
		case h.typ == "string" && len(kv) == 1:
			h.fields[""] = fmt.Sprint(kv[0])
		case h.typ == "hash":
			for i := 0; i+1 < len(kv); i += 2 {
				h.fields[fmt.Sprint(kv[i])] = fmt.Sprint(kv[i+1])
			}
		}
		return h, nil
	}, nil)
	got := collect(ch, len(c.nodes), func([]reply[hcopy]) bool { return false })
	copies := make([]heldCopy, len(got))
	groups := map[string][]map[string]string{}
	for i, r := range got {
		copies[i] = heldCopy{node: r.node, err: r.err, trusted: r.trusted, guard: r.guard, pttl: r.val.pttl}
		if r.err != nil || r.val.typ == "none" {
			continue
		}
		g := groupOf(r.val.typ, r.val.fields)
		copies[i].value = &g
		if r.trusted {
			groups[g] = append(groups[g], r.val.fields)
		}
	}
	g, pttl, err := c.majority(key, copies)
	if g == nil {
		return HashState{Type: "none", PTTL: -2}, err
	}
	typ, _, _ := strings.Cut(*g, "\x00")
	st := HashState{Type: typ, Fields: map[string]string{}, PTTL: pttl}
	members := groups[*g]
	for f := range members[0] {
		st.Fields[f] = c.fieldValue(members, f)
	}
	return st, nil
}

// groupOf names the copies that count together: type and field names (a
// string's value).
func groupOf(typ string, fields map[string]string) string {
	if typ == "string" {
		return typ + "\x00" + fields[""]
	}
	names := make([]string, 0, len(fields))
	for f := range fields {
		names = append(names, f)
	}
	slices.Sort(names)
	return typ + "\x00" + strings.Join(names, "\x00")
}

// fieldValue is the value of field f among copies that all hold it: the
// one a quorum holds, else, for counts, the quorum-th largest.
func (c *Client) fieldValue(copies []map[string]string, f string) string {
	seen := map[string]int{}
	for _, m := range copies {
		seen[m[f]]++
	}
	if v := heldBy(seen, c.quorum); v != nil {
		return *v
	}
	var ns []int64
	counts := true
	for _, m := range copies {
		n, err := strconv.ParseInt(m[f], 10, 64)
		counts = counts && err == nil
		ns = append(ns, n)
	}
	if !counts || len(ns) < c.quorum {
		return copies[0][f]
	}
	slices.Sort(ns)
	slices.Reverse(ns)
	return strconv.FormatInt(ns[c.quorum-1], 10)
}
