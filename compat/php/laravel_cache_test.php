<?php
// Laravel's cache (Illuminate\Cache\Repository over RedisStore), its
// RateLimiter and its lock, side by side on one Redis connection, as Debian
// packages them (php-illuminate-cache 8.83 over phpredis). The same script
// runs against a plain redis-server and through redlock-proxy, and
// compat/php_test.go compares what the two print line for line.
//
// REDIS_TARGET  host:port the application talks to (the proxy, or a plain Redis)
// REDIS_VOTERS  comma-separated host:port of the Redis servers that must hold
//               the locks: the proxy's masters, or the plain Redis itself
// REDIS_DB      the database of the Laravel connections (config/database.php's
//               'database'; Laravel's cache connection defaults to 1)
// LOCK_PREFIX   empty: locks on the cache's own connection (Laravel's
//               default, lock_connection = 'default'); else the connection
//               prefix of a connection of their own for locks (for a proxy
//               whose lock_keys are ["lock:*"], "lock:")
// RUN           a name for this run, the same for both targets
//
// Prints one line per check, with what it saw where that is the same on
// every run, and exits 1 at the first failure, 3 if the database is refused.

declare(strict_types=1);

require_once '/usr/share/php/Illuminate/Redis/autoload.php';
require_once '/usr/share/php/Illuminate/Cache/autoload.php';

use Illuminate\Cache\RateLimiter;
use Illuminate\Cache\RedisStore;
use Illuminate\Cache\Repository;
use Illuminate\Redis\RedisManager;

error_reporting(E_ALL);
set_error_handler(function (int $no, string $msg, string $file, int $line): bool {
    throw new ErrorException($msg, 0, $no, $file, $line);
});

$checks = 0;

function fail(string $what, string $detail = ''): void
{
    echo "FAIL $what" . ($detail !== '' ? ": $detail" : '') . "\n";
    exit(1);
}

// check: a condition whose detail may differ from run to run (TTLs, timings).
function check(bool $cond, string $what, string $detail = ''): void
{
    global $checks;
    if (!$cond) {
        fail($what, $detail);
    }
    $checks++;
    echo "ok   $what\n";
}

// same: a value that must be exactly $want, printed so that the two runs'
// outputs compare it too.
function same($got, $want, string $what): void
{
    global $checks;
    if ($got !== $want) {
        fail($what, 'got ' . var_export($got, true) . ', want ' . var_export($want, true));
    }
    $checks++;
    echo "ok   $what: " . json_encode($got) . "\n";
}

function hostPort(string $addr): array
{
    $i = strrpos($addr, ':');
    if ($i === false) {
        fail("address $addr", 'expected host:port');
    }
    return [substr($addr, 0, $i), (int) substr($addr, $i + 1)];
}

$target = getenv('REDIS_TARGET');
$votersEnv = getenv('REDIS_VOTERS');
$run = getenv('RUN');
$db = (int) getenv('REDIS_DB');
$lockPrefix = (string) getenv('LOCK_PREFIX');
if (!$target || !$votersEnv || !$run) {
    fail('environment', 'REDIS_TARGET, REDIS_VOTERS and RUN must be set');
}
[$host, $port] = hostPort($target);

// Plain connections to the voters, only to look at what they hold.
$voters = [];
foreach (explode(',', $votersEnv) as $addr) {
    [$h, $p] = hostPort(trim($addr));
    $r = new \Redis();
    $r->connect($h, $p, 2.0);
    if ($db !== 0 && !$r->select($db)) {
        fail("select $db on voter $addr");
    }
    $voters[] = $r;
}
$quorum = intdiv(count($voters), 2) + 1;

// Wired as Laravel's service providers wire config/database.php and
// config/cache.php: phpredis, a connection prefix, a cache prefix.
$connPrefix = 'laravel_database_';
$server = ['host' => $host, 'port' => $port, 'password' => null, 'database' => $db,
    'timeout' => 5.0, 'read_timeout' => 10.0];
