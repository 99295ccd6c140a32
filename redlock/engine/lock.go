package engine

import (
	"cmp"
	"context"
	"crypto/rand"
	"encoding/binary"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
)

// ErrNotAcquired is returned when a lock was not granted.
var ErrNotAcquired = errors.New("redlock: not acquired")

// ErrHeld is returned when a quorum of masters holds the key for another
// value. It matches ErrNotAcquired.
var ErrHeld = fmt.Errorf("%w: held elsewhere", ErrNotAcquired)

// ErrValiditySpent is returned when a quorum agreed but so late that no
// validity was left. It matches ErrNotAcquired.
var ErrValiditySpent = fmt.Errorf("%w: validity spent before the quorum was reached", ErrNotAcquired)

// ErrSplitVote is returned when no value reached a quorum after every retry.
// It matches ErrNotAcquired.
var ErrSplitVote = fmt.Errorf("%w: split vote", ErrNotAcquired)

// Lock is a granted lock.
type Lock struct {
	Key, Value string
	Keys       []string      // every key of a multi-key lock, Key first
	TTL        time.Duration // 0: the key has no expiry
	Validity   time.Duration // time left when granted, less the drift allowance; 0 with no TTL
	Votes      int           // trusted masters that granted it
}

// AcquireResult is the outcome of an acquire that also asked for the
// previous value (SET … NX GET).
type AcquireResult struct {
	Lock *Lock   // nil when not granted
	Prev *string // the value a quorum held before, when not granted
	// PrevTooLarge, in place of Prev, is the value a quorum held when it
	// is longer than the client keeps (WithMaxValue): it was not read.
	PrevTooLarge *LargeValue
}

// Acquire takes key for value on a quorum of masters with the given ttl
// (0: no expiry). It returns ErrNotAcquired (ErrHeld, ErrValiditySpent,
// ErrSplitVote) when the lock was not granted, and a *QuorumError when too
// few masters could vote. A lock that was not granted is removed by value
// from every master, including those that did not answer in time.
func (c *Client) Acquire(ctx context.Context, key, value string, ttl time.Duration) (*Lock, error) {
	r, err := c.acquire(ctx, []string{key}, value, ttl)
	return r.Lock, err
}

// AcquireAll takes every key for value, all or none, on a quorum of masters:
// a master votes yes only when it took every key. When the lock was not
// granted, the result's Prev is the value a quorum of masters held of the
// first key each found taken.
func (c *Client) AcquireAll(ctx context.Context, keys []string, value string, ttl time.Duration) (AcquireResult, error) {
	if len(keys) == 0 {
		return AcquireResult{}, errors.New("redlock: no keys")
	}
	return c.acquire(ctx, keys, value, ttl)
}

// Holder names the values a Reacquire takes as its caller's own: those
// that start with Prefix; with Exact, Prefix itself; with Range, each
// value v (an absent key's is "") where GETRANGE v 0 Len-1 equals Lua's
// string.sub(Prefix, 1, Len), as bsm/redislock's obtain script compares
// them, for every Len it may be given.
type Holder struct {
	Prefix string
	Exact  bool
	Range  bool
	Len    int64
}

// Holds reports whether v is one of h's values.
func (h Holder) Holds(v string) bool {
	switch {
	case h.Exact:
		return v == h.Prefix
	case h.Range:
		return getRange(v, 0, h.Len-1) == luaSub(h.Prefix, 1, h.Len)
	}
	return strings.HasPrefix(v, h.Prefix)
}

// getRange is Redis's GETRANGE of s from start to end, both inclusive,
// negative ones counted from the end.
func getRange(s string, start, end int64) string {
	n := int64(len(s))
	if start < 0 && end < 0 && start > end {
		return ""
	}
	if start < 0 {
		start += n
	}
	if end < 0 {
		end += n
	}
	start, end = max(start, 0), max(end, 0)
	if end >= n {
		end = n - 1
	}
	if start > end || n == 0 {
		return ""
	}
	return s[start : end+1]
}

