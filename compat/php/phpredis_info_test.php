<?php
// phpredis's info() and select() through redlock-proxy: INFO as the proxy
// answers it (its own sections: Server, Memory, Clients, Redlock), parsed
// by phpredis, and SELECT 0.
//
// REDLOCK_PROXY   host:port of the proxy
// REDLOCK_MASTERS comma-separated host:port of the masters
// REDLOCK_BACKEND host:port of the proxy's backend
//
// Prints one line per check and exits non-zero at the first failure.

declare(strict_types=1);

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

function check(bool $cond, string $what, string $detail = ''): void
{
    global $checks;
    if (!$cond) {
        fail($what, $detail);
    }
    $checks++;
    echo "ok   $what\n";
}

function connect(string $addr): \Redis
{
    $i = strrpos($addr, ':');
    $r = new \Redis();
    $r->connect(substr($addr, 0, $i), (int) substr($addr, $i + 1), 2.0);
    return $r;
}

$proxy = getenv('REDLOCK_PROXY');
$masters = array_map('connect', explode(',', (string) getenv('REDLOCK_MASTERS')));
$backend = connect((string) getenv('REDLOCK_BACKEND'));
$r = connect((string) $proxy);
echo 'phpredis ' . phpversion('redis') . ", proxy $proxy\n";

// info(): every default section, parsed into name => value.
$info = $r->info();
check(is_array($info) && count($info) > 20, 'info() parses into fields', var_export($info, true));
foreach ($info as $name => $value) {
    if (!is_string($name) || $name === '' || !is_scalar($value)) {
        fail('info() field', var_export([$name, $value], true));
    }
}
check(count($info) > 0, 'every field of info() has a name and a scalar value');
check(($info['redis_version'] ?? null) === '7.0.0', "info()['redis_version'] is 7.0.0", var_export($info['redis_version'] ?? null, true));
check(($info['redis_mode'] ?? null) === 'standalone', "info()['redis_mode'] is standalone");
check(is_numeric($info['used_memory'] ?? null), "info()['used_memory'] is a number");
check(is_numeric($info['connected_clients'] ?? null) && $info['connected_clients'] >= 1, "info()['connected_clients'] counts this client");
check(($info['masters'] ?? null) == count($masters), "info()['masters'] is " . count($masters));
check(($info['quorum'] ?? null) == intdiv(count($masters), 2) + 1, "info()['quorum']");
check(($info['masters_up'] ?? null) == count($masters), "info()['masters_up']: all up");
check(isset($info['master0']) && str_starts_with($info['master0'], 'state=up,'), "info()['master0'] starts state=up", (string) ($info['master0'] ?? ''));

// info(section), in any case; all, everything and default are every section.
$server = $r->info('server');
check(is_array($server) && ($server['redis_version'] ?? null) === '7.0.0', "info('server') has redis_version");
check(!isset($server['connected_clients']) && !isset($server['used_memory']), "info('server') is that section only", implode(',', array_keys($server)));
check($r->info('SERVER') == $server || array_keys($r->info('SERVER')) === array_keys($server), "info('SERVER') is the same section");
check(isset($r->info('memory')['used_memory']), "info('memory') has used_memory");
check(isset($r->info('clients')['connected_clients']), "info('clients') has connected_clients");
check(isset($r->info('redlock')['quorum']), "info('redlock') has quorum");
check(array_keys($r->info('default')) === array_keys($info), "info('default') has the fields of info()");
foreach (['all', 'everything'] as $s) {
    $x = $r->info($s);
    check(array_diff(array_keys($info), array_keys($x)) === [] && isset($x['cmdstat_info']), "info('$s') has the fields of info() and the command stats");
}
// The sections the proxy has no fields of its own for are the backend's.
$r->set('phpredis-info-key', 'v');
check(isset($r->info('keyspace')['db0']), "info('keyspace') has db0", var_export($r->info('keyspace'), true));
$r->del('phpredis-info-key');
check(($r->info('replication')['role'] ?? null) === 'master', "info('replication') has role:master");
check(isset($r->info('stats')['total_commands_processed']), "info('stats') has total_commands_processed");
check(isset($r->info('persistence')['loading']), "info('persistence') has loading");
check(isset($r->info('cpu')['used_cpu_sys']), "info('cpu') has used_cpu_sys");
$x = $r->info('nosuch');
check($x === [] || $x === false, "info('nosuch') is empty", var_export($x, true));
// Several sections at once, as Redis 7 takes them.
$raw = $r->rawCommand('INFO', 'server', 'memory');
check(is_string($raw) && str_contains($raw, "# Server\r\n") && str_contains($raw, "# Memory\r\n") && !str_contains($raw, "# Clients\r\n"),
    'INFO server memory: those two sections', (string) $raw);
check($r->ping() === true, 'the connection still answers PING');

// select(0): the database every connection starts in.
check($r->select(0) === true, 'select(0) is true');
check($r->getDbNum() === 0, 'getDbNum() is 0');
$key = 'phpredis-select-' . bin2hex(random_bytes(4));
check($r->set($key, 'v') === true, 'SET after select(0)');
check($backend->get($key) === 'v', "the backend's database 0 holds it");
check($r->set("$key:lock", 'tok', ['nx', 'px' => 10000]) === true, 'SET NX PX after select(0)');
$held = 0;
foreach ($masters as $m) {
    $held += (int) ($m->get("$key:lock") === 'tok');
}
check($held >= intdiv(count($masters), 2) + 1, 'the lock is on a quorum of masters', "$held masters");
check((int) $r->del($key, "$key:lock") === 2, 'DEL of both');

// Database 1: data on the backend's database 1, locks in database 1 of
// the masters.
check($r->select(1) === true, 'select(1)');
check($r->set($key, 'w') === true, 'SET in database 1');
check($backend->get($key) === false, "the backend's database 0 does not hold it");
$backend->select(1);
check($backend->get($key) === 'w', "the backend's database 1 holds it");
$backend->select(0);
check($r->set("$key:lock", 'tok1', ['nx', 'px' => 10000]) === true, 'SET NX PX in database 1');
$held = 0;
foreach ($masters as $m) {
    $m->select(1);
    $held += (int) ($m->get("$key:lock") === 'tok1');
    $m->select(0);
}
check($held >= intdiv(count($masters), 2) + 1, 'the lock is in database 1 of a quorum of masters', "$held masters");
check((int) $r->del($key, "$key:lock") === 2, 'DEL of both in database 1');
check($r->select(0) === true, 'select(0) again is true');
check($r->get($key) === false, 'nothing of database 1 in database 0');

echo "PASS $checks checks\n";
