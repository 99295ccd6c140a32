<?php
// Prints, as JSON, the Lua scripts Symfony Lock's RedisStore sends, taken
// from the installed library: {"save": …, "saveRead": …, "putOffExpiration":
// …, "delete": …, "exists": …, and the same with the ".argv" suffix for the
// spelling RedisStore uses when scripts cannot call TIME}. No server is
// contacted: a \Redis subclass records each script instead of sending it.

declare(strict_types=1);

require_once '/usr/share/php/Symfony/Component/Lock/autoload.php';

use Symfony\Component\Lock\Key;
use Symfony\Component\Lock\Store\RedisStore;

class RecordingRedis extends \Redis
{
    public array $scripts = [];

    #[\ReturnTypeWillChange]
    public function eval($script, $args = [], $numKeys = 0)
    {
        $this->scripts[] = $script;
        return 1;
    }

    #[\ReturnTypeWillChange]
    public function clearLastError()
    {
        return true;
    }

    #[\ReturnTypeWillChange]
    public function getLastError()
    {
        return null;
    }
}

$out = [];
foreach (['' => true, '.argv' => false] as $suffix => $time) {
    $r = new RecordingRedis();
    $store = new RedisStore($r, 10);
    $p = new ReflectionProperty(RedisStore::class, 'supportTime');
    $p->setAccessible(true);
    $p->setValue($store, $time);
    $key = new Key('k');
    $store->save($key);
    $store->saveRead($key);
    $store->putOffExpiration($key, 5);
    $store->delete($key);
    $store->exists($key);
    foreach (['save', 'saveRead', 'putOffExpiration', 'delete', 'exists'] as $i => $op) {
        $out[$op . $suffix] = $r->scripts[$i];
    }
}
echo json_encode($out), "\n";
