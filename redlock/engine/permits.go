package engine

import (
	"context"
	"errors"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"
)

// Counting semaphores, in the sorted-set form of redis-semaphore's
// Semaphore: the key is a sorted set of its holders' tokens, at most limit
// of them at once. Each master runs the per-master halves below on its own
// clock: a member is scored by its expiry in ms on that master's clock
// (TIME) and is pruned once it has passed, as a key with a TTL expires
// there; the key itself expires with its latest member. The client's
// clock plays no part.
//
// A permit is granted when PermitQuorum masters admitted it with validity
// left, not a majority. Each master admits a token only while it holds
// fewer than limit members, so it holds at most limit at any moment; limit+1
// holders, each admitted by q masters and holding there while its validity
// lasts, would need (limit+1)·q ≤ N·limit admissions held at once. That is
// impossible exactly when q > N·limit/(limit+1). A plain majority is
// enough only for limit 1: with 3 masters and limit 2, holders A on {1,2},
// B on {2,3} and C on {3,1} each hold a majority while every master holds
// two members (TestSemaphoreMajorityAdmitsOneTooMany in package proxy).

// GuardPermitQuorum: a permit of a semaphore is granted and renewed only
// by PermitQuorum masters; off, by the client's quorum (a majority), which
// lets limit+1 holders in at once.
const GuardPermitQuorum Guard = "permit-quorum"

// PermitQuorum is how many of n masters must admit a permit of a semaphore
// of limit permits for at most limit holders to hold one at once:
// ⌊n·limit/(limit+1)⌋ + 1. It is the majority for limit 1 and all n
// masters from limit n−1 on (3 masters: 2 for limit 1, 3 from limit 2; 5
// masters: 3 for limit 1, 4 for limits 2 and 3, 5 from limit 4). A limit
// below 1 admits no one; its quorum is n.
func PermitQuorum(n int, limit int64) int {
	if limit < 1 || limit >= int64(n) {
		return n
	}
	l := int(limit)
	return n*l/(l+1) + 1
}

// permitQuorum is the quorum of a semaphore of limit permits: PermitQuorum,
// and never less than the client's own; the client's with
// GuardPermitQuorum off.
func (c *Client) permitQuorum(limit int64) int {
	if c.off(GuardPermitQuorum) {
		return c.quorum
	}
	return max(c.quorum, PermitQuorum(len(c.nodes), limit))
}

// ErrWrongType is the masters' answer, given by a quorum of them, that the
// key holds a value of another type than the operation's.
var ErrWrongType error = replyError("WRONGTYPE Operation against a key holding the wrong kind of value")

// permitAcquireScript admits token ARGV[1] to the semaphore KEYS[1] of
// ARGV[2] permits for ARGV[3] ms, when fewer than ARGV[2] unexpired members
// hold it (the token itself counted, as the library counts it). Answers 1
// admitted, 2 admitted again (the token was a member; its expiry is
// renewed), 0 full; WRONGTYPE when the key holds another type, as the
// library's script fails there.
var permitAcquireScript = newScript(permitTypeCheck + `
local key, token, limit, ttl = KEYS[1], ARGV[1], tonumber(ARGV[2]), tonumber(ARGV[3])
local t = redis.call('TIME')
local now = t[1] * 1000 + math.floor(t[2] / 1000)
redis.call('ZREMRANGEBYSCORE', key, '-inf', now)
if redis.call('ZCARD', key) >= limit then return 0 end
local mine = redis.call('ZSCORE', key, token)
redis.call('ZADD', key, now + ttl, token)
redis.call('PEXPIREAT', key, redis.call('ZREVRANGE', key, 0, 0, 'WITHSCORES')[2])
if mine then return 2 end
return 1`)

// permitRefreshScript renews token ARGV[1]'s permit of the semaphore
// KEYS[1] for ARGV[2] ms where the token is an unexpired member. Answers 1
// renewed, 0 not a member, -1 absent; WRONGTYPE for another type.
var permitRefreshScript = newScript(permitTypeCheck + `
local key, token, ttl = KEYS[1], ARGV[1], tonumber(ARGV[2])
if ty == 'none' then return -1 end
local t = redis.call('TIME')
local now = t[1] * 1000 + math.floor(t[2] / 1000)
redis.call('ZREMRANGEBYSCORE', key, '-inf', now)
if not redis.call('ZSCORE', key, token) then return 0 end
redis.call('ZADD', key, now + ttl, token)
redis.call('PEXPIREAT', key, redis.call('ZREVRANGE', key, 0, 0, 'WITHSCORES')[2])
return 1`)

// permitTypeCheck begins the per-master permit scripts: ty is the type of
// KEYS[1], and a type other than a sorted set fails with WRONGTYPE.
const permitTypeCheck = `
local ty = redis.call('TYPE', KEYS[1]).ok
if ty ~= 'none' and ty ~= 'zset' then
  return redis.error_reply('WRONGTYPE Operation against a key holding the wrong kind of value')
end`

// permitReleaseScript removes each token in ARGV from the semaphore KEYS[1]
// and answers, per token, 1 removed or 0 not a member; {-1} when the key
// holds another type.
var permitReleaseScript = newScript(`
local ty = redis.call('TYPE', KEYS[1]).ok
if ty ~= 'none' and ty ~= 'zset' then return {-1} end
local out = {}
for i, m in ipairs(ARGV) do out[i] = redis.call('ZREM', KEYS[1], m) end
return out`)

