package scripteq

// The built-in lock scripts (proxy/lockscripts/builtin.toml), each with the
// exact texts its libraries send (testdata/scripts.json) and how its KEYS
// and ARGV are laid out.

// argKind is what an ARGV position holds.
type argKind int

const (
	aToken     argKind = iota // the lock's token
	aValue                    // bsm/redislock's value: the token and metadata
	aTTLms                    // a TTL in ms
	aTTLs                     // a TTL in seconds
	aUnixMs                   // a Unix time in ms
	aUnixS                    // a Unix time in seconds
	aPrefixLen                // bsm/redislock's token length
	aAddFlag                  // redis-py extend's "0" (add) or "1" (replace)
	aClockS                   // Symfony's clock: Unix seconds with a fraction
	aClockMs                  // redis-semaphore's clock: Unix ms
	aLimit                    // a semaphore's number of permits
	aDB                       // a database number the script SELECTs
	aHolder                   // Redisson's holder, "<client id>:<thread id>"
	aMsg                      // Redisson's unlock message
	aPubCmd                   // Redisson's publish command
	aLatchMs                  // Redisson's unlock latch TTL in ms
	aMinMs                    // redlock-universal's least TTL left, in ms
)

// keyShape is how a script's KEYS are laid out.
type keyShape int

const (
	kOne              keyShape = iota // the lock
	kMulti                            // any number of locks, all or none
	kLockChannel                      // the lock, then a channel
	kLockChannelLatch                 // the lock, a channel, a latch key (Redisson ≥ 3.24 unlock)
	kBatch                            // Redisson's batched renewal: locks, ARGV[i+1] the holder of KEYS[i]
)

// stateKind is the form a script's lock takes.
type stateKind int

const (
	sString stateKind = iota // a string holding the token
	sHash                    // Redisson: a hash of holder → holds
	sRW                      // Symfony: a sorted set of tokens scored by expiry, "__write__" for a writer
	sPermit                  // redis-semaphore: a sorted set of permits
)

type scriptDef struct {
	// name is the entry's name in builtin.toml; for a script declared in
	// [[scripts]], the file it is declared with.
	name     string
	texts    []string // testdata/scripts.json names of the texts sent
	keys     keyShape
	argv     []argKind
	state    stateKind
	ttlReply bool // the reply carries a TTL: integers compare within the tolerance
	// A script of the test's own, declared to the proxy in [[scripts]]
	// with decl: the ops and keys no built-in script uses.
	src, decl string
}

