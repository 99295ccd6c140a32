<?php
// Laravel's Redis cache lock (Illuminate\Cache\RedisStore / PhpRedisLock over
// phpredis), as packaged by Debian, driven through redlock-proxy.
//
// REDLOCK_PROXY   host:port of the proxy
// REDLOCK_MASTERS comma-separated host:port of the masters (read only to check state)
//
// Prints one line per check and exits non-zero at the first failure.

declare(strict_types=1);

require_once '/usr/share/php/Illuminate/Redis/autoload.php';
require_once '/usr/share/php/Illuminate/Cache/autoload.php';

use Illuminate\Cache\RedisStore;
use Illuminate\Contracts\Cache\LockTimeoutException;
use Illuminate\Redis\RedisManager;

error_reporting(E_ALL);
set_error_handler(function (int $no, string $msg, string $file, int $line): bool {
    throw new ErrorException($msg, 0, $no, $file, $line);
});

$checks = 0;

function ok(string $what): void
{
    global $checks;
    $checks++;
    echo "ok   $what\n";
}

function fail(string $what, string $detail = ''): void
{
    echo "FAIL $what" . ($detail !== '' ? ": $detail" : '') . "\n";
    exit(1);
}

function check(bool $cond, string $what, string $detail = ''): void
{
    $cond ? ok($what) : fail($what, $detail);
}

function hostPort(string $addr): array
{
    $i = strrpos($addr, ':');
    if ($i === false) {
        fail("address $addr", 'expected host:port');
    }
    return [substr($addr, 0, $i), (int) substr($addr, $i + 1)];
}

$proxy = getenv('REDLOCK_PROXY');
$mastersEnv = getenv('REDLOCK_MASTERS');
if (!$proxy || !$mastersEnv) {
    fail('environment', 'REDLOCK_PROXY and REDLOCK_MASTERS must be set');
}
[$proxyHost, $proxyPort] = hostPort($proxy);

// Plain connections to each master, only to look at what they hold.
$masters = [];
foreach (explode(',', $mastersEnv) as $addr) {
    [$h, $p] = hostPort(trim($addr));
    $r = new \Redis();
    $r->connect($h, $p, 2.0);
    $masters[] = $r;
}
$quorum = intdiv(count($masters), 2) + 1;

// The Redis manager and cache store wired the way Laravel's service providers
// wire them from config/database.php and config/cache.php (phpredis client,
// a connection prefix and a cache prefix).
$connPrefix = 'laravel_database_';
$cachePrefix = 'laravel_cache'; // RedisStore appends ':'
$manager = new RedisManager(null, 'phpredis', [
    'client' => 'phpredis',
    'options' => ['prefix' => $connPrefix],
    'default' => [
        'host' => $proxyHost,
        'port' => $proxyPort,
        'password' => null,
        'database' => 0,
        'timeout' => 5.0,
        'read_timeout' => 10.0,
    ],
]);
$store = new RedisStore($manager, $cachePrefix, 'default');
$store->setLockConnection('default');

$run = 'compat-' . bin2hex(random_bytes(6));

// The key a lock name ends up under on the masters.
function rkey(string $name): string
{
    global $connPrefix, $store;
    return $connPrefix . $store->getPrefix() . $name;
}

// How many masters hold $value under the lock's key.
function holders(string $name, string $value): int
{
    global $masters;
    $n = 0;
    foreach ($masters as $m) {
        if ($m->get(rkey($name)) === $value) {
            $n++;
        }
    }
    return $n;
}

// How many masters still have the lock's key at all.
function present(string $name): int
{
    global $masters;
    $n = 0;
    foreach ($masters as $m) {
        if ($m->exists(rkey($name))) {
            $n++;
        }
    }
    return $n;
}

// Waits up to $seconds for the key to be gone from every master.
function goneEverywhere(string $name, float $seconds = 1.5): bool
{
    $deadline = microtime(true) + $seconds;
    do {
        if (present($name) === 0) {
            return true;
        }
        usleep(20000);
    } while (microtime(true) < $deadline);
    return false;
}

// PTTLs of the key on the masters that hold $value.
function pttls(string $name, string $value): array
{
    global $masters;
    $out = [];
    foreach ($masters as $m) {
        if ($m->get(rkey($name)) === $value) {
            $out[] = $m->pttl(rkey($name));
        }
    }
    return $out;
}