$connections = [
    'client' => 'phpredis',
    'options' => ['prefix' => $connPrefix],
    'default' => $server,
];
if ($lockPrefix !== '') {
    $connections['locks'] = $server + ['options' => ['prefix' => $lockPrefix]];
}
$manager = new RedisManager(null, 'phpredis', $connections);

// Laravel's PhpRedisConnector sends SELECT and ignores its answer: a refused
// database would leave the application in database 0 unawares. phpredis
// 5.3.7 records the database before SELECT answers (getDbNum() says $db
// either way); its last error is the sign.
$client = $manager->connection('default')->client();
if ($client->getLastError() !== null) {
    echo "REFUSED database $db: " . rtrim($client->getLastError(), "\0") . "\n";
    exit(3);
}

$store = new RedisStore($manager, 'laravel_cache', 'default');
$store->setLockConnection($lockPrefix !== '' ? 'locks' : 'default');
$cache = new Repository($store);
$conn = $store->connection();

// The key a lock name ends up under on the voters.
function rkey(string $name): string
{
    global $connPrefix, $lockPrefix, $store;
    return ($lockPrefix !== '' ? $lockPrefix : $connPrefix) . $store->getPrefix() . $name;
}

function holders(string $name, string $value): int
{
    global $voters;
    $n = 0;
    foreach ($voters as $v) {
        if ($v->get(rkey($name)) === $value) {
            $n++;
        }
    }
    return $n;
}

function goneEverywhere(string $name, float $seconds = 1.5): bool
{
    global $voters;
    $deadline = microtime(true) + $seconds;
    do {
        $n = 0;
        foreach ($voters as $v) {
            $n += (int) $v->exists(rkey($name));
        }
        if ($n === 0) {
            return true;
        }
        usleep(20000);
    } while (microtime(true) < $deadline);
    return false;
}

// The TTL of a cache key, as the application's connection reads it.
function ttl(string $key): int
{
    global $conn, $store;
    return (int) $conn->ttl($store->getPrefix() . $key);
}

$k = fn (string $name): string => "$run:$name";
$sameConnection = $lockPrefix === '';
echo "illuminate/cache with phpredis " . phpversion('redis') . ", database $db, locks "
    . ($sameConnection ? 'on the cache connection' : "on a connection prefixed $lockPrefix") . "\n";

// 1. put, get, has, missing, pull.
same($cache->put($k('a'), 'alpha', 60), true, 'put(a, alpha, 60)');
same($cache->get($k('a')), 'alpha', 'get(a)');
same($cache->has($k('a')), true, 'has(a)');
same($cache->missing($k('none')), true, 'missing(none)');
same($cache->get($k('none'), 'dflt'), 'dflt', 'get(none, dflt)');
$t = ttl($k('a'));
check($t > 50 && $t <= 60, 'TTL of a is about 60 s', (string) $t);
same($cache->put($k('arr'), ['x' => 1, 'y' => [true, null]], 60), true, 'put(arr, an array, 60)');
same($cache->get($k('arr')), ['x' => 1, 'y' => [true, null]], 'get(arr)');
same($cache->put($k('a'), 'alpha2', 60), true, 'put(a, alpha2, 60) over it');
same($cache->pull($k('a')), 'alpha2', 'pull(a)');
same($cache->has($k('a')), false, 'has(a) after pull');

// 2. increment, decrement (INCRBY/DECRBY on the stored number).
same($cache->put($k('n'), 5, 60), true, 'put(n, 5, 60)');
same($cache->increment($k('n')), 6, 'increment(n)');
same($cache->increment($k('n'), 10), 16, 'increment(n, 10)');
same($cache->decrement($k('n'), 3), 13, 'decrement(n, 3)');
same($cache->get($k('n')), '13', 'get(n)');
$t = ttl($k('n'));
check($t > 50 && $t <= 60, 'increment kept the TTL of n', (string) $t);
same($cache->increment($k('fresh')), 1, 'increment(fresh), absent before');
same($cache->decrement($k('fresh2'), 2), -2, 'decrement(fresh2, 2), absent before');
same(ttl($k('fresh')), -1, 'TTL of fresh: none');
same($cache->put($k('s'), 'text', 60), true, 'put(s, text, 60)');
$conn->client()->clearLastError();
same($cache->increment($k('s')), false, 'increment(s) of a string');
same(rtrim((string) $conn->client()->getLastError(), "\0"), 'ERR value is not an integer or out of range', 'its error');

