package engine

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
)

// Fenced locks: every grant of a key carries a fencing number that is
// larger than the number of every earlier grant of that key, whichever
// client of these masters granted it.
//
// Each master keeps a counter per key (FenceKeys), without expiry. Acquiring
// is two steps:
//
//  1. On every master, one script: if the key is free, SET it and INCR the
//     counter. Every master that answers also reports its counter, whatever
//     its vote. The step waits for every master (each within the node
//     timeout) and the number is the largest counter reported: F.
//  2. When a quorum of trusted masters granted it, F is written back: every
//     master raises its counter to at least F, and where the key still
//     holds the token, records F beside the lock. The grant is answered
//     only once a quorum of trusted masters has done so.
//
// Why F only grows. Say grant G1 was answered with F1, G2 answered later.
// When G1 was answered, a quorum R1 held G1's token and counters ≥ F1 (step
// 2). G2 was granted by a quorum W2 of masters where the key was free.
// Quorums intersect: some master m is in both. On m the key held G1's token
// from G1's step 1 to its step 2, and was free at G2's step 1, so G2's step
// 1 ran on m either after G1's step 2 — then m's counter was ≥ F1 and G2
// took F1+1 or more there, so F2 > F1 — or before G1's step 1. In that case
// G2 held m before G1 did and its copy there was gone before G1 was
// granted; as G2 was answered only later, its validity would have run out
// on m's clock before it was answered, which the validity check refuses
// (the usual Redlock timing assumption). So F2 > F1.
//
// Where it breaks: the argument needs m's counter. A master that restarts
// empty loses its counters for good (the restart guard withholds its votes
// for the guard window, which protects the lock, not the counter). Because
// step 1 reads every master that answers, and step 2 raises every master
// it reaches, the number still grows as long as one master that took part
// in the previous grant's step 2 kept its counter and answers the next
// acquire. It can go backwards when every such master lost its data or
// cannot be reached (in the worst case, with R1 and the masters reached
// next being two bare quorums, 2·quorum − N masters — one, for 3 or 5
// masters — losing their data), when a key's counter is deleted by hand,
// or when the timing assumption fails (a master's clock jumps).
// Numbers are not dense: attempts that were not granted use numbers too.

// FenceStatePrefix begins the keys where the masters keep a fenced lock's
// counter and state; clients must not write keys with this prefix.
const FenceStatePrefix = "redlock-proxy:"

// FenceKeys returns the keys a fenced lock of key uses on every master: the
// lock itself (the token), its counter, and its state (fence, holds).
func FenceKeys(key string) []string {
	return []string{key, FenceStatePrefix + "fence:" + key, FenceStatePrefix + "lock:" + key}
}

// FenceGrant is a granted fenced lock.
type FenceGrant struct {
	Key, Token string
	Fence      int64         // larger than the number of every earlier grant of Key
	TTL        time.Duration // as asked
	Validity   time.Duration // time left when granted, less the drift allowance
	Holds      int64         // holds of a reentrant token, 1 for a fresh grant
	Votes      int           // trusted masters that granted it
}

// FenceResult is the outcome of AcquireFenced.
type FenceResult struct {
	Grant *FenceGrant // nil when not granted
	// RetryIn, when not granted, is the shortest remaining TTL of the
	// other holder's copies: a hint for when the key may be free (0: none
	// known).
	RetryIn time.Duration
}

type fenceVote struct {
	state   int64 // 1 taken, 2 reentered, 0 refused
	counter int64 // the master's counter after the script
	fence   int64 // reentered: the grant's number, 0 if it had none
	holds   int64
	holder  string
	pttl    time.Duration
}

// AcquireFenced takes key for token with the given ttl (it must be
// positive) on a quorum of masters and gives it a fencing number. With
// reentrant, a key that token already holds is granted again, with one more
// hold and the same number. Errors are those of Acquire.
func (c *Client) AcquireFenced(ctx context.Context, key, token string, ttl time.Duration, reentrant bool) (FenceResult, error) {
	mode := fenceNew
	if reentrant {
		mode = fenceReentrant
	}
	return c.acquireFenced(ctx, key, token, ttl, mode)
}

// ReenterFenced is AcquireFenced with reentrant, granted only when token
// already holds key: a free key is not taken (ErrHeld, as for a key held
// by another token).
func (c *Client) ReenterFenced(ctx context.Context, key, token string, ttl time.Duration) (FenceResult, error) {
	return c.acquireFenced(ctx, key, token, ttl, fenceReentry)
}

// The modes of fenceAcquireScript (ARGV[3]).
const (
	fenceNew       = "0" // a free key only
	fenceReentrant = "1" // a free key, or one the token holds
	fenceReentry   = "2" // a key the token holds only
)

