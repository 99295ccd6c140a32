"""Django's cache through django-redis, beside redis-py's Lock, unmodified.

The same tests run against a plain redis-server and through the proxy;
compat/python_test.go compares what the two record, line for line.

REDIS_TARGET  host:port the application talks to (the proxy, or a plain Redis)
REDIS_VOTERS  comma-separated host:port of the Redis servers that must hold
              the locks: the proxy's masters, or the plain Redis itself
REDIS_DB      the database in the cache's LOCATION
LOCK_PREFIX   empty: locks taken by the cache's own alias (cache.lock);
              else the KEY_PREFIX of a cache alias of their own for locks
              ("lock" puts them under lock:1:…, for a proxy whose
              lock_keys are ["lock:*"])
RUN           a name for this run, the same for both targets
OBSERVED      a file each test appends what it saw to, where that is the
              same on every run
"""

import os
import time

import django
import pytest
from django.conf import settings
from redis.exceptions import LockError, LockNotOwnedError

TARGET = os.environ["REDIS_TARGET"]
DB = int(os.environ.get("REDIS_DB", "0"))
LOCK_PREFIX = os.environ.get("LOCK_PREFIX", "")
RUN = os.environ["RUN"]

_location = "redis://%s/%d" % (TARGET, DB)
_caches = {
    "default": {
        "BACKEND": "django_redis.cache.RedisCache",
        "LOCATION": _location,
        "OPTIONS": {"CLIENT_CLASS": "django_redis.client.DefaultClient"},
    }
}
if LOCK_PREFIX:
    _caches["locks"] = dict(_caches["default"], KEY_PREFIX=LOCK_PREFIX)
settings.configure(CACHES=_caches)
django.setup()

from django.core.cache import caches  # noqa: E402
from django_redis import get_redis_connection  # noqa: E402

import redis  # noqa: E402

SAME_ALIAS = not LOCK_PREFIX


def _addr(s):
    host, port = s.rsplit(":", 1)
    return host, int(port)


@pytest.fixture(scope="module")
def voters():
    cs = [redis.Redis(*_addr(a), db=DB) for a in os.environ["REDIS_VOTERS"].split(",")]
    yield cs
    for c in cs:
        c.close()


@pytest.fixture
def cache():
    return caches["default"]


@pytest.fixture
def locks():
    return caches["locks" if LOCK_PREFIX else "default"]


@pytest.fixture
def k(request):
    return lambda name: "%s:%s:%s" % (RUN, request.node.name, name)


@pytest.fixture
def seen(request):
    """seen(label, value): records value, which must be the same on every run."""

    def record(label, value):
        with open(os.environ["OBSERVED"], "a") as f:
            f.write("%s %s: %r\n" % (request.node.name, label, value))
        return value

    return record


def quorum(voters):
    return len(voters) // 2 + 1


def holders(voters, key, token):
    return sum(1 for v in voters if v.get(key) == token)


def gone_everywhere(voters, key, timeout=1.5):
    deadline = time.monotonic() + timeout
    while any(v.exists(key) for v in voters):
        if time.monotonic() > deadline:
            return False
        time.sleep(0.02)
    return True


def test_database_served(cache, seen):
    # redis-py sends SELECT when it connects and raises if it is refused.
    seen("set", cache.set("probe", 1, 10))
    seen("delete", cache.delete("probe"))


def test_set_get(cache, k, seen):
    seen("set", cache.set(k("a"), "alpha", 60))
    seen("get", cache.get(k("a")))
    seen("get absent with default", cache.get(k("none"), "dflt"))
    seen("set dict", cache.set(k("d"), {"x": 1, "y": [True, None]}, 60))
    seen("get dict", cache.get(k("d")))
    seen("set int", cache.set(k("i"), 42, 60))
    seen("get int", cache.get(k("i")))
    assert 55 <= cache.ttl(k("a")) <= 60
    assert 55000 <= cache.pttl(k("a")) <= 60000
    seen("set xx present", cache.set(k("a"), "beta", 60, xx=True))
    seen("set xx absent", cache.set(k("xx"), "beta", 60, xx=True))
    seen("get after xx", (cache.get(k("a")), cache.get(k("xx"))))
    seen("set timeout 0 deletes", cache.set(k("a"), "gamma", 0))
    seen("get after timeout 0", cache.get(k("a")))
    seen("set timeout None", cache.set(k("forever"), "always", None))
    seen("ttl of it", cache.ttl(k("forever")))


