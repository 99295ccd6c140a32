package redistest

// Lock scripts as their libraries send them, for tests that drive the
// proxy with them.

// RedisPyExtend is redis-py's Lock.extend script (redis-py 4 and later):
// ARGV[3] "0" adds ARGV[2] ms to what is left of the lock, "1" replaces it.
const RedisPyExtend = `
        local token = redis.call('get', KEYS[1])
        if not token or token ~= ARGV[1] then
            return 0
        end
        local expiration = redis.call('pttl', KEYS[1])
        if not expiration then
            expiration = 0
        end
        if expiration < 0 then
            return 0
        end

        local newttl = ARGV[2]
        if ARGV[3] == "0" then
            newttl = ARGV[2] + expiration
        end
        redis.call('pexpire', KEYS[1], newttl)
        return 1
    `

// bsm/redislock v0.10.0's four scripts, the exact bytes of the files the
// library embeds and sends (no final newline; some lines end in spaces).
// compat/bsmredislock checks them against the library's own.
const (
	// BsmObtain is obtain.lua: KEYS the lock's keys; ARGV[1] the value (token and metadata),
	// ARGV[2] the token's length, ARGV[3] the TTL in ms.
	BsmObtain = "-- obtain.lua: arguments => [value, tokenLen, ttl]\n" +
		"-- Obtain.lua try to set provided keys's with value and ttl if they do not exists.\n" +
		"-- Keys can be overriden if they already exists and the correct value+tokenLen is provided. \n" +
		"\n" +
		"local function pexpire(ttl)\n" +
		"\t-- Update keys ttls.\n" +
		"\tfor _, key in ipairs(KEYS) do\n" +
		"\t\tredis.call(\"pexpire\", key, ttl)\n" +
		"\tend\n" +
		"end\n" +
		"\n" +
		"-- canOverrideLock check either or not the provided token match\n" +
		"-- previously set lock's tokens.\n" +
		"local function canOverrideKeys() \n" +
		"\tlocal offset = tonumber(ARGV[2])\n" +
		"\n" +
		"\tfor _, key in ipairs(KEYS) do\n" +
		"\t\tif redis.call(\"getrange\", key, 0, offset-1) ~= string.sub(ARGV[1], 1, offset) then\n" +
		"\t\t\treturn false\n" +
		"\t\tend\n" +
		"\tend\n" +
		"\treturn true\n" +
		"end\n" +
		"\n" +
		"-- Prepare mset arguments.\n" +
		"local setArgs = {}\n" +
		"for _, key in ipairs(KEYS) do\n" +
		"\ttable.insert(setArgs, key)\n" +
		"\ttable.insert(setArgs, ARGV[1])\n" +
		"end\n" +
		"\n" +
		"if redis.call(\"msetnx\", unpack(setArgs)) ~= 1 then\n" +
		"\tif canOverrideKeys() == false then\n" +
		"\t\treturn false\n" +
		"\tend\n" +
		"\tredis.call(\"mset\", unpack(setArgs))\n" +
		"end\n" +
		"\n" +
		"pexpire(ARGV[3])\n" +
		"return redis.status_reply(\"OK\")"

	// BsmRelease is release.lua: ARGV[1] the value.
	BsmRelease = "-- release.lua: => Arguments: [value]\n" +
		"-- Release.lua deletes provided keys if all their values match the input. \n" +
		"\n" +
		"-- Check all keys values matches provided input.\n" +
		"local values = redis.call(\"mget\", unpack(KEYS))\n" +
		"for i, _ in ipairs(KEYS) do\n" +
		"\tif values[i] ~= ARGV[1] then\n" +
		"\t\treturn false\n" +
		"\tend\n" +
		"end\n" +
		"\n" +
		"-- Delete keys.\n" +
		"redis.call(\"del\", unpack(KEYS))\n" +
		"\n" +
		"return redis.status_reply(\"OK\")"

	// BsmRefresh is refresh.lua: ARGV[1] the value, ARGV[2] the TTL in ms.
	BsmRefresh = "-- refresh.lua: => Arguments: [value, ttl]\n" +
		"-- refresh.lua refreshes provided keys's ttls if all their values match the input. \n" +
		"\n" +
		"-- Check all keys values matches provided input.\n" +
		"local values = redis.call(\"mget\", unpack(KEYS))\n" +
		"for i, _ in ipairs(KEYS) do\n" +
		"\tif values[i] ~= ARGV[1] then\n" +
		"\t\treturn false\n" +
		"\tend\n" +
		"end\n" +
		"\n" +
		"-- Update keys ttls.\n" +
		"for _, key in ipairs(KEYS) do\n" +
		"\tredis.call(\"pexpire\", key, ARGV[2]) \n" +
		"end\n" +
		"\n" +
		"return redis.status_reply(\"OK\")"

	// BsmPTTL is pttl.lua: ARGV[1] the value.
	BsmPTTL = "-- pttl.lua: => Arguments: [value]\n" +
		"-- pttl.lua returns provided keys's ttls if all their values match the input. \n" +
		"\n" +
		"-- Check all keys values matches provided input.\n" +
		"local values = redis.call(\"mget\", unpack(KEYS))\n" +
		"for i, _ in ipairs(KEYS) do\n" +
		"\tif values[i] ~= ARGV[1] then\n" +
		"\t\treturn false\n" +
		"\tend\n" +
		"end\n" +
		"\n" +
		"-- Find and return shortest TTL among keys.\n" +
		"local minTTL = 0\n" +
		"for _, key in ipairs(KEYS) do\n" +
		"\tlocal ttl = redis.call(\"pttl\", key)\n" +
		"\t-- Note: ttl < 0 probably means the key no longer exists.\n" +
		"\tif ttl > 0 and (minTTL == 0 or ttl < minTTL) then\n" +
		"\t\tminTTL = ttl\n" +
		"\tend\n" +
		"end\n" +
		"return minTTL"
)