// luaSub is Lua 5.1's string.sub(s, i, j).
func luaSub(s string, i, j int64) string {
	n := int64(len(s))
	rel := func(p int64) int64 {
		if p < 0 {
			p += n + 1
		}
		return max(p, 0)
	}
	i, j = max(rel(i), 1), min(rel(j), n)
	if i > j {
		return ""
	}
	return s[i-1 : j]
}

// Reacquire is a holder's acquire of a lock it holds: on every master
// where each of keys holds one of h's values, it sets them all to value
// with the given ttl (0: no expiry). It decides as Extend does: ok when a
// quorum of voting masters did so with validity left; not when that is out
// of reach even counting every master whose answer is unknown (the result
// counts Other where a key held another value, Absent where the keys that
// were not h's were absent); otherwise the error is a *QuorumError. The TTL
// stretches the restart guard.
func (c *Client) Reacquire(ctx context.Context, keys []string, value string, ttl time.Duration, h Holder) (r ExtendResult, ok bool, err error) {
	mode := "prefix"
	switch {
	case h.Exact:
		mode = "exact"
	case h.Range:
		mode = "range"
	}
	return c.extendKeys(ctx, c.quorum, keys, ttl, reacquireScript, value, ttl.Milliseconds(), h.Prefix, mode, h.Len)
}

// acquireSteps returns the per-master vote of an acquire, how to read its
// reply, and its undo.
func (c *Client) acquireSteps(keys []string, value string, ttl time.Duration) (vote func(*node, *call), parse func(*redis.Cmd) (setVote, error), undo func(*node) *call) {
	if len(keys) == 1 {
		raw := setCommand(keys[0], value, ttl) // encoded once for every master
		return func(_ *node, cl *call) { cl.raw = raw }, parseSet,
			func(*node) *call { return &call{script: releaseScript, keys: keys, args: []any{value}} }
	}
	ms := ttl.Milliseconds()
	return func(_ *node, cl *call) {
			cl.script, cl.keys, cl.args = acquireAllScript, keys, []any{value, ms}
		}, func(cmd *redis.Cmd) (setVote, error) {
			v, err := cmd.Slice()
			if err != nil || len(v) == 0 {
				return setVote{}, err
			}
			if toInt(v[0]) == 1 {
				return setVote{set: true}, nil
			}
			held := ""
			if len(v) > 1 {
				if lv, ok := v[1].(LargeValue); ok {
					return setVote{large: &lv}, nil
				}
				held = fmt.Sprint(v[1])
			}
			return setVote{prev: &held}, nil
		}, func(*node) *call {
			return &call{script: releaseAllScript, keys: keys, args: []any{value}}
		}
}

// AcquireGet is Acquire that also reports the value a quorum held when the
// lock was not granted, as SET … NX GET does.
func (c *Client) AcquireGet(ctx context.Context, key, value string, ttl time.Duration) (AcquireResult, error) {
	return c.acquire(ctx, []string{key}, value, ttl)
}

func (c *Client) acquire(ctx context.Context, keys []string, value string, ttl time.Duration) (AcquireResult, error) {
	if err := c.CheckTTL(ttl); err != nil {
		return AcquireResult{}, err
	}
	if err := c.checkSlots(keys); err != nil {
		return AcquireResult{}, err
	}
	for attempt := 0; ; attempt++ {
		r, err := c.acquireOnce(ctx, keys, value, ttl)
		if !errors.Is(err, ErrSplitVote) && !errors.Is(err, ErrValiditySpent) || attempt >= c.opts.retries {
			return r, err
		}
		if err := sleep(ctx, c.retryDelay()); err != nil {
			return r, errors.Join(err, ErrNotAcquired)
		}
	}
}

func (c *Client) retryDelay() time.Duration {
	d := c.opts.retryDelay
	if d <= 0 {
		return 0
	}
	var b [8]byte
	_, _ = rand.Read(b[:])
	return d/2 + time.Duration(binary.LittleEndian.Uint64(b[:])%uint64(d/2+1))
}

func sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// setVote is one master's answer to SET NX.
type setVote struct {
	set   bool        // the key is now ours on this master
	prev  *string     // with GET: the value it held
	large *LargeValue // … or, for a value longer than WithMaxValue, its length and hash
}