// 3. many, putMany (SETEX in MULTI/EXEC), getMultiple, setMultiple, deleteMultiple.
same($cache->putMany([$k('m1') => 'one', $k('m2') => ['two' => 2], $k('m3') => 3], 60), true, 'putMany(m1, m2, m3)');
same($cache->many([$k('m1'), $k('m2'), $k('m3'), $k('none')]),
    [$k('m1') => 'one', $k('m2') => ['two' => 2], $k('m3') => '3', $k('none') => null], 'many(m1, m2, m3, none)');
$t = ttl($k('m2'));
check($t > 50 && $t <= 60, 'putMany set the TTL of m2', (string) $t);
same($cache->setMultiple([$k('m4') => 'four', $k('m5') => 'five'], 60), true, 'setMultiple(m4, m5)');
same(iterator_to_array($cache->getMultiple([$k('m4'), $k('m5'), $k('none')], 'd')),
    [$k('m4') => 'four', $k('m5') => 'five', $k('none') => 'd'], 'getMultiple(m4, m5, none)');
same($cache->deleteMultiple([$k('m4'), $k('m5')]), true, 'deleteMultiple(m4, m5)');
same($cache->many([$k('m4'), $k('m5')]), [$k('m4') => null, $k('m5') => null], 'many(m4, m5) after deleteMultiple');

// 4. add: the store's EXISTS-then-SETEX script.
same($cache->add($k('added'), 'first', 60), true, 'add(added, first, 60)');
same($cache->add($k('added'), 'second', 60), false, 'add(added, second, 60) while present');
same($cache->get($k('added')), 'first', 'get(added)');
$t = ttl($k('added'));
check($t > 50 && $t <= 60, 'TTL of added is about 60 s', (string) $t);
same($cache->add($k('m1'), 'other', 60), false, 'add(m1) over a put value');
same($cache->add($k('n'), 1, 60), false, 'add(n) over a counter');
same($cache->increment($k('added2')), 1, 'increment(added2)');
same($cache->add($k('added2'), 0, 60), false, 'add(added2) over an incremented key');
same($cache->forget($k('added')), true, 'forget(added)');
same($cache->add($k('added'), 'third', 60), true, 'add(added, third) after forget');
same($cache->get($k('added')), 'third', 'get(added)');
same($cache->put($k('added'), 'fourth', 60), true, 'put(added, fourth) over an added key');
same($cache->get($k('added')), 'fourth', 'get(added) after put');
same($cache->increment($k('added3')), 1, 'increment(added3)');

// 5. forever, forget, has.
same($cache->forever($k('f'), 'always'), true, 'forever(f, always)');
same(ttl($k('f')), -1, 'TTL of f: none');
same($cache->get($k('f')), 'always', 'get(f)');
same($cache->forget($k('f')), true, 'forget(f)');
same($cache->forget($k('f')), false, 'forget(f) again');
same($cache->has($k('f')), false, 'has(f) after forget');
same($cache->put($k('zero'), 'x', 0), false, 'put(zero, x, 0) (Laravel forgets it)');

// 6. remember, rememberForever, sear.
$calls = 0;
$fn = function () use (&$calls) {
    $calls++;
    return "computed $calls";
};
same($cache->remember($k('r'), 60, $fn), 'computed 1', 'remember(r) computes');
same($cache->remember($k('r'), 60, $fn), 'computed 1', 'remember(r) again: cached');
same($calls, 1, 'callback ran once');
same($cache->rememberForever($k('rf'), $fn), 'computed 2', 'rememberForever(rf) computes');
same($cache->sear($k('rf'), $fn), 'computed 2', 'sear(rf): cached');
same(ttl($k('rf')), -1, 'TTL of rf: none');