func (c *Client) acquireFenced(ctx context.Context, key, token string, ttl time.Duration, mode string) (FenceResult, error) {
	if ttl <= 0 {
		return FenceResult{}, errors.New("redlock: a fenced lock needs a positive TTL")
	}
	if err := c.CheckTTL(ttl); err != nil {
		return FenceResult{}, err
	}
	if err := c.checkSlots(FenceKeys(key)); err != nil {
		return FenceResult{}, err
	}
	for attempt := 0; ; attempt++ {
		r, err := c.acquireFencedOnce(ctx, key, token, ttl, mode)
		if !errors.Is(err, ErrSplitVote) && !errors.Is(err, ErrValiditySpent) || attempt >= c.opts.retries {
			return r, err
		}
		if err := sleep(ctx, c.retryDelay()); err != nil {
			return r, errors.Join(err, ErrNotAcquired)
		}
	}
}

func (c *Client) acquireFencedOnce(ctx context.Context, key, token string, ttl time.Duration, mode string) (FenceResult, error) {
	if ok := c.votersAvailable([]string{key}); ok < c.quorum {
		return FenceResult{}, c.quorumErr(ok, c.quorum, []string{key})
	}
	c.WaitWrites(ctx, key)
	keys, attempt := FenceKeys(key), newAttemptID()
	c.flights.begin(keys[:1], len(c.nodes))
	note := c.noteTTL(keys[:1], ttl, true, 0)
	start := time.Now()
	args := []any{token, ttl.Milliseconds(), mode, attempt}
	ch := fanoutScript(c, fenceAcquireScript, keys, args, parseFenceVote, nil)
	// Every master's counter counts towards the number: wait for all.
	t, got := countVotes(c, ch, "", nil, func(v fenceVote) vote {
		if v.state > 0 {
			return voteYes
		}
		return voteNo
	})
	note.settle(refusedBy(got, func(v fenceVote) bool { return v.state > 0 }))
	holders := map[string]int{}
	var res FenceResult
	var maxCounter, maxFence, holds int64
	reentered := 0 // votes of reentries that kept a number
	for _, r := range got {
		switch {
		case r.err == errMasterDown:
			c.flights.end(keys[:1]) // sent nothing: no write pending
			continue
		case r.err != nil:
			continue
		}
		maxCounter = max(maxCounter, r.val.counter)
		switch {
		case r.val.state == 0:
			holders[r.val.holder]++
			// PTTL answers 0 in a key's last millisecond: it is gone
			// within 1 ms. (-1: no expiry.)
			if p := max(r.val.pttl, time.Millisecond); r.val.pttl >= 0 && (res.RetryIn == 0 || p < res.RetryIn) {
				res.RetryIn = p
			}
		case r.trusted:
			holds = max(holds, r.val.holds)
			if r.val.state == 2 && r.val.fence > 0 {
				reentered++
				maxFence = max(maxFence, r.val.fence)
			}
		}
	}
	var err error
	switch {
	case t.won():
		f := maxCounter
		if reentered == t.yes {
			// Every vote is a reentry of a fenced grant: it keeps its
			// number. Otherwise the grant is new, at least in part.
			f = maxFence
		}
		if c.opts.fenceSingle {
			f = singleCounter(c, got)
		}
		res.Grant, err = c.commitFence(keys, token, f, ttl, start)
		if res.Grant != nil {
			res.Grant.Holds, res.Grant.Votes = holds, t.yes
		}
	case heldBy(holders, c.quorum) != nil:
		err = ErrHeld
	case t.reachable() < t.quorum:
		err = t.err()
	default:
		err = ErrSplitVote
	}
	c.settleFence(got, err != nil, keys, token, attempt, ttl)
	return res, err
}

// settleFence ends the writes of one fenced attempt (WaitWrites). With
// rollback it first undoes the attempt on every master that ran it, also
// where the script failed, as it may still have run; it returns when those
// undos are done. The undo names the attempt, so it can neither delete a
// lock a later attempt of the same token took, nor give back a hold it did
// not add: no master's votes need withholding meanwhile.
func (c *Client) settleFence(got []reply[fenceVote], rollback bool, keys []string, token, attempt string, ttl time.Duration) {
	which := attempt
	if c.opts.undoByToken {
		which = ""
	}
	var undone sync.WaitGroup
	for _, r := range got {
		switch {
		case r.err == errMasterDown:
			// Sent nothing; its write was ended when it was counted.
		case !rollback || (r.err == nil && r.val.state == 0):
			c.flights.end(keys[:1])
		default:
			undone.Add(1)
			n, sent := r.node, time.Now()
			mk := func() *call { return &call{script: fenceUndoScript, keys: keys, args: []any{token, which}} }
			u := mk()
			u.deadline = sent.Add(c.opts.nodeTimeout)
			u.done = func(cmd *redis.Cmd) {
				if err := cmd.Err(); err != nil {
					c.retryUndo(n, keys[0], err, c.undoUntil(sent, ttl), mk)
				}
				c.flights.end(keys[:1])
				undone.Done()
			}
			r.node.send(context.Background(), u)
		}
	}
	undone.Wait()
}