// setCommand is the per-master acquire, SET key value NX GET [PX ttl],
// encoded. GET (Redis ≥ 7.0 allows it with NX) names the holder of a key
// that is taken, so that a key held by one other value on a quorum is told
// apart from a split vote.
func setCommand(key, value string, ttl time.Duration) []byte {
	n := 5
	if ttl > 0 {
		n = 7
	}
	b := make([]byte, 0, 64+len(key)+len(value))
	b = appendLen(b, '*', n)
	b = appendBulk(b, "set")
	b = appendBulk(b, key)
	b = appendBulk(b, value)
	b = appendBulk(b, "nx")
	b = appendBulk(b, "get")
	if ttl > 0 {
		b = appendBulk(b, "px")
		b = appendBulkInt(b, ttl.Milliseconds())
	}
	return b
}

func (c *Client) acquireOnce(ctx context.Context, keys []string, value string, ttl time.Duration) (AcquireResult, error) {
	if ok := c.votersAvailable(keys); ok < c.quorum {
		// Known in advance: refuse before anything is written.
		return AcquireResult{}, c.quorumErr(ok, c.quorum, keys)
	}
	// An earlier acquire of the same key through this client may still be
	// writing to slower masters: let it land first, as it would on one Redis.
	for _, k := range keys {
		c.WaitWrites(ctx, k)
	}
	send, parse, undo := c.acquireSteps(keys, value, ttl)
	c.flights.begin(keys, len(c.nodes))
	note := c.noteTTL(keys, ttl, true, 0)
	run := newAcquireRun(c, keys, ttl, value, func(n *node, v setVote, err error) (*call, bool) {
		if err == nil && !v.set || isReplyError(err) {
			return nil, false // refused, or failed (another type): nothing taken
		}
		return undo(n), true
	})
	start := time.Now()
	ch := fanoutVotes(c, keys, c.quorum, send, parse, run.onVote)
	prevs := map[string]int{}
	var larges map[LargeValue]int
	t, got := countVotes(c, ch, run.taint, decidedOrLost, func(v setVote) vote {
		if v.prev != nil { // taken: prevs says by whom
			prevs[*v.prev]++
		}
		if v.large != nil { // … or larges, by a value too long to keep
			if larges == nil {
				larges = map[LargeValue]int{}
			}
			larges[*v.large]++
		}
		if v.set {
			return voteYes
		}
		return voteNo
	})
	elapsed := time.Since(start)
	note.settle(refusedBy(got, func(v setVote) bool { return v.set }))
	var res AcquireResult
	rollback := false
	large := heldByLarge(larges, c.quorum)
	v, err := c.acquireOutcome(&t, heldBy(prevs, c.quorum) != nil || large != nil, ttl, elapsed)
	if err == nil {
		res.Lock = &Lock{Key: keys[0], Keys: keys, Value: value, TTL: ttl, Validity: v, Votes: t.yes}
	} else {
		res.Prev, res.PrevTooLarge = heldBy(prevs, c.quorum), large
		// When a quorum already holds our own value (a client repeating its
		// SET NX), nothing was taken from anyone: undoing would delete the
		// lock its owner still holds.
		rollback = res.Prev == nil || *res.Prev != value
	}
	// Undo what the masters that answered took; late and failed ones undo
	// their part when they answer, in the background.
	run.decide(rollback)
	return res, err
}

// acquireRun settles each master's part of one acquire once the outcome is
// known: a master's write counts as landed (for WaitWrites) when it answered,
// or, for a lock that was not granted, when its undo did.
type acquireRun[T any] struct {
	c    *Client
	keys []string
	ttl  time.Duration
	// undo returns the call that takes back what a master's vote took,
	// also where it failed (it may still land), or nil; with taint, the
	// master's votes for the same token don't count until it is known to
	// have landed.
	undo  func(n *node, v T, err error) (u *call, taint bool)
	taint string

	mu       sync.Mutex
	decided  bool
	rollback bool
	early    []earlyVote[T] // answered before the outcome was known
	earlyBuf [5]earlyVote[T]
	undone   sync.WaitGroup // rollbacks decide waits for
}