// AcquirePermit takes one of limit permits of the semaphore key for token,
// for ttl (positive). It is granted when PermitQuorum(masters, limit)
// trusted masters admitted it and validity is left; otherwise the token is
// removed from every master where this call added it, also where it timed
// out (a token that was a member there before keeps its permit). Errors
// are those of Acquire: ErrHeld when enough masters are full that the
// quorum is out of reach (always for a limit below 1, once each master
// has pruned its expired permits), a *QuorumError when too few masters
// could vote; WRONGTYPE when a quorum of them hold the key as another
// type, as the library's script fails there. Its TTL stretches the
// restart guard.
func (c *Client) AcquirePermit(ctx context.Context, key, token string, limit int64, ttl time.Duration) (*Lock, error) {
	if ttl <= 0 {
		return nil, errors.New("redlock: a permit needs a positive TTL")
	}
	if err := c.CheckTTL(ttl); err != nil {
		return nil, err
	}
	// A limit below 1 admits no one, but each master still prunes its
	// expired permits, as the library's script does.
	q := c.permitQuorum(limit)
	for attempt := 0; ; attempt++ {
		l, err := c.acquirePermitOnce(ctx, key, token, limit, ttl, q)
		if !errors.Is(err, ErrSplitVote) && !errors.Is(err, ErrValiditySpent) || attempt >= c.opts.retries {
			return l, err
		}
		if err := sleep(ctx, c.retryDelay()); err != nil {
			return nil, errors.Join(err, ErrNotAcquired)
		}
	}
}

func (c *Client) acquirePermitOnce(ctx context.Context, key, token string, limit int64, ttl time.Duration, q int) (*Lock, error) {
	if ok := c.votersAvailable([]string{key}); ok < q {
		return nil, c.quorumErr(ok, q, []string{key})
	}
	c.WaitWrites(ctx, key)
	keys := []string{key}
	c.flights.begin(keys, len(c.nodes))
	run := newAcquireRun(c, keys, ttl, token, func(_ *node, v int64, err error) (*call, bool) {
		// Take back what this call added, also where it timed out (it
		// may still land); a token that was a member keeps its permit.
		if err != nil && !isReplyError(err) || err == nil && v == 1 {
			return &call{script: permitReleaseScript, keys: keys, args: []any{token}}, true
		}
		return nil, false
	})
	note := c.noteTTL(keys, ttl, true, q)
	start := time.Now()
	ch := fanoutScript(c, permitAcquireScript, keys, []any{token, limit, ttl.Milliseconds()}, parseInt, run.onVote)
	refused := 0
	t, got := countVotesOf(c, q, ch, run.taint, decidedOrLost, func(v int64) vote {
		if v > 0 {
			return voteYes
		}
		refused++ // full
		return voteNo
	})
	elapsed := time.Since(start)
	note.settle(refusedBy(got, func(v int64) bool { return v > 0 }))
	var l *Lock
	// Full on enough masters that q admissions are out of reach: held.
	v, err := c.acquireOutcome(&t, refused > len(c.nodes)-q, ttl, elapsed)
	if err == nil {
		l = &Lock{Key: key, Keys: keys, Value: token, TTL: ttl, Validity: v, Votes: t.yes}
	}
	// Undo what the masters that answered took; late and failed ones undo
	// their part when they answer, in the background.
	run.decide(err != nil)
	return l, err
}

// ExtendPermit renews token's permit of the semaphore key, of limit
// permits, to ttl from now on every master where it holds one. ok reports
// that PermitQuorum(masters, limit) trusted masters renewed it and
// validity is left; the permit was not held when that is out of reach even
// counting every master whose answer is unknown; otherwise the answer is a
// *QuorumError. Its TTL stretches the restart guard.
func (c *Client) ExtendPermit(ctx context.Context, key, token string, limit int64, ttl time.Duration) (r ExtendResult, ok bool, err error) {
	return c.extendQuorum(ctx, c.permitQuorum(limit), key, ttl, permitRefreshScript, token, strconv.FormatInt(ttl.Milliseconds(), 10))
}

// ReleasePermit removes each of tokens from the semaphore key on every
// master, and reports how many of them the client's quorum held: a
// release carries no limit, so the semaphore's own quorum is not known,
// and the set is read as any key is, a member being present when a quorum
// holds it. It returns as soon as that is decided for every token (the
// other masters still get the removal); when it cannot be decided for one,
// the answer is a *QuorumError. ErrWrongType when a quorum of masters hold
// the key as another type.
func (c *Client) ReleasePermit(ctx context.Context, key string, tokens ...string) (int, error) {
	if len(tokens) == 0 {
		return 0, errors.New("redlock: no tokens")
	}
	c.WaitWrites(ctx, key)
	keys := []string{key}
	args := make([]any, len(tokens))
	for i, tok := range tokens {
		args[i] = tok
	}
	taint := "" // a rollback of the token may still land there: its "removed" does not count
	if len(tokens) == 1 {
		taint = taintKey(keys, tokens[0])
	}
	wrong := 0
	ch := fanoutScript(c, permitReleaseScript, keys, args, (*redis.Cmd).Int64Slice, nil)
	perToken := countVotesEach(c, ch, len(tokens), taint, func(v []int64, i int) vote {
		if i == 0 && len(v) == 1 && v[0] == -1 {
			wrong++
		}
		if i < len(v) && v[i] == 1 {
			return voteYes
		}
		return voteNo
	})
	if wrong >= c.quorum {
		return 0, ErrWrongType
	}
	removed := 0
	for _, t := range perToken {
		switch {
		case t.won():
			removed++
		case !t.lost():
			return removed, t.err()
		}
	}
	return removed, nil
}
