<?php
// Symfony Lock's RedisStore (sorted-set read/write locks, Symfony 5.2 and
// later) over phpredis, as packaged by Debian, driven through redlock-proxy.
//
// REDLOCK_PROXY   host:port of the proxy
// REDLOCK_MASTERS comma-separated host:port of the masters (read only to check state)
//
// Prints one line per check and exits non-zero at the first failure.

declare(strict_types=1);

require_once '/usr/share/php/Symfony/Component/Lock/autoload.php';

use Symfony\Component\Lock\Exception\LockAcquiringException;
use Symfony\Component\Lock\Exception\LockConflictedException;
use Symfony\Component\Lock\Exception\LockStorageException;
use Symfony\Component\Lock\Key;
use Symfony\Component\Lock\Lock;
use Symfony\Component\Lock\LockFactory;
use Symfony\Component\Lock\Store\RedisStore;

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

// Plain connections to each master, only to look at what they hold (the
// first only, with "noquorum").
$masters = [];
foreach (explode(',', $mastersEnv) as $i => $addr) {
    if ($i > 0 && ($argv[1] ?? '') === 'noquorum') {
        break;
    }
    [$h, $p] = hostPort(trim($addr));
    $r = new \Redis();
    $r->connect($h, $p, 2.0);
    $masters[] = $r;
}
$quorum = intdiv(count(explode(',', $mastersEnv)), 2) + 1;

$redis = new \Redis();
$redis->connect($proxyHost, $proxyPort, 5.0);
$store = new RedisStore($redis);
$factory = new LockFactory($store);

$run = 'compat-' . bin2hex(random_bytes(6));

// The token RedisStore keeps in the lock's Key.
function token(Lock $lock): string
{
    $p = new ReflectionProperty(Lock::class, 'key');
    $p->setAccessible(true);
    return $p->getValue($lock)->getState(RedisStore::class);
}

// How many masters hold $lock's token under its key.
function holders(string $name, Lock $lock): int
{
    global $masters;
    $n = 0;
    foreach ($masters as $m) {
        if ($m->zScore($name, token($lock)) !== false) {
            $n++;
        }
    }
    return $n;
}

// Waits up to $seconds for $lock's token to be on no master.
function tokenGone(string $name, Lock $lock, float $seconds = 1.5): bool
{
    $deadline = microtime(true) + $seconds;
    do {
        if (holders($name, $lock) === 0) {
            return true;
        }
        usleep(20000);
    } while (microtime(true) < $deadline);
    return false;
}