// newAcquireRun starts the settling of an acquire of keys for value
// (token).
func newAcquireRun[T any](c *Client, keys []string, ttl time.Duration, value string, undo func(n *node, v T, err error) (*call, bool)) *acquireRun[T] {
	a := &acquireRun[T]{c: c, keys: keys, ttl: ttl, undo: undo, taint: taintKey(keys, value)}
	a.early = a.earlyBuf[:0]
	return a
}

type earlyVote[T any] struct {
	n   *node
	v   T
	err error
}

// onVote runs in the worker that read a master's vote.
func (a *acquireRun[T]) onVote(n *node, v T, err error) {
	a.mu.Lock()
	if !a.decided {
		a.early = append(a.early, earlyVote[T]{n, v, err})
		a.mu.Unlock()
		return
	}
	a.mu.Unlock()
	a.settle(n, v, err, false)
}

// decide records the outcome and settles the votes already in. With a
// rollback it waits until the masters among them that answered have undone
// their part; failed ones undo it in the background.
func (a *acquireRun[T]) decide(rollback bool) {
	a.mu.Lock()
	a.decided, a.rollback = true, rollback
	early := a.early
	a.early = nil
	a.mu.Unlock()
	for _, e := range early {
		if e.err == nil {
			a.undone.Add(1)
		}
		a.settle(e.n, e.v, e.err, e.err == nil)
	}
	if rollback {
		a.undone.Wait()
	}
}

// settle undoes one master's part of a lock that was not granted. With
// awaited, it marks a.undone done when that is done.
func (a *acquireRun[T]) settle(n *node, v T, err error, awaited bool) {
	c := a.c
	var u *call
	var taint bool
	if a.rollback && err != errMasterDown {
		u, taint = a.undo(n, v, err)
	}
	if u == nil {
		c.flights.end(a.keys)
		if awaited {
			a.undone.Done()
		}
		return
	}
	// Until the undo is known to have landed, it may still land later and
	// remove a lock this same token wins meanwhile: the master's votes for
	// the token don't count while it is in flight, nor, if it fails, until
	// that cannot matter.
	sent := time.Now()
	if taint && !c.off(GuardTaint) {
		n.taint(a.taint, c.taintFor(a.ttl))
	}
	u.deadline = sent.Add(c.opts.nodeTimeout)
	u.done = func(cmd *redis.Cmd) {
		switch uerr := cmd.Err(); {
		case uerr == nil && taint:
			n.untaint(a.taint)
		case uerr != nil && taint:
			// The votes for the token stay withheld until the taint ends:
			// this try may still land, and so may the retries.
			c.retryUndo(n, a.keys[0], uerr, c.undoUntil(sent, a.ttl), func() *call {
				u, _ := a.undo(n, v, err)
				return u
			})
		}
		c.flights.end(a.keys)
		if awaited {
			a.undone.Done()
		}
	}
	n.sendAsync(u)
}

func parseSet(cmd *redis.Cmd) (setVote, error) {
	v, err := cmd.Result()
	switch {
	case err == redis.Nil:
		return setVote{set: true}, nil // the key was absent and is now ours
	case err != nil:
		return setVote{}, err
	}
	if lv, ok := v.(LargeValue); ok {
		return setVote{large: &lv}, nil
	}
	s, ok := v.(string) // a bulk string, read as one
	if !ok {
		s = fmt.Sprint(v)
	}
	return setVote{prev: &s}, nil
}

// ReleaseResult counts what a release found on the masters whose answers
// count (the restart guard withholds some; see votes).
type ReleaseResult struct {
	Deleted  int // masters where the key held the value and was deleted
	Other    int // masters where the key held another value
	Absent   int // masters where the key did not exist
	Failed   int // masters that did not answer
	Withheld int // masters that answered, but whose answer does not count
}

// Released reports whether the value was deleted from a quorum, that is,
// whether the lock was held when it was released.
func (r ReleaseResult) Released(quorum int) bool { return r.Deleted >= quorum }

