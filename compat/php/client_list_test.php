<?php
// phpredis's client('list') and client('info') read the proxy's own
// clients as a Redis's.
//
// REDLOCK_PROXY   host:port of the proxy
//
// Prints one line per check and exits non-zero at the first failure.

declare(strict_types=1);

error_reporting(E_ALL);
set_error_handler(function (int $no, string $msg, string $file, int $line): bool {
    throw new ErrorException($msg, 0, $no, $file, $line);
});

function check(bool $cond, string $what, string $detail = ''): void
{
    if (!$cond) {
        echo "FAIL $what" . ($detail !== '' ? ": $detail" : '') . "\n";
        exit(1);
    }
    echo "ok   $what\n";
}

[$host, $port] = explode(':', getenv('REDLOCK_PROXY'));
$a = new Redis();
$a->connect($host, (int) $port);
$b = new Redis();
$b->connect($host, (int) $port);
check($a->client('setname', 'php-one') === true, 'CLIENT SETNAME');
$b->client('setname', 'php-two');

$list = $a->client('list');
check(is_array($list), 'client(list) is an array', var_export($list, true));
$byName = [];
foreach ($list as $c) {
    $byName[$c['name'] ?? ''] = $c;
}
check(isset($byName['php-one'], $byName['php-two']), 'both clients listed', var_export($list, true));
foreach (['id', 'addr', 'laddr', 'fd', 'age', 'idle', 'flags', 'db', 'cmd', 'user', 'resp'] as $f) {
    check(array_key_exists($f, $byName['php-one']), "field $f");
}
check((string) $byName['php-one']['db'] === '0', 'db=0');
check($byName['php-one']['cmd'] === 'client|list', 'cmd=client|list', (string) $byName['php-one']['cmd']);
$info = $a->client('info');
check(is_string($info) && str_contains($info, 'name=php-one'), 'client(info)', var_export($info, true));
check($a->client('kill', $byName['php-two']['addr']) === true, 'CLIENT KILL addr');
$names = array_map(fn ($c) => $c['name'] ?? '', $a->client('list'));
check(!in_array('php-two', $names, true), 'killed client gone', implode(',', $names));
echo "done\n";