echo 'illuminate/cache with phpredis ' . phpversion('redis') . ', PHP ' . PHP_VERSION . ", proxy $proxy, " . count($masters) . " masters\n";

// 1. Acquire.
$name = "$run:a";
$lock = $store->lock($name, 10);
check(get_class($lock) === 'Illuminate\Cache\PhpRedisLock', 'store->lock() is a PhpRedisLock', get_class($lock));
$got = $lock->get();
check($got === true, 'lock(name, 10)->get() is true', var_export($got, true));
$h = holders($name, $lock->owner());
check($h >= $quorum, "owner token on >= $quorum masters", "$h masters");
$t = pttls($name, $lock->owner());
check(count($t) > 0 && min($t) > 8000 && max($t) <= 10000, 'TTL on the masters is about 10 s', json_encode($t));
check($store->lockConnection()->get($store->getPrefix() . $name) === $lock->owner(),
    'GET through the proxy answers the owner token');

// 2. Contention.
$other = $store->lock($name, 10);
check($other->owner() !== $lock->owner(), 'second lock has a different owner');
$got = $other->get();
check($got === false, 'second lock(name, 10)->get() is false while held', var_export($got, true));
check(holders($name, $lock->owner()) >= $quorum, 'first owner still holds the lock on a quorum');

// 3. block() on a held lock times out.
$start = microtime(true);
$threw = false;
try {
    $store->lock($name, 10)->block(2);
} catch (LockTimeoutException $e) {
    $threw = true;
}
$elapsed = microtime(true) - $start;
check($threw, 'block(2) on a held lock throws LockTimeoutException');
check($elapsed >= 1.0 && $elapsed <= 4.0, 'block(2) gave up after about 2 s', sprintf('%.2f s', $elapsed));
check(holders($name, $lock->owner()) >= $quorum, 'lock still held by its owner after the timed-out block');

// 4. Release by a non-owner.
$got = $other->release();
check($got === false, 'release() by a non-owner is false', var_export($got, true));
check(holders($name, $lock->owner()) >= $quorum, 'lock still held by its owner after the foreign release');
$got = $store->restoreLock($name, 'not-the-owner-' . bin2hex(random_bytes(4)))->release();
check($got === false, 'restoreLock(name, wrong owner)->release() is false', var_export($got, true));

// 5. Release by the owner.
$got = $lock->release();
check($got === true, 'release() by the owner is true', var_export($got, true));
check(goneEverywhere($name), 'key gone from every master after release', present($name) . ' masters still have it');
$got = $lock->release();
check($got === false, 'second release() is false', var_export($got, true));
$again = $store->lock($name, 10);
check($again->get() === true, 'lock can be taken again after release');
check($again->release() === true, 'and released again');
check(goneEverywhere($name), 'key gone from every master');

// 6. forceRelease.
$name = "$run:force";
$lock = $store->lock($name, 10);
check($lock->get() === true, 'lock(force, 10)->get() is true');
$store->lock($name, 10)->forceRelease();
check(goneEverywhere($name), 'forceRelease() by another instance removes the key from every master', present($name) . ' masters still have it');
$next = $store->lock($name, 10);
check($next->get() === true, 'lock can be taken by another owner after forceRelease()');
check(holders($name, $next->owner()) >= $quorum, "new owner on >= $quorum masters");
check($lock->release() === false, 'the old owner can no longer release it');
check(holders($name, $next->owner()) >= $quorum, 'new owner still holds it');
$next->forceRelease();
check(goneEverywhere($name), 'forceRelease() by the owner removes the key from every master');

// 7. restoreLock.
$name = "$run:restore";
$lock = $store->lock($name, 10);
check($lock->get() === true, 'lock(restore, 10)->get() is true');
$owner = $lock->owner();
unset($lock);
$restored = $store->restoreLock($name, $owner);
check($restored->owner() === $owner, 'restoreLock() carries the owner');
check($restored->get() === false, 'a restored lock does not re-acquire a held lock');
$got = $restored->release();
check($got === true, 'restoreLock(name, owner)->release() is true', var_export($got, true));
check(goneEverywhere($name), 'key gone from every master after the restored release', present($name) . ' masters still have it');