// Release deletes key from every master where it holds value. It returns as
// soon as the answer is decided; masters that have not answered yet still
// get the delete. The lock was held when a quorum deleted it, and was not
// when a quorum of deletions is out of reach even counting every master
// that did not answer or whose answer does not count; otherwise the answer
// is a *QuorumError.
func (c *Client) Release(ctx context.Context, key, value string) (ReleaseResult, error) {
	return c.releaseWith(ctx, key, releaseScript, value)
}

// releaseWith runs a per-master release script that answers 1 (deleted), 0
// (held by another value) or -1 (absent) for token, its first argument,
// and decides as Release does.
func (c *Client) releaseWith(ctx context.Context, key string, s *script, token string, args ...any) (ReleaseResult, error) {
	return c.releaseKeys(ctx, []string{key}, s, token, args...)
}

// releaseKeys is releaseWith over keys: a script that answers 1, 0 or -1
// for all of them.
func (c *Client) releaseKeys(ctx context.Context, keys []string, s *script, token string, args ...any) (ReleaseResult, error) {
	if err := c.checkSlots(keys); err != nil {
		return ReleaseResult{}, err
	}
	for _, k := range keys {
		c.WaitWrites(ctx, k)
	}
	ch := fanoutVotes(c, keys, c.quorum, scriptCall(s, keys, append([]any{token}, args...)), parseInt, nil)
	t, got := countVotes(c, ch, taintKey(keys, token), (*votes).decided, yesIfOne)
	codes := countedCodes(got)
	r := ReleaseResult{Deleted: t.yes, Other: codes[0], Absent: codes[-1], Failed: t.failed, Withheld: t.withheld}
	if !t.decided() {
		return r, t.err()
	}
	return r, nil
}

// yesIfOne classes a per-master script's answer: 1 is yes.
func yesIfOne(v int64) vote {
	if v == 1 {
		return voteYes
	}
	return voteNo
}

// countedCodes counts the answers of the masters whose vote counts, by
// code.
func countedCodes(got []reply[int64]) map[int64]int {
	m := map[int64]int{}
	for _, r := range got {
		if r.err == nil && r.trusted {
			m[r.val]++
		}
	}
	return m
}

// ExtendMode says how Extend sets the new TTL.
type ExtendMode string

// Extend modes.
const (
	ExtendSet      ExtendMode = "set"      // PEXPIRE ttl: the TTL becomes ttl; 0 or less ends the lock
	ExtendSetIfTTL ExtendMode = "setttl"   // as ExtendSet, only on a key that has a TTL
	ExtendAdd      ExtendMode = "add"      // ttl is added to the remaining TTL, which must exist
	ExtendClaim    ExtendMode = "claim"    // as ExtendSet, and an absent key is taken
	ExtendPersist0 ExtendMode = "persist0" // as ExtendSet, but a ttl of 0 or less removes the expiry
)

// ExtendResult counts what an extend found on the masters whose answers
// count.
type ExtendResult struct {
	Extended int // masters where the value held and was renewed
	Other    int // masters where the key held another value
	Absent   int // masters where the key did not exist
	NoTTL    int // masters where the key had no TTL to add to (ExtendAdd)
	Failed   int
	Withheld int           // masters that answered, but whose answer does not count
	Validity time.Duration // with Extended ≥ quorum: the new validity
}

// Extend renews key on every master where it holds value. The lock counts as
// extended when a quorum of voting masters renewed it and validity is left;
// ok reports that. It was not held when a quorum of renewals is out of
// reach even counting every master that did not answer or whose answer
// does not count; otherwise the answer is a *QuorumError. Every TTL it
// writes stretches the restart guard on key (guard.go); one above
// WithMaxLockTTL is refused with a *TTLError before anything is sent.
func (c *Client) Extend(ctx context.Context, key, value string, ttl time.Duration, mode ExtendMode) (r ExtendResult, ok bool, err error) {
	if mode == ExtendAdd {
		return c.extendAdd(ctx, key, value, ttl)
	}
	return c.extendWith(ctx, key, ttl, extendScript, value, strconv.FormatInt(ttl.Milliseconds(), 10), string(mode))
}

