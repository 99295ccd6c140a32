package engine

import (
	"context"
	"errors"
	"strconv"
	"time"
)

// Read/write locks in the sorted-set format of Symfony Lock's RedisStore
// (5.2 and later): the key is a sorted set whose members are the holders'
// tokens, each scored by its expiry in ms on the master's clock, plus a
// "__write__" member while the one holder is a writer; the key itself
// expires with its latest member. Each master decides as the library's own
// script would; the quorum decides as for any other lock, and a lock that is
// not granted is taken back from every master that took it.

// rwAcquireScript takes KEYS[1] for token ARGV[1] for ARGV[2] ms, exclusively
// when ARGV[3] is "w", shared when "r". Answers 1 taken, 2 taken by a token
// that already held it (renewed or demoted), 3 a reader promoted to writer,
// 0 refused (a plain string lock too, as the library refuses it); the
// error WRONGTYPE when the key holds another type, as the library's script
// fails there.
var rwAcquireScript = newScript(rwTypeCheck + `
local key, token, ttl = KEYS[1], ARGV[1], tonumber(ARGV[2])
if ty == 'string' then return 0 end
local t = redis.call('TIME')
local now = t[1] * 1000 + math.floor(t[2] / 1000)
redis.call('ZREMRANGEBYSCORE', key, '-inf', now)
local mine = redis.call('ZSCORE', key, token)
local promoted = false
if ARGV[3] == 'w' then
  if mine then
    if not redis.call('ZSCORE', key, '__write__') then
      if redis.call('ZCARD', key) > 1 then return 0 end
      promoted = true
    end
  elseif redis.call('ZCARD', key) > 0 then return 0 end
  redis.call('ZADD', key, now + ttl, token)
  redis.call('ZADD', key, now + ttl, '__write__')
else
  if not mine and redis.call('ZSCORE', key, '__write__') then return 0 end
  redis.call('ZADD', key, now + ttl, token)
  redis.call('ZREM', key, '__write__')
end
redis.call('PEXPIREAT', key, redis.call('ZREVRANGE', key, 0, 0, 'WITHSCORES')[2])
if promoted then return 3 end
if mine then return 2 end
return 1`)

// rwTypeCheck begins the per-master read/write lock scripts: ty is the
// type of KEYS[1]; a type other than a sorted set or a string (the lock of
// Symfony before 5.2, which the library's scripts refuse) fails with
// WRONGTYPE, as the library's scripts do.
const rwTypeCheck = `
local ty = redis.call('TYPE', KEYS[1]).ok
if ty ~= 'none' and ty ~= 'zset' and ty ~= 'string' then
  return redis.error_reply('WRONGTYPE Operation against a key holding the wrong kind of value')
end`

// rwDemoteScript undoes a promotion: token ARGV[1], the writer of KEYS[1],
// becomes a reader again.
var rwDemoteScript = newScript(`
if redis.call('ZSCORE', KEYS[1], ARGV[1]) then redis.call('ZREM', KEYS[1], '__write__') end
return 1`)

// rwExtendScript sets the expiry of token ARGV[1] in KEYS[1] (and of the
// write marker, if any) to ARGV[2] ms from now. Answers 1 renewed, 0 not
// held by the token, -1 absent.
var rwExtendScript = newScript(rwTypeCheck + `
local key, token, ttl = KEYS[1], ARGV[1], tonumber(ARGV[2])
if ty == 'none' then return -1 end
if ty ~= 'zset' or not redis.call('ZSCORE', key, token) then return 0 end
local t = redis.call('TIME')
local now = t[1] * 1000 + math.floor(t[2] / 1000)
redis.call('ZADD', key, now + ttl, token)
if redis.call('ZSCORE', key, '__write__') then redis.call('ZADD', key, now + ttl, '__write__') end
redis.call('PEXPIREAT', key, redis.call('ZREVRANGE', key, 0, 0, 'WITHSCORES')[2])
return 1`)

// rwReleaseScript removes token ARGV[1] from KEYS[1], and the write marker
// with it. Answers 1 removed, 0 not held by the token, -1 absent.
var rwReleaseScript = newScript(rwTypeCheck + `
local key, token = KEYS[1], ARGV[1]
if ty == 'none' then return -1 end
if ty ~= 'zset' or not redis.call('ZSCORE', key, token) then return 0 end
redis.call('ZREM', key, token)
redis.call('ZREM', key, '__write__')
local m = redis.call('ZREVRANGE', key, 0, 0, 'WITHSCORES')[2]
if m then redis.call('PEXPIREAT', key, m) end
return 1`)

