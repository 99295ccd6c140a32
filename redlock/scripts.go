package redlock

import "github.com/redis/go-redis/v9"

// The per-master halves of the quorum operations. Each answers a small code
// the quorum logic counts; what a client sees is decided above them.

// releaseScript deletes KEYS[1] if it holds ARGV[1]: 1 deleted, 0 held by
// another value, -1 absent.
var releaseScript = redis.NewScript(`
local v = redis.call('GET', KEYS[1])
if v == false then return -1 end
if v ~= ARGV[1] then return 0 end
redis.call('DEL', KEYS[1])
return 1`)

// extendScript renews KEYS[1] if it holds ARGV[1]. ARGV[2] is a TTL in ms
// (0: no expiry). ARGV[3] is the mode: "set" makes the TTL ARGV[2], "add"
// adds ARGV[2] to the remaining TTL, "claim" also takes the key when it is
// absent. Answers 1 renewed, 0 held by another value, -1 absent, -2 no TTL
// to add to.
var extendScript = redis.NewScript(`
local v = redis.call('GET', KEYS[1])
local ttl = tonumber(ARGV[2])
if v == false then
  if ARGV[3] ~= 'claim' then return -1 end
  if ttl > 0 then redis.call('SET', KEYS[1], ARGV[1], 'PX', ttl) else redis.call('SET', KEYS[1], ARGV[1]) end
  return 1
end
if v ~= ARGV[1] then return 0 end
if ARGV[3] == 'add' then
  local left = redis.call('PTTL', KEYS[1])
  if left < 0 then return -2 end
  ttl = ttl + left
end
if ttl > 0 then redis.call('PEXPIRE', KEYS[1], ttl) else redis.call('PERSIST', KEYS[1]) end
return 1`)

// readScript answers the value and the PTTL of KEYS[1] in one step.
var readScript = redis.NewScript(`return {redis.call('GET', KEYS[1]), redis.call('PTTL', KEYS[1])}`)