// extendAdd adds ttl to what is left of the lock. A master that missed an
// earlier extend holds a shorter copy than the others, so adding ttl to
// each master's own remainder could leave the lock, on the masters that
// renew it, shorter-lived than its holder reckons (its earlier end plus
// ttl). It first reads every master's copy and bounds what is left of the
// lock from above: the quorum-th longest copy among all holders cannot
// outlive the (quorum − u)-th longest among those that answered, u being
// the masters whose copy is not known. Then it sets the TTL to that bound
// plus ttl wherever value holds the key (and has a TTL).
//
// A TTL to add above WithMaxLockTTL is refused before anything is sent;
// one whose sum with what is left would be, before anything is written.
func (c *Client) extendAdd(ctx context.Context, key, value string, ttl time.Duration) (r ExtendResult, ok bool, err error) {
	if err := c.CheckTTL(ttl); err != nil {
		return r, false, err
	}
	c.WaitWrites(ctx, key)
	keys := []string{key}
	taint := taintKey(keys, value)
	// Values longer than the token are told apart by their length alone.
	cut := max(c.opts.inlineMax(), len(value))
	t, got := countVotes(c, fanoutScript(c, readScript, keys, []any{cut}, parseCopy, nil), taint, nil, func(h heldCopy) vote {
		if h.value != nil && *h.value == value {
			return voteYes
		}
		return voteNo
	})
	r = ExtendResult{Failed: t.failed, Withheld: t.withheld}
	var lefts []time.Duration // what is left of each copy of value
	for _, x := range got {
		switch {
		case x.err != nil || x.withheld:
		case x.val.long > 0:
			r.Other++ // longer than the token
		case x.val.value == nil:
			r.Absent++
		case *x.val.value != value:
			r.Other++
		case x.val.pttl < 0:
			r.NoTTL++
		default:
			lefts = append(lefts, x.val.pttl)
		}
	}
	unknown := t.unknown() // every master answered: those that failed, and those whose vote is withheld
	switch {
	case r.NoTTL > 0:
		return r, false, nil // no TTL to add to, as the libraries' scripts answer
	case t.lost() || len(lefts)+unknown < c.quorum:
		return r, false, nil // not held
	case unknown >= c.quorum:
		return r, false, t.err()
	}
	slices.SortFunc(lefts, func(a, b time.Duration) int { return cmp.Compare(b, a) })
	target := lefts[c.quorum-unknown-1] + ttl
	if err := c.CheckTTL(target); err != nil {
		return r, false, err
	}
	return c.extendWith(ctx, key, target, extendScript, value, strconv.FormatInt(target.Milliseconds(), 10), string(ExtendSetIfTTL))
}

// extendWith runs a per-master renewal script for token, its first
// argument, that answers 1 (renewed), 0 (held by another value), -1
// (absent) or -2 (no TTL), and decides as Extend does; ttl is the TTL the
// script sets.
func (c *Client) extendWith(ctx context.Context, key string, ttl time.Duration, s *script, token string, args ...any) (r ExtendResult, ok bool, err error) {
	return c.extendQuorum(ctx, c.quorum, key, ttl, s, token, args...)
}

// extendQuorum is extendWith decided by a quorum of quorum masters.
func (c *Client) extendQuorum(ctx context.Context, quorum int, key string, ttl time.Duration, s *script, token string, args ...any) (r ExtendResult, ok bool, err error) {
	return c.extendKeys(ctx, quorum, []string{key}, ttl, s, token, args...)
}