// rwHeldScript answers 1 when token ARGV[1] holds KEYS[1] unexpired, else 0.
var rwHeldScript = newReadScript(rwTypeCheck + `
local key, token = KEYS[1], ARGV[1]
if ty ~= 'zset' then return 0 end
local t = redis.call('TIME')
redis.call('ZREMRANGEBYSCORE', key, '-inf', t[1] * 1000 + math.floor(t[2] / 1000))
if redis.call('ZSCORE', key, token) then return 1 end
return 0`)

// AcquireRW takes the read/write lock key for token with the given ttl
// (positive), exclusively (a writer: no other holder) or shared (a reader:
// no writer), on a quorum of masters. Errors are those of Acquire.
func (c *Client) AcquireRW(ctx context.Context, key, token string, ttl time.Duration, shared bool) (*Lock, error) {
	if ttl <= 0 {
		return nil, errors.New("redlock: a read/write lock needs a positive TTL")
	}
	if err := c.CheckTTL(ttl); err != nil {
		return nil, err
	}
	for attempt := 0; ; attempt++ {
		l, err := c.acquireRWOnce(ctx, key, token, ttl, shared)
		if !errors.Is(err, ErrSplitVote) && !errors.Is(err, ErrValiditySpent) || attempt >= c.opts.retries {
			return l, err
		}
		if err := sleep(ctx, c.retryDelay()); err != nil {
			return nil, errors.Join(err, ErrNotAcquired)
		}
	}
}

func (c *Client) acquireRWOnce(ctx context.Context, key, token string, ttl time.Duration, shared bool) (*Lock, error) {
	if ok := c.votersAvailable([]string{key}); ok < c.quorum {
		return nil, c.quorumErr(ok, c.quorum, []string{key})
	}
	c.WaitWrites(ctx, key)
	keys, mode := []string{key}, "w"
	if shared {
		mode = "r"
	}
	c.flights.begin(keys, len(c.nodes))
	run := newAcquireRun(c, keys, ttl, token, func(_ *node, v int64, err error) (*call, bool) {
		// Take back what this call added, also where it timed out (it may
		// still land). A token that held the key before keeps it, as a
		// reader again if this call promoted it.
		switch {
		case err == nil && v == 3:
			return &call{script: rwDemoteScript, keys: keys, args: []any{token}}, false
		case err != nil && !isReplyError(err) || err == nil && v == 1:
			return &call{script: rwReleaseScript, keys: keys, args: []any{token}}, true
		}
		return nil, false
	})
	args := []any{token, ttl.Milliseconds(), mode}
	note := c.noteTTL(keys, ttl, true, 0)
	start := time.Now()
	ch := fanoutScript(c, rwAcquireScript, keys, args, parseInt, run.onVote)
	refused := 0
	t, got := countVotes(c, ch, run.taint, decidedOrLost, func(v int64) vote {
		if v > 0 {
			return voteYes
		}
		refused++
		return voteNo
	})
	elapsed := time.Since(start)
	note.settle(refusedBy(got, func(v int64) bool { return v > 0 }))
	var l *Lock
	v, err := c.acquireOutcome(&t, refused >= c.quorum, ttl, elapsed)
	if err == nil {
		l = &Lock{Key: key, Keys: keys, Value: token, TTL: ttl, Validity: v, Votes: t.yes}
	}
	// Undo what the masters that answered took; late and failed ones undo
	// their part when they answer, in the background.
	run.decide(err != nil)
	return l, err
}

// ExtendRW sets the expiry of token's hold on the read/write lock key to ttl
// from now on every master where it holds it. ok reports that a quorum of
// trusted masters renewed it and validity is left.
func (c *Client) ExtendRW(ctx context.Context, key, token string, ttl time.Duration) (r ExtendResult, ok bool, err error) {
	return c.extendWith(ctx, key, ttl, rwExtendScript, token, strconv.FormatInt(ttl.Milliseconds(), 10))
}

// ReleaseRW removes token from the read/write lock key on every master. It
// returns as soon as the answer is decided; the other masters still get the
// removal. Released(quorum) on the result says whether the token held it.
func (c *Client) ReleaseRW(ctx context.Context, key, token string) (ReleaseResult, error) {
	return c.releaseWith(ctx, key, rwReleaseScript, token)
}

// HeldRW reports whether token holds the read/write lock key, unexpired, on
// a quorum of masters. It decides as Release does: "not held" only when a
// quorum is out of reach even counting every master whose answer is
// unknown; otherwise, undecided, it answers a *QuorumError.
func (c *Client) HeldRW(ctx context.Context, key, token string) (bool, error) {
	keys, args := []string{key}, []any{token}
	ch := fanoutScript(c, rwHeldScript, keys, args, parseInt, nil)
	t, _ := countVotes(c, ch, taintKey(keys, token), (*votes).decided, yesIfOne)
	if !t.decided() {
		return false, t.err()
	}
	return t.won(), nil
}