// commitFence is step 2: it raises the counters to f and records f beside
// the lock, and grants the lock when a quorum of trusted masters still
// holding it did so with validity left.
func (c *Client) commitFence(keys []string, token string, f int64, ttl time.Duration, start time.Time) (*FenceGrant, error) {
	if c.opts.fenceSingle || c.opts.noWriteBack {
		return &FenceGrant{Key: keys[0], Token: token, Fence: f, TTL: ttl, Validity: validity(ttl, time.Since(start), c.opts.drift)}, nil
	}
	args := []any{token, f}
	ch := fanoutScript(c, fenceCommitScript, keys, args, parseInt, nil)
	t, _ := countVotes(c, ch, "", (*votes).decided, yesIfOne)
	switch {
	case t.won():
		v := validity(ttl, time.Since(start), c.opts.drift)
		if v <= 0 {
			return nil, ErrValiditySpent
		}
		return &FenceGrant{Key: keys[0], Token: token, Fence: f, TTL: ttl, Validity: v}, nil
	case t.lost():
		return nil, ErrSplitVote // the lock was lost on the way: try again
	}
	return nil, t.err()
}

// singleCounter is the unsafe number that tests compare against: the
// counter of the first master, in configuration order, that granted.
func singleCounter(c *Client, got []reply[fenceVote]) int64 {
	for _, n := range c.nodes {
		for _, r := range got {
			if r.node == n && r.err == nil && r.val.state > 0 {
				return r.val.counter
			}
		}
	}
	return 0
}

// parseFenceVote reads one master's reply to fenceAcquireScript.
func parseFenceVote(cmd *redis.Cmd) (fenceVote, error) {
	vals, err := cmd.Slice()
	if err != nil {
		return fenceVote{}, err
	}
	if len(vals) < 3 {
		return fenceVote{}, fmt.Errorf("unexpected acquire reply %v", vals)
	}
	v := fenceVote{state: toInt(vals[0]), counter: toInt(vals[1])}
	switch {
	case v.state == 1:
		v.holds = toInt(vals[2])
		return v, nil
	case v.state == 2 && len(vals) > 3:
		v.fence, v.holds, v.counter = v.counter, toInt(vals[2]), toInt(vals[3])
		return v, nil
	case v.state == 2:
		return fenceVote{}, fmt.Errorf("unexpected acquire reply %v", vals)
	}
	v.holder = fmt.Sprint(vals[2])
	if len(vals) > 3 {
		v.pttl = time.Duration(toInt(vals[3])) * time.Millisecond
	}
	return v, nil
}

