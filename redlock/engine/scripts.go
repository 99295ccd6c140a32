package engine

// The per-master halves of the quorum operations. Each answers a small code
// the quorum logic counts; what a client sees is decided above them.

// releaseScript deletes KEYS[1] if it holds ARGV[1]: 1 deleted, 0 held by
// another value, -1 absent.
var releaseScript = newScript(`
local v = redis.call('GET', KEYS[1])
if v == false then return -1 end
if v ~= ARGV[1] then return 0 end
redis.call('DEL', KEYS[1])
return 1`)

// extendScript renews KEYS[1] if it holds ARGV[1]. ARGV[2] is a TTL in ms;
// ARGV[3] is the mode (see ExtendMode): "set" applies PEXPIRE ARGV[2] as
// Redis does (a TTL of 0 or less deletes the key), "setttl" does so only if
// the key has a TTL, "claim" also takes an absent key, "persist0" persists
// the key when ARGV[2] <= 0. ("add" is a read and a "setttl": extendAdd.)
// Answers 1 renewed, 0 held by another value, -1 absent, -2 no TTL.
var extendScript = newScript(`
local v = redis.call('GET', KEYS[1])
local ttl = tonumber(ARGV[2])
local mode = ARGV[3]
if v == false then
  if mode ~= 'claim' then return -1 end
  redis.call('SET', KEYS[1], ARGV[1], 'PX', ttl)
  return 1
end
if v ~= ARGV[1] then return 0 end
if mode == 'setttl' and redis.call('PTTL', KEYS[1]) < 0 then return -2 end
if mode == 'persist0' and ttl <= 0 then
  redis.call('PERSIST', KEYS[1])
else
  redis.call('PEXPIRE', KEYS[1], ttl)
end
return 1`)

// readScript answers the value and the PTTL of KEYS[1] in one step; for a
// value longer than ARGV[1] bytes, its length in place of the value, so
// that a long value written on a master directly does not travel on the
// shared pipeline (Read fetches it on connections of its own, if at all,
// with GET: a script would copy it into Lua and back, blocking the master).
// STRLEN fails on a key of another type as GET does.
var readScript = newReadScript(`
local n = redis.call('STRLEN', KEYS[1])
if n > tonumber(ARGV[1]) then return {n, redis.call('PTTL', KEYS[1])} end
return {redis.call('GET', KEYS[1]), redis.call('PTTL', KEYS[1])}`)

// acquireAllScript takes every key in KEYS for ARGV[1] with TTL ARGV[2] ms
// (0: none) when none of them exists: {1}; else {0, value of a taken key}.
var acquireAllScript = newScript(`
for _, k in ipairs(KEYS) do
  local v = redis.call('GET', k)
  if v then return {0, v} end
end
local ttl = tonumber(ARGV[2])
for _, k in ipairs(KEYS) do
  if ttl > 0 then redis.call('SET', k, ARGV[1], 'PX', ttl) else redis.call('SET', k, ARGV[1]) end
end
return {1}`)

// releaseAllScript deletes each key in KEYS that holds ARGV[1] and answers,
// per key, 1 deleted, 0 held by another value, -1 absent.
var releaseAllScript = newScript(`
local out = {}
for i, k in ipairs(KEYS) do
  local v = redis.call('GET', k)
  if v == false then out[i] = -1
  elseif v == ARGV[1] then redis.call('DEL', k) out[i] = 1
  else out[i] = 0 end
end
return out`)

// allHoldToken begins the scripts that act on every key in KEYS only when
// all of them hold ARGV[1]: it returns 0 when a key holds another value,
// -1 when the keys that do not hold it are absent.
const allHoldToken = `
local absent = false
for _, k in ipairs(KEYS) do
  local v = redis.call('GET', k)
  if v == false then absent = true
  elseif v ~= ARGV[1] then return 0 end
end
if absent then return -1 end
`

// releaseEveryScript deletes every key in KEYS when all of them hold
// ARGV[1]: 1; else 0 or -1 (allHoldToken).
var releaseEveryScript = newScript(allHoldToken + `redis.call('DEL', unpack(KEYS))
return 1`)

// extendAllScript sets the TTL of every key in KEYS to ARGV[2] ms when all
// of them hold ARGV[1]: 1; else 0 or -1 (allHoldToken).
var extendAllScript = newScript(allHoldToken + `for _, k in ipairs(KEYS) do redis.call('PEXPIRE', k, ARGV[2]) end
return 1`)

// reacquireScript sets every key in KEYS to ARGV[1], with a TTL of ARGV[2]
// ms (0: none), when each of them holds a value of the same holder
// (engine.Holder): with ARGV[4] 'exact', ARGV[3] itself; 'prefix', a value
// that starts with ARGV[3]; 'range', as bsm/redislock's obtain compares
// them, GETRANGE k 0 n-1 equal to string.sub(ARGV[3], 1, n), n in ARGV[5]
// (an absent key's range is empty). Answers 1 set; else 0 when a key holds
// another value, -1 when the keys that are not the holder's are absent.
var reacquireScript = newScript(`
local p, mode, absent = ARGV[3], ARGV[4], false
local n = tonumber(ARGV[5])
for _, k in ipairs(KEYS) do
  if mode == 'range' then
    if redis.call('GETRANGE', k, 0, n - 1) ~= string.sub(p, 1, n) then return 0 end
  else
    local v = redis.call('GET', k)
    if v == false then absent = true
    elseif (mode == 'exact' and v ~= p) or (mode == 'prefix' and string.sub(v, 1, #p) ~= p) then return 0 end
  end
end
if absent then return -1 end
local ttl = tonumber(ARGV[2])
for _, k in ipairs(KEYS) do
  if ttl > 0 then redis.call('SET', k, ARGV[1], 'PX', ttl) else redis.call('SET', k, ARGV[1]) end
end
return 1`)

// valueScript runs ARGV[2] on KEYS[1] with the rest of ARGV: a command
// whose reply is the key's value (GETDEL, GETEX, SET … GET), unless that
// value is longer than ARGV[1] bytes; then it changes nothing and answers
// the error VALUETOOLONG and the length. With pcall, the command's own
// errors come back as Redis gives them (STRLEN fails on a key of another
// type, and so does the command).
var valueScript = newScript(`
local n = redis.pcall('STRLEN', KEYS[1])
if type(n) == 'number' and n > tonumber(ARGV[1]) then return redis.error_reply('VALUETOOLONG ' .. n) end
return redis.pcall(ARGV[2], KEYS[1], unpack(ARGV, 3))`)