// 7. tags (RedisTaggedCache: SADD of reference sets, SSCAN and DEL on flush).
$tagged = $cache->tags(['people', 'artists']);
same($tagged->put($k('john'), 'doe', 60), true, 'tags(people, artists)->put(john, doe, 60)');
same($tagged->forever($k('anne'), 'smith'), true, 'tags(people, artists)->forever(anne, smith)');
same($tagged->increment($k('count'), 2), 2, 'tags(people, artists)->increment(count, 2)');
same($cache->tags(['people', 'artists'])->get($k('john')), 'doe', 'tags(people, artists)->get(john)');
same($cache->tags(['people'])->get($k('john')), null, 'tags(people)->get(john): another namespace');
same($cache->get($k('john')), null, 'get(john) untagged: null');
same($cache->tags(['people', 'artists'])->flush(), true, 'tags(people, artists)->flush()');
same($cache->tags(['people', 'artists'])->get($k('john')), null, 'tags(people, artists)->get(john) after flush');
same($cache->tags(['people', 'artists'])->get($k('anne')), null, 'tags(people, artists)->get(anne) after flush');
same($cache->tags(['artists'])->put($k('bob'), 'x', 60), true, 'tags(artists)->put(bob, x, 60)');
same($cache->tags(['artists'])->get($k('bob')), 'x', 'tags(artists)->get(bob)');
same($cache->tags(['artists'])->flush(), true, 'tags(artists)->flush()');
same($cache->tags(['artists'])->get($k('bob')), null, 'tags(artists)->get(bob) after flush');

// 8. RateLimiter: add of the counter and its timer, increment, has, forget.
$limiter = new RateLimiter($cache);
$rl = $k('login:alice');
same($limiter->tooManyAttempts($rl, 3), false, 'tooManyAttempts(3) before any hit');
same($limiter->hit($rl, 60), 1, 'hit() 1');
same($limiter->hit($rl, 60), 2, 'hit() 2');
same($limiter->attempts($rl), '2', 'attempts() after 2 hits');
same($limiter->remaining($rl, 3), 1, 'remaining(3) after 2 hits');
same($limiter->tooManyAttempts($rl, 3), false, 'tooManyAttempts(3) after 2 hits');
same($limiter->hit($rl, 60), 3, 'hit() 3');
same($limiter->tooManyAttempts($rl, 3), true, 'tooManyAttempts(3) after 3 hits');
$in = $limiter->availableIn($rl);
check($in > 50 && $in <= 60, 'availableIn() about 60 s', (string) $in);
$t = ttl($rl);
check($t > 50 && $t <= 60, 'the counter expires in about 60 s', (string) $t);
same($limiter->attempt($rl, 3, fn () => 'ran'), false, 'attempt(3) refused');
$limiter->clear($rl);
same($limiter->attempts($rl), 0, 'attempts() after clear()');
same($limiter->tooManyAttempts($rl, 3), false, 'tooManyAttempts(3) after clear()');
same($limiter->attempt($rl, 3, fn () => 'ran'), 'ran', 'attempt(3) runs after clear()');
same($limiter->attempts($rl), '1', 'attempts() after the attempt');
// A decay of 1 s: the timer and the counter expire, the limit resets.
$short = $k('short');
same($limiter->hit($short, 1), 1, 'hit(short, 1)');
same($limiter->tooManyAttempts($short, 1), true, 'tooManyAttempts(short, 1)');
usleep(2200000);
same($limiter->tooManyAttempts($short, 1), false, 'tooManyAttempts(short, 1) once the decay passed');
same($limiter->hit($short, 1), 1, 'hit(short, 1) starts again at 1');
$limiter->clear($short);