func newAttemptID() string {
	var b [12]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// FenceRelease is the outcome of ReleaseFenced.
type FenceRelease struct {
	Released bool // a quorum held the token and gave back one hold
	Freed    bool // … and the last one: the key is free
}

// ReleaseFenced gives back one hold of key by token on every master; the
// last hold deletes it. Masters that have not answered when the outcome is
// decided still get the release.
func (c *Client) ReleaseFenced(ctx context.Context, key, token string) (FenceRelease, error) {
	return c.releaseFenced(ctx, key, token, "one")
}

// ReleaseFencedAll is ReleaseFenced giving back every hold at once.
func (c *Client) ReleaseFencedAll(ctx context.Context, key, token string) (FenceRelease, error) {
	return c.releaseFenced(ctx, key, token, "all")
}

func (c *Client) releaseFenced(ctx context.Context, key, token, holds string) (FenceRelease, error) {
	if err := c.checkSlots(FenceKeys(key)); err != nil {
		return FenceRelease{}, err
	}
	c.WaitWrites(ctx, key)
	keys, args := FenceKeys(key), []any{token, holds}
	ch := fanoutScript(c, fenceReleaseScript, keys, args, parseInt, nil)
	t, got := countVotes(c, ch, "", (*votes).decided, func(v int64) vote {
		if v == 1 || v == 2 { // deleted, or one hold given back
			return voteYes
		}
		return voteNo
	})
	r := FenceRelease{Released: t.won(), Freed: countedCodes(got)[1] >= c.quorum}
	if !t.decided() {
		return r, t.err()
	}
	return r, nil
}

// ExtendFenced sets the TTL of key to ttl where token holds it. ok reports
// that a quorum of voting masters did so with validity left; validity is
// then the time left, less the drift allowance. It decides as Extend does.
func (c *Client) ExtendFenced(ctx context.Context, key, token string, ttl time.Duration) (validLeft time.Duration, ok bool, err error) {
	if ttl <= 0 {
		return 0, false, errors.New("redlock: a fenced lock needs a positive TTL")
	}
	if err := c.CheckTTL(ttl); err != nil {
		return 0, false, err
	}
	if err := c.checkSlots(FenceKeys(key)); err != nil {
		return 0, false, err
	}
	c.WaitWrites(ctx, key)
	keys, args := FenceKeys(key), []any{token, ttl.Milliseconds()}
	note := c.noteTTL(keys[:1], ttl, false, 0)
	start := time.Now()
	ch := fanoutScript(c, fenceExtendScript, keys, args, parseInt, nil)
	t, got := countVotes(c, ch, "", (*votes).decided, yesIfOne)
	note.settle(refusedBy(got, func(v int64) bool { return v == 1 }))
	switch {
	case t.won():
		v := validity(ttl, time.Since(start), c.opts.drift)
		return v, v > 0, nil
	case t.lost():
		return 0, false, nil
	}
	return 0, false, t.err()
}

// FenceMaster is what one master holds of a fenced lock.
type FenceMaster struct {
	Token   *string       // nil: the key is absent there
	PTTL    time.Duration // -1 no expiry, -2 absent
	Fence   int64         // the number recorded beside the lock, 0 none
	Holds   int64         // 0 when not recorded
	Counter int64         // the key's counter on this master
	Trusted bool          // its vote counts now (restart guard)
	Err     error         // the master did not answer
}

// FenceInfo is a fenced lock as the quorum sees it, and per master.
type FenceInfo struct {
	Token    *string       // the token held by a quorum, else nil
	Fence    int64         // the largest number recorded beside that token
	Validity time.Duration // the quorum-th largest PTTL of its holders; -2 none
	Holds    int64         // the largest hold count among its holders
	Masters  []FenceMaster // in configuration order
}

// InfoFenced reads a fenced lock from every master. The token is that
// held by a quorum, decided as Read decides; when that cannot be known,
// the error is a *QuorumError and info still holds what each master said.
func (c *Client) InfoFenced(ctx context.Context, key string) (FenceInfo, error) {
	keys := FenceKeys(key)
	if err := c.checkSlots(keys); err != nil {
		return FenceInfo{}, err
	}
	ch := fanoutScript(c, fenceInfoScript, keys, nil, func(cmd *redis.Cmd) (FenceMaster, error) {
		vals, err := cmd.Slice()
		if err != nil {
			return FenceMaster{}, err
		}
		if len(vals) != 5 {
			return FenceMaster{}, fmt.Errorf("unexpected info reply %v", vals)
		}
		m := FenceMaster{PTTL: pttlOf(vals[1]), Counter: atoi(vals[2])}
		if s, ok := vals[0].(string); ok {
			m.Token = &s
		}
		m.Fence, m.Holds = atoi(vals[3]), atoi(vals[4])
		return m, nil
	}, nil)
	got := collect(ch, len(c.nodes), func([]reply[FenceMaster]) bool { return false })
	info := FenceInfo{Validity: -2, Masters: make([]FenceMaster, len(c.nodes))}
	copies := make([]heldCopy, 0, len(got))
	for i, n := range c.nodes {
		for _, r := range got {
			if r.node != n {
				continue
			}
			m := r.val
			m.Trusted, m.Err = r.trusted, r.err
			if r.err != nil {
				m.PTTL = -2
			}
			info.Masters[i] = m
			copies = append(copies, heldCopy{node: n, err: r.err, trusted: r.trusted, guard: r.guard, value: m.Token, pttl: m.PTTL})
		}
	}
	tok, validity, err := c.majority(key, copies)
	if tok != nil {
		info.Token, info.Validity = tok, validity
		for _, m := range info.Masters {
			if m.Token != nil && *m.Token == *tok {
				info.Fence, info.Holds = max(info.Fence, m.Fence), max(info.Holds, m.Holds)
			}
		}
	}
	return info, err
}

// atoi reads an integer from a script reply that may be a string or nil.
func atoi(v any) int64 {
	if s, ok := v.(string); ok {
		var n int64
		_, _ = fmt.Sscan(strings.TrimSpace(s), &n)
		return n
	}
	return toInt(v)
}
