package engine

// The per-master halves of the fenced lock operations (fence.go). Each
// takes KEYS = {lock key, counter key, state key} (FenceKeys); the lock key
// holds the token as a plain string, so GET and the ordinary unlock scripts
// see a fenced lock as any other lock.

// fenceAcquireScript takes KEYS[1] for the token ARGV[1] with TTL ARGV[2] ms.
// ARGV[3] is "1" for a reentrant acquire, "2" for a reentry only (a free
// key is not taken: {0, counter, "", -2}), ARGV[4] identifies this attempt
// (fenceUndoScript undoes exactly it).
//
// Free key: SET it, INCR the counter (never expires), start the state hash
// {token, fence, holds = 1, attempt, kind = "new"}: {1, counter, 1}. The
// state counts only while its token is the lock's: a lock released by other
// means (the plain unlock script) leaves a stale state behind until its TTL.
// Held by the same token and reentrant: one more hold, the TTL of lock and
// state raised to at least ARGV[2]: {2, the grant's fence, holds, counter}.
// A lock taken by other means (SET NX) has no fence yet: it takes the next
// counter value, and its fence is reported as 0.
// Otherwise: {0, counter, holder, holder's PTTL}.
var fenceAcquireScript = newScript(`
local v = redis.call('GET', KEYS[1])
local c = tonumber(redis.call('GET', KEYS[2]) or '0')
if c == nil then return redis.error_reply('ERR redlock-proxy: the fencing counter of this key is not a number') end
local ttl = tonumber(ARGV[2])
if v == false and ARGV[3] == '2' then return {0, c, '', -2} end
if v == false then
  c = c + 1
  redis.call('SET', KEYS[2], c)
  redis.call('SET', KEYS[1], ARGV[1], 'PX', ttl)
  redis.call('DEL', KEYS[3])
  redis.call('HSET', KEYS[3], 'token', ARGV[1], 'fence', c, 'holds', 1, 'attempt', ARGV[4], 'kind', 'new')
  redis.call('PEXPIRE', KEYS[3], ttl)
  return {1, c, 1}
end
if v == ARGV[1] and (ARGV[3] == '1' or ARGV[3] == '2') then
  if redis.call('HGET', KEYS[3], 'token') ~= v then redis.call('DEL', KEYS[3]) end
  local h = tonumber(redis.call('HGET', KEYS[3], 'holds') or '1') + 1
  local f = tonumber(redis.call('HGET', KEYS[3], 'fence') or '0')
  local nf = f
  if f == 0 then
    c = c + 1
    redis.call('SET', KEYS[2], c)
    nf = c
  end
  local left = redis.call('PTTL', KEYS[1])
  if left >= 0 and left < ttl then redis.call('PEXPIRE', KEYS[1], ttl) else ttl = left end
  redis.call('HSET', KEYS[3], 'token', v, 'fence', nf, 'holds', h, 'attempt', ARGV[4], 'kind', 'reentry')
  if ttl > 0 then redis.call('PEXPIRE', KEYS[3], ttl) end
  return {2, f, h, c}
end
return {0, c, v, redis.call('PTTL', KEYS[1])}`)

// fenceCommitScript raises the counter to the granted number ARGV[2] (it
// never lowers it) and, where KEYS[1] still holds the token ARGV[1], records
// the number in the state hash: 1; else 0. Raising the counter everywhere
// lets a master that lost it catch up.
var fenceCommitScript = newScript(`
local f = tonumber(ARGV[2])
if (tonumber(redis.call('GET', KEYS[2]) or '0') or 0) < f then redis.call('SET', KEYS[2], f) end
if redis.call('GET', KEYS[1]) ~= ARGV[1] or redis.call('HGET', KEYS[3], 'token') ~= ARGV[1] then return 0 end
if tonumber(redis.call('HGET', KEYS[3], 'fence') or '0') < f then redis.call('HSET', KEYS[3], 'fence', f) end
return 1`)

// fenceUndoScript undoes the acquire attempt ARGV[2] of token ARGV[1], and
// nothing else: a fresh lock is deleted, a reentry gives its hold back.
// A later attempt of the same token is never undone by a late rollback of
// an earlier one. Answers 1 undone, 0 nothing to undo. (An empty ARGV[2]
// undoes whatever attempt of the token is there: tests only.)
var fenceUndoScript = newScript(`
if redis.call('GET', KEYS[1]) ~= ARGV[1] then return 0 end
if ARGV[2] ~= '' and redis.call('HGET', KEYS[3], 'attempt') ~= ARGV[2] then return 0 end
if redis.call('HGET', KEYS[3], 'kind') == 'new' then
  redis.call('DEL', KEYS[1], KEYS[3])
  return 1
end
redis.call('HINCRBY', KEYS[3], 'holds', -1)
redis.call('HDEL', KEYS[3], 'attempt')
return 1`)

// fenceReleaseScript gives back one hold of token ARGV[1], or all of them
// when ARGV[2] is "all"; the last one deletes the lock: 1 deleted, 2 still
// held (holds left), 0 held by another token, -1 absent.
var fenceReleaseScript = newScript(`
local v = redis.call('GET', KEYS[1])
if v == false then return -1 end
if v ~= ARGV[1] then return 0 end
local h = 0
if redis.call('HGET', KEYS[3], 'token') == v then h = tonumber(redis.call('HGET', KEYS[3], 'holds') or '1') - 1 end
if h <= 0 or ARGV[2] == 'all' then
  redis.call('DEL', KEYS[1], KEYS[3])
  return 1
end
redis.call('HSET', KEYS[3], 'holds', h)
redis.call('HDEL', KEYS[3], 'attempt')
return 2`)

// fenceExtendScript sets the TTL of lock and state to ARGV[2] ms where
// KEYS[1] holds ARGV[1]: 1; 0 held by another token; -1 absent.
var fenceExtendScript = newScript(`
local v = redis.call('GET', KEYS[1])
if v == false then return -1 end
if v ~= ARGV[1] then return 0 end
redis.call('PEXPIRE', KEYS[1], ARGV[2])
if redis.call('HGET', KEYS[3], 'token') == v then redis.call('PEXPIRE', KEYS[3], ARGV[2]) end
return 1`)

// fenceInfoScript answers {token or nil, PTTL, counter or nil, fence or
// nil, holds or nil}; fence and holds only from a state of the token.
var fenceInfoScript = newReadScript(`
local v = redis.call('GET', KEYS[1])
local f, h = false, false
if v and redis.call('HGET', KEYS[3], 'token') == v then
  f, h = redis.call('HGET', KEYS[3], 'fence'), redis.call('HGET', KEYS[3], 'holds')
end
return {v, redis.call('PTTL', KEYS[1]), redis.call('GET', KEYS[2]), f, h}`)