// 8. seconds = 0: SETNX, no expiry.
$name = "$run:forever";
$lock = $store->lock($name);
$got = $lock->get();
check($got === true, 'lock(name) (0 s, SETNX)->get() is true', var_export($got, true));
$h = holders($name, $lock->owner());
check($h >= $quorum, "SETNX owner token on >= $quorum masters", "$h masters");
$t = pttls($name, $lock->owner());
check(count($t) > 0 && max($t) === -1 && min($t) === -1, 'no expiry on the masters (PTTL -1)', json_encode($t));
$got = $store->lock($name)->get();
check($got === false, 'second lock(name) (SETNX) is false while held', var_export($got, true));
$got = $store->lock($name, 10)->get();
check($got === false, 'lock(name, 10) (SET NX EX) is false while the SETNX lock is held', var_export($got, true));
check(holders($name, $lock->owner()) >= $quorum, 'SETNX owner still holds it');
$got = $lock->release();
check($got === true, 'release() of the SETNX lock is true', var_export($got, true));
check(goneEverywhere($name), 'key gone from every master after releasing the SETNX lock', present($name) . ' masters still have it');

// 9. A lock that expires lets a blocked waiter in.
$name = "$run:expire";
$short = $store->lock($name, 2);
check($short->get() === true, 'lock(expire, 2)->get() is true');
$waiter = $store->lock($name, 10);
$start = microtime(true);
$got = $waiter->block(6);
$elapsed = microtime(true) - $start;
check($got === true, 'block(6) acquires once the 2 s lock expires', var_export($got, true));
check($elapsed >= 1.5 && $elapsed <= 4.5, 'the waiter got it after about 2 s', sprintf('%.2f s', $elapsed));
check(holders($name, $waiter->owner()) >= $quorum, "waiter on >= $quorum masters");
check($short->release() === false, 'the expired owner cannot release it');
check($waiter->release() === true, 'the waiter releases it');
check(goneEverywhere($name), 'key gone from every master');

// 10. get(callback): runs under the lock, releases afterwards.
$name = "$run:callback";
$cbLock = $store->lock($name, 10);
$result = $cbLock->get(function () use ($name, $cbLock, $store, $quorum) {
    return [holders($name, $cbLock->owner()), $store->lock($name, 10)->get()];
});
check(is_array($result) && $result[0] >= $quorum, 'get(callback) runs while the lock is held on a quorum', json_encode($result));
check(is_array($result) && $result[1] === false, 'another lock is refused inside the callback', json_encode($result));
check(goneEverywhere($name), 'get(callback) released the lock on every master', present($name) . ' masters still have it');

// 11. refreshLock: only Laravel versions that have it.
$probe = $store->lock("$run:refresh", 10);
if (method_exists($probe, 'refreshLock')) {
    check($probe->get() === true, 'lock(refresh, 10)->get() is true');
    usleep(1200000);
    check($probe->refreshLock(30) === true, 'refreshLock(30) by the owner is true');
    $t = pttls("$run:refresh", $probe->owner());
    check(count($t) >= $quorum && min($t) > 25000, 'TTL renewed to about 30 s on a quorum', json_encode($t));
    check($store->lock("$run:refresh", 10)->refreshLock(30) === false, 'refreshLock() by a non-owner is false');
    check($probe->release() === true, 'release after refresh is true');
    check(goneEverywhere("$run:refresh"), 'key gone from every master');
} else {
    echo "skip refreshLock: not in this Laravel version (" . get_class($probe) . " has no refreshLock)\n";
}

// 12. RedisStore::add, the cache's own "set if absent" script, often used as a lock.
$key = "$run:add";
$got = $store->add($key, 'first', 10);
check($got === true, 'store->add(key, first, 10) is true', var_export($got, true));
// RedisStore stores non-numeric values PHP-serialized.
check(holders($key, serialize('first')) >= $quorum, "added value on >= $quorum masters", holders($key, serialize('first')) . ' masters');
$t = pttls($key, serialize('first'));
check(count($t) >= $quorum && min($t) > 8000 && max($t) <= 10000, 'added value expires in about 10 s on the masters', json_encode($t));
$got = $store->add($key, 'second', 10);
check($got === false, 'store->add(key, second, 10) is false while present', var_export($got, true));
check($store->get($key) === 'first', 'store->get(key) is the first value', var_export($store->get($key), true));
check($store->forget($key) === true, 'store->forget(key) is true');
check(goneEverywhere($key), 'added key gone from every master');

echo "PASS $checks checks\n";