// How many masters have the key at all.
function present(string $name): int
{
    global $masters;
    $n = 0;
    foreach ($masters as $m) {
        if ($m->exists($name)) {
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

// PTTLs of the key on the masters where $lock's token is in it.
// settledPttls waits (up to 1.5 s) until every master holding the token has
// a TTL in (lo, hi], and returns the TTLs: the reply comes once a quorum has
// applied a change, the last master may apply it a moment later.
function settledPttls(string $name, Lock $lock, int $lo, int $hi): array
{
    global $quorum;
    $deadline = microtime(true) + 1.5;
    do {
        $t = pttls($name, $lock);
        if (count($t) >= $quorum && min($t) > $lo && max($t) <= $hi) {
            break;
        }
        usleep(20000);
    } while (microtime(true) < $deadline);
    return $t;
}

function pttls(string $name, Lock $lock): array
{
    global $masters;
    $out = [];
    foreach ($masters as $m) {
        if ($m->zScore($name, token($lock)) !== false) {
            $out[] = $m->pttl($name);
        }
    }
    return $out;
}

// How many masters mark the key as held by a writer.
function writeMarked(string $name): int
{
    global $masters;
    $n = 0;
    foreach ($masters as $m) {
        if ($m->zScore($name, '__write__') !== false) {
            $n++;
        }
    }
    return $n;
}

// With "noquorum" as argument, two of the three masters are down: every
// operation fails loudly and nothing is left on the master that is up.
if (($argv[1] ?? '') === 'noquorum') {
    $name = "$run:noquorum";
    $lock = $factory->createLock($name, 10);
    try {
        $lock->acquire();
        fail('acquire() with two masters down', 'no exception');
    } catch (LockAcquiringException $e) {
        $prev = $e->getPrevious();
        check($prev instanceof LockStorageException && str_starts_with($prev->getMessage(), 'NOQUORUM'),
            'acquire() with two masters down throws LockAcquiringException from a NOQUORUM reply',
            $prev ? get_class($prev) . ': ' . $prev->getMessage() : 'no previous exception');
    }
    // The refusal may be answered before the master that is up has even
    // run the acquire; its part is then taken back as soon as it answers,
    // which is within node_timeout (200 ms in this harness) or never, so
    // the key must be gone once that has passed.
    $refused = microtime(true);
    $deadline = $refused + 1.0;
    while ((microtime(true) < $refused + 0.3 || $masters[0]->exists($name) !== 0) && microtime(true) < $deadline) {
        usleep(20000);
    }
    check($masters[0]->exists($name) === 0, 'nothing left on the master that is up (within a second)');
    try {
        $lock->acquireRead();
        fail('acquireRead() with two masters down', 'no exception');
    } catch (LockAcquiringException $e) {
        ok('acquireRead() with two masters down throws LockAcquiringException');
    }
    $threw = false;
    try {
        $lock->isAcquired();
    } catch (LockStorageException $e) {
        $threw = str_starts_with($e->getMessage(), 'NOQUORUM');
    }
    check($threw, 'isAcquired() with two masters down throws LockStorageException (NOQUORUM)');
    // 12. phpredis's INFO parser reads the proxy's INFO, every section.
$info = $redis->info();
check(is_array($info) && ($info['quorum'] ?? null) == $quorum, 'phpredis info(): the quorum', json_encode($info['quorum'] ?? null));
$info = $redis->info('redlock');
check(is_array($info) && isset($info['settings']) && isset($info['master0']), 'phpredis info("redlock")', json_encode($info));

echo "PASS $checks checks\n";
    exit(0);
}

echo 'symfony/lock RedisStore with phpredis ' . phpversion('redis') . ', PHP ' . PHP_VERSION . ", proxy $proxy, " . count($masters) . " masters\n";

// 1. Acquire (save, then putOffExpiration for the lock's TTL).
$name = "$run:a";
$lock = $factory->createLock($name, 10);
$got = $lock->acquire();
check($got === true, 'createLock(name, 10)->acquire() is true', var_export($got, true));
$h = holders($name, $lock);
check($h >= $quorum, "token on >= $quorum masters", "$h masters");
check(writeMarked($name) >= $quorum, "write marker on >= $quorum masters");
$t = settledPttls($name, $lock, 8000, 10000);
check(count($t) >= $quorum && min($t) > 8000 && max($t) <= 10000, 'TTL on the masters is about 10 s (refreshed from the 300 s initial TTL)', json_encode($t));
check($lock->isAcquired() === true, 'isAcquired() is true');
check($lock->getRemainingLifetime() > 8.0, 'getRemainingLifetime() is about 10 s', (string) $lock->getRemainingLifetime());

// 2. Contention.
$other = $factory->createLock($name, 10);
$got = $other->acquire();
check($got === false, 'a second Lock on the same resource: acquire() is false', var_export($got, true));
check($other->isAcquired() === false, 'the second Lock: isAcquired() is false');
$got = $other->acquireRead();
check($got === false, 'the second Lock: acquireRead() is false while a writer holds it', var_export($got, true));
check(holders($name, $lock) >= $quorum, 'the holder still holds it on a quorum');

// 3. Refresh.
usleep(500000);
$lock->refresh(30);
$t = settledPttls($name, $lock, 28000, 30000);
check(count($t) >= $quorum && min($t) > 28000 && max($t) <= 30000, 'refresh(30) sets the TTL to about 30 s on a quorum', json_encode($t));
$threw = false;
try {
    $other->refresh(30);
} catch (LockConflictedException $e) {
    $threw = true;
}
check($threw, 'refresh() by a Lock that does not hold it throws LockConflictedException');
check($lock->acquire() === true, 'acquire() again by the holder is true (re-save)');
check(holders($name, $lock) >= $quorum, 'and it still holds it on a quorum');

// 4. Release by a non-holder changes nothing.
$other->release();
ok('release() by a Lock that does not hold it does not throw');
check(holders($name, $lock) >= $quorum, 'the holder still holds it after the foreign release');
check($lock->isAcquired() === true, 'isAcquired() by the holder is still true');

// 5. Release by the holder.
$lock->release();
ok('release() by the holder does not throw (exists() answered false after delete)');
check(goneEverywhere($name), 'key gone from every master after release', present($name) . ' masters still have it');
check($lock->isAcquired() === false, 'isAcquired() is false after release');
check($other->acquire() === true, 'the other Lock can acquire it now');
check(holders($name, $other) >= $quorum, "the other Lock's token on >= $quorum masters");
$other->release();
check(goneEverywhere($name), 'key gone from every master');

// 6. Blocking acquire: RedisStore 5.4 is not a BlockingStoreInterface, so
// Lock::acquire(true) retries save() about every 100 ms until it succeeds.
$name = "$run:block";
$short = $factory->createLock($name, 2);
check($short->acquire() === true, 'createLock(block, 2)->acquire() is true');
$waiter = $factory->createLock($name, 10);
$start = microtime(true);
$got = $waiter->acquire(true);
$elapsed = microtime(true) - $start;
check($got === true, 'acquire(true) by a waiter returns true once the 2 s lock expires', var_export($got, true));
check($elapsed >= 1.5 && $elapsed <= 4.5, 'the waiter got it after about 2 s', sprintf('%.2f s', $elapsed));
check(holders($name, $waiter) >= $quorum, "the waiter's token on >= $quorum masters");
check(tokenGone($name, $short), 'the expired token is on no master');
check($short->isAcquired() === false, 'the expired Lock: isAcquired() is false');
$waiter->release();
check(goneEverywhere($name), 'key gone from every master');

// 7. Expiry.
$name = "$run:expire";
$lock = $factory->createLock($name, 1);
check($lock->acquire() === true, 'createLock(expire, 1)->acquire() is true');
usleep(1300000);
check($lock->isAcquired() === false, 'isAcquired() is false after the TTL');
check($lock->isExpired() === true, 'isExpired() is true');
$next = $factory->createLock($name, 10);
check($next->acquire() === true, 'another Lock acquires it after expiry');
$next->release();
check(goneEverywhere($name), 'key gone from every master');

// 8. Shared (read) locks.
$name = "$run:rw";
$r1 = $factory->createLock($name, 10);
$r2 = $factory->createLock($name, 10);
check($r1->acquireRead() === true, 'first reader: acquireRead() is true');
check($r2->acquireRead() === true, 'second reader: acquireRead() is true');
check(holders($name, $r1) >= $quorum && holders($name, $r2) >= $quorum, "both readers' tokens on >= $quorum masters");
check(writeMarked($name) === 0, 'no write marker on any master');
$w = $factory->createLock($name, 10);
check($w->acquire() === false, 'a writer: acquire() is false while readers hold it');
check($r1->acquire() === false, 'a reader cannot be promoted to writer while another reader holds it');
check(holders($name, $r1) >= $quorum, 'the refused promotion left the first reader holding it');
$r2->release();
check(tokenGone($name, $r2), "the released reader's token is gone from every master");
check($r1->isAcquired() === true, 'the first reader still holds it');
check($r1->acquire() === true, 'the reader alone is promoted to writer: acquire() is true');
check(writeMarked($name) >= $quorum, "write marker on >= $quorum masters after the promotion");
check($r2->acquireRead() === false, 'a reader is refused while the promoted writer holds it');
check($r1->acquireRead() === true, 'the writer demotes itself: acquireRead() is true');
check(writeMarked($name) < $quorum, 'write marker gone from a quorum after the demotion');
check($r2->acquireRead() === true, 'another reader joins after the demotion');
$r1->release();
$r2->release();
check(goneEverywhere($name), 'key gone from every master after both readers released');
check($w->acquire() === true, 'the writer acquires it once the readers are gone');
check($r1->acquireRead() === false, 'a reader is refused while the writer holds it');
$w->release();
check(goneEverywhere($name), 'key gone from every master');

// 9. A Lock that goes out of scope releases (autoRelease).
$name = "$run:auto";
(function () use ($factory, $name, $quorum) {
    $l = $factory->createLock($name, 10);
    check($l->acquire() === true, 'acquire() inside a function');
    check(holders($name, $l) >= $quorum, "token on >= $quorum masters");
})();
check(goneEverywhere($name), 'the Lock released the key on every master when it was destroyed', present($name) . ' masters still have it');

// 10. A key that holds a plain string lock is not a RedisStore lock.
$name = "$run:string";
check($redis->set($name, 'token', ['nx', 'px' => 10000]) === true, 'SET NX PX through the proxy takes the key');
$l = $factory->createLock($name, 10);
check($l->acquire() === false, 'acquire() on a key held by a string lock is false');
check($l->isAcquired() === false, 'isAcquired() is false');
check($redis->del($name) === 1, 'DEL through the proxy');
check(goneEverywhere($name), 'key gone from every master');

// 11. A Key shared by two Locks (createLockFromKey) carries the token.
$name = "$run:key";
$key = new Key($name);
$a = $factory->createLockFromKey($key, 10, false);
check($a->acquire() === true, 'createLockFromKey(key)->acquire() is true');
$b = $factory->createLockFromKey($key, 10, false);
check($b->isAcquired() === true, 'a second Lock on the same Key: isAcquired() is true');
$b->release();
check(goneEverywhere($name), 'its release() frees the key on every master');
check($a->isAcquired() === false, 'and the first Lock sees it released');

// 12. phpredis's INFO parser reads the proxy's INFO, every section.
$info = $redis->info();
check(is_array($info) && ($info['quorum'] ?? null) == $quorum, 'phpredis info(): the quorum', json_encode($info['quorum'] ?? null));
$info = $redis->info('redlock');
check(is_array($info) && isset($info['settings']) && isset($info['master0']), 'phpredis info("redlock")', json_encode($info));

echo "PASS $checks checks\n";