// 9. A lock beside the cache: held on a quorum of the voters while the cache
// works on other keys.
$name = $k('job');
$lock = $cache->lock($name, 10);
same($lock->get(), true, 'lock(job, 10)->get()');
$h = holders($name, $lock->owner());
check($h >= $quorum, "lock on a quorum of the voters", "$h voters");
same($cache->lock($name, 10)->get(), false, 'a second lock(job, 10)->get() while held');
same($cache->put($k('during'), 'v', 60), true, 'put(during) while the lock is held');
same($cache->increment($k('n')), 14, 'increment(n) while the lock is held');
same($limiter->hit($k('during-rl'), 60), 1, 'hit() while the lock is held');
same($lock->release(), true, 'release()');
check(goneEverywhere($name), 'lock gone from every voter');
same($lock->release(), false, 'release() again');
$cbLock = $cache->lock($k('cb'), 10);
same($cbLock->get(fn () => $cache->increment($k('under-lock'))), 1, 'lock(cb)->get(callback) increments under the lock');
check(goneEverywhere($k('cb')), 'lock(cb) released after its callback');
$sl = $cache->lock($k('setnx'));
same($sl->get(), true, 'lock(setnx) without seconds (SETNX)->get()');
check(holders($k('setnx'), $sl->owner()) >= $quorum, "SETNX lock on a quorum of the voters");
same($sl->release(), true, 'release() of the SETNX lock');

// 10. With locks on the cache's connection, a lock and a cache entry share
// the keyspace: a name holding data is not granted as a lock, and a lock's
// key reads, expires and is forgotten as data.
if ($sameConnection) {
    same($cache->put($k('shared'), 'data', 60), true, 'put(shared, data, 60)');
    same($cache->lock($k('shared'), 10)->get(), false, 'lock(shared) refused: the key holds cache data');
    same($cache->get($k('shared')), 'data', 'get(shared) still the data');
    same($cache->forget($k('shared')), true, 'forget(shared)');
    $l = $cache->lock($k('shared'), 10);
    same($l->get(), true, 'lock(shared) after forget');
    same($cache->add($k('shared'), 'data2', 60), false, 'add(shared) refused while locked');
    same($conn->exists($store->getPrefix() . $k('shared')), 1, 'EXISTS of shared while locked');
    same($conn->get($store->getPrefix() . $k('shared')) === $l->owner(), true, 'the key reads as the owner token');
    same($cache->forget($k('shared')), true, 'forget(shared) deletes the lock');
    check(goneEverywhere($k('shared')), 'forgotten lock gone from every voter');
    same($l->release(), false, 'the forgotten lock cannot be released');
    $l2 = $cache->lock($k('shared'), 10);
    same($l2->get(), true, 'another owner locks it after the forget');
    check(holders($k('shared'), $l2->owner()) >= $quorum, "the new owner on a quorum of the voters");
    same($l->release(), false, 'the first owner cannot release the second');
    same($l2->release(), true, 'the second owner releases it');
    check(goneEverywhere($k('shared')), 'released lock gone from every voter');
}

// 11. flush (FLUSHDB of the cache's database), with no lock held.
same($cache->put($k('before-flush'), 'x', 60), true, 'put(before-flush)');
same($cache->flush(), true, 'flush()');
same($cache->get($k('before-flush')), null, 'get(before-flush) after flush');
same($cache->get($k('n')), null, 'get(n) after flush');
// Not DBSIZE: through the proxy, keys that add() took and put() or
// increment() then overwrote (a RateLimiter's counter) stay taken on the
// quorum until their TTL (docs/clients.md).
same($conn->exists($k('before-flush'), $k('n'), $k('arr')), 0, 'EXISTS after flush');
same($cache->put($k('after-flush'), 'y', 60), true, 'put(after-flush)');
same($cache->get($k('after-flush')), 'y', 'get(after-flush)');
$l = $cache->lock($k('after-flush-lock'), 10);
same($l->get(), true, 'lock(after-flush-lock)->get()');
check(holders($k('after-flush-lock'), $l->owner()) >= $quorum, "lock after flush on a quorum of the voters");
same($l->release(), true, 'release() after flush');
$cache->forget($k('after-flush'));

echo "PASS $checks checks\n";