def test_incr_decr(cache, k, seen):
    seen("set", cache.set(k("n"), 5, 60))
    seen("incr", cache.incr(k("n")))
    seen("incr 10", cache.incr(k("n"), 10))
    seen("decr 3", cache.decr(k("n"), 3))
    seen("get", cache.get(k("n")))
    assert 55 <= cache.ttl(k("n")) <= 60
    with pytest.raises(ValueError):
        cache.incr(k("absent"))
    seen("absent after incr", cache.has_key(k("absent")))
    seen("incr absent, ignore_key_check", cache.incr(k("absent"), ignore_key_check=True))
    seen("ttl of it", cache.ttl(k("absent")))
    # A pickled float: INCRBY fails, django-redis reads, adds and writes back.
    seen("set float", cache.set(k("f"), 1.5, 60))
    seen("incr float", cache.incr(k("f")))
    seen("get float", cache.get(k("f")))
    assert 50 <= cache.ttl(k("f")) <= 60


def test_add(cache, k, seen):
    # add is SET NX PX: through the proxy with every key a lock key, a lock
    # acquire whose value is the pickled item.
    seen("add", cache.add(k("a"), "first", 60))
    seen("add again", cache.add(k("a"), "second", 60))
    seen("get", cache.get(k("a")))
    assert 55 <= cache.ttl(k("a")) <= 60
    seen("set nx present", cache.set(k("a"), "third", 60, nx=True))
    seen("set over it", cache.set(k("a"), "fourth", 60))
    seen("get after set", cache.get(k("a")))
    seen("incr of an added int", (cache.add(k("n"), 1, 60), cache.incr(k("n"), 2), cache.get(k("n"))))
    seen("add over set", (cache.set(k("s"), "x", 60), cache.add(k("s"), "y", 60), cache.get(k("s"))))
    seen("delete", cache.delete(k("a")))
    seen("add after delete", cache.add(k("a"), "fifth", 60))
    seen("get after add", cache.get(k("a")))
    seen("add without timeout", cache.add(k("forever"), "v", None))
    seen("its ttl", cache.ttl(k("forever")))
    seen("add with timeout 0", cache.add(k("zero"), "v", 0))
    seen("has zero", cache.has_key(k("zero")))


def test_many(cache, k, seen):
    seen("set_many", cache.set_many({k("m1"): "one", k("m2"): {"two": 2}, k("m3"): 3}, 60))
    seen("get_many", sorted(cache.get_many([k("m1"), k("m2"), k("m3"), k("none")]).items()))
    assert 55 <= cache.ttl(k("m2")) <= 60
    seen("delete_many", cache.delete_many([k("m1"), k("m2"), k("none")]))
    seen("get_many after", sorted(cache.get_many([k("m1"), k("m2"), k("m3")]).items()))


def test_delete_has_key(cache, k, seen):
    seen("has_key absent", cache.has_key(k("a")))
    seen("set", cache.set(k("a"), "v", 60))
    seen("has_key", cache.has_key(k("a")))
    seen("delete", cache.delete(k("a")))
    seen("delete again", cache.delete(k("a")))
    seen("has_key after", cache.has_key(k("a")))


def test_ttl_expire_persist_touch(cache, k, seen):
    seen("set", cache.set(k("t"), "v", 60))
    seen("expire 100", cache.expire(k("t"), 100))
    assert 95 <= cache.ttl(k("t")) <= 100
    seen("persist", cache.persist(k("t")))
    seen("ttl after persist", cache.ttl(k("t")))
    seen("touch 30", cache.touch(k("t"), 30))
    assert 25 <= cache.ttl(k("t")) <= 30
    seen("touch None", cache.touch(k("t"), None))
    seen("ttl after touch None", cache.ttl(k("t")))
    seen("pexpire 50000", cache.pexpire(k("t"), 50000))
    assert 45000 <= cache.pttl(k("t")) <= 50000
    seen("expire_at", cache.expire_at(k("t"), int(time.time()) + 40))
    assert 30 <= cache.ttl(k("t")) <= 40
    seen("touch absent", cache.touch(k("none"), 10))
    seen("expire absent", cache.expire(k("none"), 10))
    seen("persist absent", cache.persist(k("none")))
    seen("ttl absent", cache.ttl(k("none")))
    seen("expire 1", cache.expire(k("t"), 1))
    time.sleep(1.5)
    seen("get after it expired", cache.get(k("t")))


def test_keys_patterns(cache, k, seen):
    for i in range(5):
        cache.set(k("pat:%d" % i), i, 60)
    cache.set(k("other"), "x", 60)
    seen("keys", sorted(cache.keys(k("pat:*"))))
    seen("iter_keys", sorted(cache.iter_keys(k("pat:*"))))
    seen("delete_pattern", cache.delete_pattern(k("pat:*")))
    seen("keys after", cache.keys(k("pat:*")))
    seen("other kept", cache.get(k("other")))