var catalog = []scriptDef{
	{name: "unlock", texts: []string{"antirez_redlock_rb.unlock", "bsm_redislock_v0.9.4.luaRelease", "laravel.releaseLock",
		"php_lock_2x.release", "php_lock_3x.release", "pottery.release", "redlock_net.unlock", "redlock_rb_gem.unlock_script",
		"redsync_v4.0-4.11.deleteScript", "ronnylt_redlock_php.release", "shedlock.delLuaScript", "yii2.release"},
		argv: []argKind{aToken}},
	{name: "redis-py release", texts: []string{"redispy.lua_release_script"}, argv: []argKind{aToken}},
	{name: "redsync delete", texts: []string{"redsync_v4.15+.deleteScript"}, argv: []argKind{aToken}},
	{name: "cheprasov release", texts: []string{"cheprasov.release"}, argv: []argKind{aToken}},
	{name: "extend", texts: []string{"bsm_redislock_v0.9.4.luaRefresh", "pottery.extend", "redsync_v4.15+.touchScript",
		"shedlock.updLuaScript", "symfony_le5.1.putOffExpiration"}, argv: []argKind{aToken, aTTLms}},
	{name: "cheprasov update", texts: []string{"cheprasov.update"}, argv: []argKind{aToken, aTTLms}},
	{name: "redis-py reacquire", texts: []string{"redispy.lua_reacquire_script"}, argv: []argKind{aToken, aTTLms}},
	{name: "redis-py extend", texts: []string{"redispy.lua_extend_script"}, argv: []argKind{aToken, aTTLms, aAddFlag}},
	{name: "redis-py extend (3.0-3.4)", texts: []string{"redispy.lua_extend_script_3.0-3.4"}, argv: []argKind{aToken, aTTLms}},
	{name: "redsync touch (set nx)", texts: []string{"redsync_v4.15+.touchWithSetNXScript"}, argv: []argKind{aToken, aTTLms}},
	{name: "RedLock.net extend", texts: []string{"redlock_net.extend"}, argv: []argKind{aToken, aTTLms}},
	{name: "Laravel refreshLock", texts: []string{"laravel.refreshLock"}, argv: []argKind{aToken, aTTLs}},
	{name: "Spring renew", texts: []string{"spring_int_ge6.4.renew"}, argv: []argKind{aToken, aTTLms}},
	{name: "python-redis-lock extend", texts: []string{"python_redis_lock.extend_script"}, argv: []argKind{aToken, aTTLs}},
	{name: "node-redlock acquire", texts: []string{"node_redlock_v4.2.lockScript", "node_redlock_v5.acquire_script"},
		keys: kMulti, argv: []argKind{aToken, aTTLms}},
	{name: "node-redlock 4.0 acquire", texts: []string{"node_redlock_4.0.0.lockScript"}, keys: kMulti, argv: []argKind{aToken, aTTLms}},
	{name: "node-redlock extend", texts: []string{"node_redlock_4.1.0.extendScript", "node_redlock_v4.2.extendScript", "node_redlock_v5.extend_script"},
		keys: kMulti, argv: []argKind{aToken, aTTLms}},
	{name: "node-redlock 4.0 extend", texts: []string{"node_redlock_4.0.0.extendScript"}, keys: kMulti, argv: []argKind{aToken, aTTLms}},
	{name: "node-redlock release", texts: []string{"node_redlock_4.0.0.unlockScript", "node_redlock_v4.2.unlockScript", "node_redlock_v5.release_script"},
		keys: kMulti, argv: []argKind{aToken}},
	{name: "sesamecare redlock acquire", texts: []string{"sesamecare_redlock_1.4.acquire"}, keys: kMulti, argv: []argKind{aDB, aToken, aTTLms}},
	{name: "sesamecare redlock extend", texts: []string{"sesamecare_redlock_1.4.extend"}, keys: kMulti, argv: []argKind{aDB, aToken, aTTLms}},
	{name: "sesamecare redlock release", texts: []string{"sesamecare_redlock_1.4.release"}, keys: kMulti, argv: []argKind{aDB, aToken}},
	{name: "redis-semaphore release", texts: []string{"redis_semaphore_5.8.mutex_release"}, argv: []argKind{aToken}},
	{name: "redis-semaphore refresh", texts: []string{"redis_semaphore_5.8.mutex_refresh"}, argv: []argKind{aToken, aTTLms}},
	{name: "rueidislock acquire", texts: []string{"rueidislock_1.0.79.acqms"}, argv: []argKind{aToken, aTTLms}},
	{name: "rueidislock acquire (PXAT)", texts: []string{"rueidislock_1.0.79.acqat"}, argv: []argKind{aToken, aUnixMs}},
	{name: "rueidislock extend", texts: []string{"rueidislock_1.0.79.extend"}, argv: []argKind{aToken, aUnixMs}},
	{name: "rueidislock release", texts: []string{"rueidislock_1.0.79.delkey"}, argv: []argKind{aToken}},
	{name: "redlock-universal atomic extend", texts: []string{"redlock_universal_0.8.atomic_extend"}, argv: []argKind{aToken, aMinMs, aTTLms}, ttlReply: true},
	{name: "redlock-universal inspect", texts: []string{"redlock_universal_0.8.inspect"}, ttlReply: true},
	{name: "simple-redis-mutex release", texts: []string{"simple_redis_mutex_3.release"}, keys: kLockChannel, argv: []argKind{aToken}},
	{name: "node-redlock 3 acquire", texts: []string{"node_redlock_v3.lockScript"}, argv: []argKind{aToken, aTTLms}},
	{name: "Laravel add", texts: []string{"laravel.add"}, argv: []argKind{aToken, aTTLs}},
	{name: "bsm/redislock obtain", texts: []string{"bsm_redislock_v0.9.4.luaObtain"}, argv: []argKind{aValue, aPrefixLen, aTTLms}},
	{name: "go-zero acquire", texts: []string{"go_zero_1.10.lockscript"}, argv: []argKind{aToken, aTTLms}},
	{name: "bsm/redislock pttl", texts: []string{"bsm_redislock_v0.9.4.luaPTTL"}, argv: []argKind{aToken}, ttlReply: true},
	{name: "bsm/redislock 0.10 obtain", texts: []string{"bsm_redislock_v0.10.obtain"}, keys: kMulti, argv: []argKind{aValue, aPrefixLen, aTTLms}},
	{name: "bsm/redislock 0.10 release", texts: []string{"bsm_redislock_v0.10.release"}, keys: kMulti, argv: []argKind{aToken}},
	{name: "bsm/redislock 0.10 refresh", texts: []string{"bsm_redislock_v0.10.refresh"}, keys: kMulti, argv: []argKind{aToken, aTTLms}},
	{name: "bsm/redislock 0.10 pttl", texts: []string{"bsm_redislock_v0.10.pttl"}, keys: kMulti, argv: []argKind{aToken}, ttlReply: true},
	{name: "pottery acquired", texts: []string{"pottery.acquired"}, argv: []argKind{aToken}, ttlReply: true},
	{name: "Symfony save", texts: []string{"symfony_ge5.2.save.time", "symfony_ge5.2.save.argv"}, argv: []argKind{aClockS, aToken, aTTLms}, state: sRW},
	{name: "Symfony saveRead", texts: []string{"symfony_ge5.2.saveRead.time", "symfony_ge5.2.saveRead.argv"}, argv: []argKind{aClockS, aToken, aTTLms}, state: sRW},
	{name: "Symfony putOffExpiration", texts: []string{"symfony_ge5.2.putOffExpiration.time", "symfony_ge5.2.putOffExpiration.argv"},
		argv: []argKind{aClockS, aToken, aTTLms}, state: sRW},
	{name: "Symfony delete", texts: []string{"symfony_ge5.2.delete"}, argv: []argKind{aToken}, state: sRW},
	{name: "Symfony exists", texts: []string{"symfony_ge5.2.exists.time", "symfony_ge5.2.exists.argv"}, argv: []argKind{aClockS, aToken}, state: sRW},
	{name: "Redisson lock", texts: []string{"redisson_le3.12.acquire", "redisson_3.13-3.18.acquire", "redisson_ge3.19.acquire"},
		argv: []argKind{aTTLms, aHolder}, state: sHash, ttlReply: true},
	{name: "Redisson unlock (3.11-3.21)", texts: []string{"redisson_3.11-3.21.unlock"}, keys: kLockChannel, argv: []argKind{aMsg, aTTLms, aHolder}, state: sHash},
	{name: "Redisson unlock (3.22-3.23)", texts: []string{"redisson_3.22-3.23.unlock"}, keys: kLockChannel, argv: []argKind{aMsg, aTTLms, aHolder, aPubCmd}, state: sHash},
	{name: "Redisson unlock", texts: []string{"redisson_ge3.24.unlock"}, keys: kLockChannelLatch, argv: []argKind{aMsg, aTTLms, aHolder, aPubCmd, aLatchMs}, state: sHash},
	{name: "Redisson renewal", texts: []string{"redisson_le3.43.renew"}, argv: []argKind{aTTLms, aHolder}, state: sHash},
	{name: "Redisson batched renewal", texts: []string{"redisson_ge3.44.renew_batch"}, keys: kBatch, argv: []argKind{aTTLms}, state: sHash},
	{name: "Redisson forceUnlock", texts: []string{"redisson.force_unlock"}, keys: kLockChannel, argv: []argKind{aMsg, aPubCmd}, state: sHash},
	{name: "redis-semaphore Semaphore acquire", texts: []string{"redis_semaphore_5.8.semaphore_acquire"},
		argv: []argKind{aLimit, aToken, aTTLms, aClockMs}, state: sPermit},
	{name: "redis-semaphore Semaphore refresh", texts: []string{"redis_semaphore_5.8.semaphore_refresh"},
		argv: []argKind{aLimit, aToken, aTTLms, aClockMs}, state: sPermit},

	// The vocabulary's ops and keys that no built-in entry uses, declared
	// in [[scripts]] with scripts written for them.
	{name: "declared-permit-release.lua", texts: []string{"declared-permit-release.lua"}, argv: []argKind{aToken}, state: sPermit,
		src: `return redis.call('zrem', KEYS[1], ARGV[1])`, decl: "op = \"permit_release\"\ntoken_arg = 1\n"},
	{name: "declared-acquire-ex.lua", texts: []string{"declared-acquire-ex.lua"}, argv: []argKind{aToken, aTTLs},
		src:  `return redis.call('set', KEYS[1], ARGV[1], 'NX', 'EX', ARGV[2])`,
		decl: "op = \"acquire\"\ntoken_arg = 1\nttl_arg = 2\nttl_unit = \"s\"\nok = \"OK\"\nnot_owned = \"nil\"\n"},
	{name: "declared-extend-exat.lua", texts: []string{"declared-extend-exat.lua"}, argv: []argKind{aToken, aUnixS},
		src:  `if redis.call('get', KEYS[1]) == ARGV[1] then return redis.call('expireat', KEYS[1], ARGV[2]) end return 0`,
		decl: "op = \"extend\"\ntoken_arg = 1\nttl_arg = 2\nttl_unit = \"unix_s\"\n"},
	{name: "declared-owner-ttl.lua", texts: []string{"declared-owner-ttl.lua"}, argv: []argKind{aToken}, ttlReply: true,
		src:  `if redis.call('get', KEYS[1]) == ARGV[1] then return redis.call('pttl', KEYS[1]) end return -5`,
		decl: "op = \"owner_ttl\"\ntoken_arg = 1\nnot_owned = -5\nabsent = -5\n"},
	{name: "declared-release-absent.lua", texts: []string{"declared-release-absent.lua"}, argv: []argKind{aToken},
		src:  `local v = redis.call('get', KEYS[1]) if v == false then return 'none' end if v == ARGV[1] then redis.call('del', KEYS[1]) return 1 end return 0`,
		decl: "op = \"release\"\ntoken_arg = 1\nabsent = '\"none\"'\n"},
}