// extendKeys is extendQuorum over keys: a script that answers 1, 0, -1 or
// -2 for all of them.
func (c *Client) extendKeys(ctx context.Context, quorum int, keys []string, ttl time.Duration, s *script, token string, args ...any) (r ExtendResult, ok bool, err error) {
	if err := c.CheckTTL(ttl); err != nil {
		return r, false, err
	}
	if err := c.checkSlots(keys); err != nil {
		return r, false, err
	}
	for _, k := range keys {
		c.WaitWrites(ctx, k)
	}
	note := c.noteTTL(keys, ttl, false, quorum)
	start := time.Now()
	ch := fanoutVotes(c, keys, quorum, scriptCall(s, keys, append([]any{token}, args...)), parseInt, nil)
	t, got := countVotesOf(c, quorum, ch, taintKey(keys, token), (*votes).decided, yesIfOne)
	note.settle(refusedBy(got, func(v int64) bool { return v == 1 }))
	codes := countedCodes(got)
	r = ExtendResult{Extended: t.yes, Other: codes[0], Absent: codes[-1], NoTTL: codes[-2], Failed: t.failed, Withheld: t.withheld}
	switch {
	case t.won() && ttl <= 0:
		return r, true, nil // the lock was ended or made permanent: no validity to check
	case t.won():
		r.Validity = validity(ttl, time.Since(start), c.opts.drift)
		return r, r.Validity > 0, nil
	case t.lost():
		return r, false, nil
	}
	return r, false, t.err()
}

// ReleaseAll deletes every key that holds value on every master, and
// reports how many keys were deleted from a quorum. It returns as soon as
// every key's release is decided (masters that have not answered yet still
// get the delete); when one is not decided either way (see Release), the
// answer is a *QuorumError.
func (c *Client) ReleaseAll(ctx context.Context, keys []string, value string) (int, error) {
	if err := c.checkSlots(keys); err != nil {
		return 0, err
	}
	for _, k := range keys {
		c.WaitWrites(ctx, k)
	}
	args := []any{value}
	ch := fanoutScript(c, releaseAllScript, keys, args, (*redis.Cmd).Int64Slice, nil)
	perKey := countVotesEach(c, ch, len(keys), taintKey(keys, value), func(v []int64, i int) vote {
		if i < len(v) && v[i] == 1 {
			return voteYes
		}
		return voteNo
	})
	released := 0
	for _, t := range perKey {
		switch {
		case t.won():
			released++
		case !t.lost():
			return released, t.err()
		}
	}
	return released, nil
}

// ReleaseEvery deletes keys from every master where all of them hold
// value, and decides as Release does: the lock was held when a quorum
// deleted them; the result counts Other where a key held another value,
// Absent where the keys that did not hold value were absent.
func (c *Client) ReleaseEvery(ctx context.Context, keys []string, value string) (ReleaseResult, error) {
	return c.releaseKeys(ctx, keys, releaseEveryScript, value)
}

// ExtendAll renews every key to ttl on every master where all of them hold
// value. It decides as Extend does: ok when a quorum of voting masters
// renewed them with validity left; the result counts Other where a key
// held another value, Absent where the keys that did not hold value were
// absent.
func (c *Client) ExtendAll(ctx context.Context, keys []string, value string, ttl time.Duration) (r ExtendResult, ok bool, err error) {
	return c.extendKeys(ctx, c.quorum, keys, ttl, extendAllScript, value, ttl.Milliseconds())
}

// taintFor is how long a master whose rollback failed does not vote for the
// same token: the lock's TTL or the guard window, whichever is longer.
func (c *Client) taintFor(ttl time.Duration) time.Duration {
	d := max(ttl, c.opts.guardWindow)
	if d == 0 {
		d = time.Minute
	}
	return d
}

func taintKey(keys []string, value string) string {
	return strings.Join(keys, "\x00") + "\x01" + value
}

// votersAvailable counts the masters that could vote on keys now: not
// marked down and not held back by the restart guard.
func (c *Client) votersAvailable(keys []string) int {
	now, n := time.Now(), 0
	for _, nd := range c.nodes {
		if _, _, guarded := nd.guardOn(now, keys); !nd.downFor(keys) && !guarded {
			n++
		}
	}
	return n
}

// quorumErr is the *QuorumError of a step on keys that reachable masters
// could settle, needed being its quorum, with the masters the restart
// guard holds back on keys now.
func (c *Client) quorumErr(reachable, needed int, keys []string) *QuorumError {
	return &QuorumError{Reachable: reachable, Needed: needed, Guarded: c.guarded(keys)}
}

// VotersAvailable is how many masters could vote now: up and not held back
// by the restart guard on every key.
func (c *Client) VotersAvailable() int { return c.votersAvailable(nil) }