def test_lock_beside_cache(cache, locks, voters, k, seen):
    name = k("job")
    lock = locks.lock(name, timeout=10)
    key = lock.name
    seen("the lock's key ends with the name", key.endswith(name))
    seen("acquire", lock.acquire(blocking=False))
    token = lock.local.token
    assert holders(voters, key, token) >= quorum(voters)
    seen("owned", lock.owned())
    seen("locked", lock.locked())
    other = locks.lock(name, timeout=10)
    seen("second acquire while held", other.acquire(blocking=False))
    seen("blocking acquire times out", other.acquire(blocking_timeout=0.3))
    # The cache works on other keys while the lock is held.
    seen("set while held", cache.set(k("during"), "v", 60))
    seen("add while held", cache.add(k("during2"), "v", 60))
    seen("incr while held", cache.incr(k("during3"), ignore_key_check=True))
    seen("extend", lock.extend(20))
    assert sum(1 for v in voters if v.get(key) == token and v.pttl(key) > 25000) >= quorum(voters)
    seen("reacquire", lock.reacquire())
    assert sum(1 for v in voters if v.get(key) == token and 5000 < v.pttl(key) <= 10000) >= quorum(voters)
    with pytest.raises(LockNotOwnedError):
        other.do_release(token + b"x")
    seen("release", lock.release())
    assert gone_everywhere(voters, key)
    with pytest.raises(LockError):
        lock.release()
    seen("locked after release", lock.locked())
    with locks.lock(name, timeout=10) as held:
        assert holders(voters, key, held.local.token) >= quorum(voters)
        seen("context manager's second lock", locks.lock(name, timeout=10).acquire(blocking=False))
    assert gone_everywhere(voters, key)


def test_redispy_lock_on_django_connection(voters, k, seen):
    r = get_redis_connection("locks" if LOCK_PREFIX else "default")
    key = (LOCK_PREFIX + ":" if LOCK_PREFIX else "") + k("raw")
    lock = r.lock(key, timeout=10)
    seen("acquire", lock.acquire(blocking=False))
    assert holders(voters, key, lock.local.token) >= quorum(voters)
    seen("second acquire", r.lock(key, timeout=10).acquire(blocking=False))
    seen("release", lock.release())
    assert gone_everywhere(voters, key)


@pytest.mark.skipif(not SAME_ALIAS, reason="locks have an alias of their own")
def test_lock_and_cache_share_keys(cache, voters, k, seen):
    # With locks on the cache's own alias, a lock and a cache entry share
    # the keyspace, as on one Redis.
    name = k("shared")
    seen("set", cache.set(name, "data", 60))
    seen("lock refused over data", cache.lock(name, timeout=10).acquire(blocking=False))
    seen("get still data", cache.get(name))
    seen("delete", cache.delete(name))
    lock = cache.lock(name, timeout=10)
    key, token = lock.name, None
    seen("lock after delete", lock.acquire(blocking=False))
    token = lock.local.token
    assert holders(voters, key, token) >= quorum(voters)
    seen("add refused while locked", cache.add(name, "data2", 60))
    seen("has_key while locked", cache.has_key(name))
    assert 5 <= cache.ttl(name) <= 10
    seen("touch 30", cache.touch(name, 30))
    assert sum(1 for v in voters if v.get(key) == token and v.pttl(key) > 25000) >= quorum(voters)
    seen("delete of the lock's key", cache.delete(name))
    assert gone_everywhere(voters, key)
    with pytest.raises(LockNotOwnedError):
        lock.release()
    second = cache.lock(name, timeout=10)
    seen("another owner after the delete", second.acquire(blocking=False))
    assert holders(voters, key, second.local.token) >= quorum(voters)
    seen("delete_pattern of it", cache.delete_pattern(name))
    assert gone_everywhere(voters, key)
    third = cache.lock(name, timeout=10)
    seen("a third owner", third.acquire(blocking=False))
    seen("its release", third.release())
    assert gone_everywhere(voters, key)


def test_clear(cache, locks, voters, k, seen):
    # clear() is FLUSHDB; no lock is held here (see docs/clients.md).
    seen("set", cache.set(k("a"), "v", 60))
    seen("clear", cache.clear())
    seen("get after clear", cache.get(k("a")))
    # This test's keys: through the proxy a key that an earlier test's add
    # took and incr then overwrote stays taken on the quorum until its TTL,
    # and KEYS lists it (docs/clients.md).
    seen("keys after clear", cache.keys(k("*")))
    seen("set after clear", cache.set(k("b"), "w", 60))
    lock = locks.lock(k("lock"), timeout=10)
    seen("lock after clear", lock.acquire(blocking=False))
    assert holders(voters, lock.name, lock.local.token) >= quorum(voters)
    seen("release", lock.release())
