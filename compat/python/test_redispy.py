"""redis-py's Lock, unmodified, through the proxy.

The application side talks only to the proxy (REDLOCK_PROXY). Direct
connections to the masters (REDLOCK_MASTERS) are used only to check that the
lock really lives on a quorum of them.
"""

import os
import threading
import time
import uuid

import pytest
import redis
from redis.exceptions import LockError, LockNotOwnedError
from redis.lock import Lock

QUORUM = 2


def _addr(s):
    host, port = s.rsplit(":", 1)
    return host, int(port)


def proxy_client():
    host, port = _addr(os.environ["REDLOCK_PROXY"])
    return redis.Redis(host=host, port=port)


@pytest.fixture
def r():
    c = proxy_client()
    yield c
    c.close()


@pytest.fixture
def r2():
    c = proxy_client()
    yield c
    c.close()


@pytest.fixture(scope="module")
def masters():
    cs = []
    for a in os.environ["REDLOCK_MASTERS"].split(","):
        host, port = _addr(a)
        cs.append(redis.Redis(host=host, port=port))
    assert len(cs) == 3
    yield cs
    for c in cs:
        c.close()


@pytest.fixture
def name(request):
    return "redispy:%s:%s" % (request.node.name, uuid.uuid4().hex)


def holders(masters, key, token):
    return sum(1 for m in masters if m.get(key) == token)


def values(masters, key):
    return [m.get(key) for m in masters]


def eventually(pred, timeout=1.0, step=0.02):
    deadline = time.monotonic() + timeout
    while True:
        if pred():
            return True
        if time.monotonic() > deadline:
            return False
        time.sleep(step)


def assert_gone_everywhere(masters, key):
    assert eventually(lambda: all(m.exists(key) == 0 for m in masters)), (
        "key still on a master: %r" % values(masters, key)
    )


def test_acquire_nonblocking_on_quorum(r, masters, name):
    lock = r.lock(name, timeout=10)
    assert lock.acquire(blocking=False) is True
    token = lock.local.token
    assert isinstance(token, bytes) and token
    assert holders(masters, name, token) >= QUORUM
    # The slowest master receives the SET too.
    assert eventually(lambda: holders(masters, name, token) == 3)
    assert r.get(name) == token
    pttl = r.pttl(name)
    assert 9000 < pttl <= 10000
    for m in masters:
        assert 9000 < m.pttl(name) <= 10000
    lock.release()


def test_second_client_refused(r, r2, masters, name):
    first = r.lock(name, timeout=10)
    assert first.acquire(blocking=False) is True
    token = first.local.token

    second = r2.lock(name, timeout=10)
    assert second.acquire(blocking=False) is False
    assert second.local.token is None
    assert second.owned() is False
    assert second.locked() is True

    # The first holder is untouched, and the refused attempt left nothing.
    assert r2.get(name) == token
    assert eventually(lambda: holders(masters, name, token) == 3)
    assert all(v == token for v in values(masters, name))
    first.release()
    assert_gone_everywhere(masters, name)


def test_blocking_timeout_gives_up(r, r2, masters, name):
    holder = r.lock(name, timeout=30)
    assert holder.acquire(blocking=False) is True

    waiter = r2.lock(name, timeout=10, sleep=0.1, blocking_timeout=1.0)
    t0 = time.monotonic()
    assert waiter.acquire() is False
    elapsed = time.monotonic() - t0
    assert 0.8 <= elapsed < 2.5, elapsed
    assert waiter.local.token is None

    # Explicit arguments to acquire() behave the same way.
    t0 = time.monotonic()
    assert waiter.acquire(blocking=True, blocking_timeout=0.5) is False
    elapsed = time.monotonic() - t0
    assert 0.3 <= elapsed < 2.0, elapsed

    assert holders(masters, name, holder.local.token) >= QUORUM
    holder.release()


def test_blocking_acquire_gets_lock_once_released(r, r2, masters, name):
    # The token must be visible to the timer thread that releases it.
    holder = r.lock(name, timeout=30, thread_local=False)
    assert holder.acquire(blocking=False) is True
    timer = threading.Timer(0.5, holder.release)
    timer.start()
    try:
        waiter = r2.lock(name, timeout=10, sleep=0.05, blocking_timeout=5)
        t0 = time.monotonic()
        assert waiter.acquire() is True
        elapsed = time.monotonic() - t0
        assert 0.4 <= elapsed < 3.0, elapsed
    finally:
        timer.join()
    assert holders(masters, name, waiter.local.token) >= QUORUM
    waiter.release()
    assert_gone_everywhere(masters, name)


def test_release_removes_key_from_every_master(r, masters, name):
    lock = r.lock(name, timeout=10)
    assert lock.acquire(blocking=False) is True
    token = lock.local.token
    assert eventually(lambda: holders(masters, name, token) == 3)
    lock.release()
    assert lock.local.token is None
    # A quorum has deleted it by the time the proxy answers.
    assert sum(1 for m in masters if m.exists(name) == 0) >= QUORUM
    assert_gone_everywhere(masters, name)
    assert r.get(name) is None
    assert r.exists(name) == 0
    assert lock.locked() is False
    # Releasing twice is a client-side error.
    with pytest.raises(LockError):
        lock.release()


def test_release_not_owned_raises(r, r2, masters, name):
    # The key was removed behind the holder's back.
    lock = r.lock(name, timeout=10)
    assert lock.acquire(blocking=False) is True
    assert r.delete(name) == 1
    assert_gone_everywhere(masters, name)
    with pytest.raises(LockNotOwnedError):
        lock.release()

    # The key holds another client's token: release must refuse and leave it.
    a = r.lock(name, timeout=10)
    assert a.acquire(blocking=False) is True
    a_token = a.local.token
    assert r.delete(name) == 1
    b = r2.lock(name, timeout=10)
    assert b.acquire(blocking=False) is True
    b_token = b.local.token
    assert b_token != a_token
    with pytest.raises(LockNotOwnedError):
        a.release()
    assert r2.get(name) == b_token
    assert eventually(lambda: holders(masters, name, b_token) == 3)
    assert b.owned() is True
    b.release()
    assert_gone_everywhere(masters, name)


def test_extend_additive(r, masters, name):
    lock = r.lock(name, timeout=10)
    assert lock.acquire(blocking=False) is True
    token = lock.local.token
    assert eventually(lambda: holders(masters, name, token) == 3)
    before = r.pttl(name)
    assert 9000 < before <= 10000
    assert lock.extend(5) is True
    after = r.pttl(name)
    # The 5 s are added to what was left: about 15 s now.
    assert 14000 < after <= 15000, after
    assert after > before + 4000
    for m in masters:
        assert m.get(name) == token
        assert 14000 < m.pttl(name) <= 15000, values(masters, name)
    # Fractions of a second are milliseconds.
    assert lock.extend(0.5) is True
    after2 = r.pttl(name)
    assert 14400 < after2 <= 15500, after2
    lock.release()
    assert_gone_everywhere(masters, name)


def test_extend_replace_ttl(r, masters, name):
    lock = r.lock(name, timeout=10)
    assert lock.acquire(blocking=False) is True
    token = lock.local.token
    assert eventually(lambda: holders(masters, name, token) == 3)
    assert lock.extend(3, replace_ttl=True) is True
    pttl = r.pttl(name)
    assert 2500 < pttl <= 3000, pttl
    # The reply comes once a quorum extended it; the last master's write
    # may land a moment later, as the acquire's does.
    for m in masters:
        assert m.get(name) == token
        assert eventually(lambda: 2000 < m.pttl(name) <= 3000), m.pttl(name)
    # Replace can also lengthen it.
    assert lock.extend(20, replace_ttl=True) is True
    pttl = r.pttl(name)
    assert 19500 < pttl <= 20000, pttl
    for m in masters:
        assert eventually(lambda: 19000 < m.pttl(name) <= 20000), m.pttl(name)
    assert r.ttl(name) in (19, 20)
    lock.release()
    assert_gone_everywhere(masters, name)


def test_extend_replace_ttl_zero_ends_lock(r, r2, masters, name):
    # Replacing the TTL with 0 is PEXPIRE 0 in redis-py's script: the key
    # expires at once and extend answers True. It must not become a lock
    # without expiry.
    lock = r.lock(name, timeout=10)
    assert lock.acquire(blocking=False) is True
    token = lock.local.token
    assert eventually(lambda: holders(masters, name, token) == 3)
    assert lock.extend(0, replace_ttl=True) is True
    assert r.pttl(name) != -1, "lock now has no expiry"
    assert_gone_everywhere(masters, name)
    assert lock.locked() is False
    assert r2.lock(name, timeout=10).acquire(blocking=False) is True


def test_extend_errors(r, r2, masters, name):
    # Client-side checks redis-py documents.
    lock = r.lock(name, timeout=10)
    with pytest.raises(LockError):
        lock.extend(1)
    no_timeout = r.lock(name + ":nt")
    assert no_timeout.acquire(blocking=False) is True
    with pytest.raises(LockError):
        no_timeout.extend(1)
    no_timeout.release()
    assert_gone_everywhere(masters, name + ":nt")

    # A lock that has been lost cannot be extended, and must not be recreated.
    assert lock.acquire(blocking=False) is True
    assert r.delete(name) == 1
    with pytest.raises(LockNotOwnedError):
        lock.extend(5)
    with pytest.raises(LockNotOwnedError):
        lock.extend(5, replace_ttl=True)
    assert r.exists(name) == 0
    assert all(v is None for v in values(masters, name))

    # Nor can one held by somebody else; its TTL stays as it was.
    other = r2.lock(name, timeout=10)
    assert other.acquire(blocking=False) is True
    with pytest.raises(LockNotOwnedError):
        lock.extend(100)
    with pytest.raises(LockNotOwnedError):
        lock.extend(100, replace_ttl=True)
    assert r.pttl(name) <= 10000
    for m in masters:
        assert m.pttl(name) <= 10000
    assert r.get(name) == other.local.token
    other.release()


def test_extend_key_without_ttl_refused(r, masters, name):
    # redis-py's extend answers 0 (LockNotOwnedError) when the key has no TTL,
    # whether adding or replacing, and leaves the key without expiry.
    lock = r.lock(name, timeout=10)
    assert lock.acquire(blocking=False) is True
    token = lock.local.token
    assert eventually(lambda: holders(masters, name, token) == 3)
    assert r.persist(name) is True
    assert r.pttl(name) == -1
    with pytest.raises(LockNotOwnedError):
        lock.extend(5)
    assert r.pttl(name) == -1
    with pytest.raises(LockNotOwnedError):
        lock.extend(5, replace_ttl=True)
    assert r.pttl(name) == -1
    for m in masters:
        assert m.pttl(name) == -1
    assert lock.owned() is True
    lock.release()
    assert_gone_everywhere(masters, name)


def test_reacquire(r, r2, masters, name):
    lock = r.lock(name, timeout=5)
    assert lock.acquire(blocking=False) is True
    token = lock.local.token
    time.sleep(1.0)
    before = r.pttl(name)
    assert before < 4200, before
    assert lock.reacquire() is True
    after = r.pttl(name)
    assert 4500 < after <= 5000, after
    assert eventually(lambda: holders(masters, name, token) == 3)
    for m in masters:
        assert 4500 < m.pttl(name) <= 5000
    # Lost lock: reacquire refuses.
    assert r.delete(name) == 1
    with pytest.raises(LockNotOwnedError):
        lock.reacquire()
    assert r.exists(name) == 0
    # Client-side checks.
    with pytest.raises(LockError):
        r.lock(name, timeout=5).reacquire()
    nt = r2.lock(name)
    assert nt.acquire(blocking=False) is True
    with pytest.raises(LockError):
        nt.reacquire()
    nt.release()
    assert_gone_everywhere(masters, name)


def test_locked_and_owned(r, r2, masters, name):
    mine = r.lock(name, timeout=10)
    theirs = r2.lock(name, timeout=10)
    assert mine.locked() is False
    assert mine.owned() is False
    assert theirs.locked() is False

    assert mine.acquire(blocking=False) is True
    assert mine.locked() is True
    assert mine.owned() is True
    assert theirs.locked() is True
    assert theirs.owned() is False

    mine.release()
    assert mine.locked() is False
    assert mine.owned() is False
    assert theirs.locked() is False

    assert theirs.acquire(blocking=False) is True
    assert mine.locked() is True
    assert mine.owned() is False
    assert theirs.owned() is True
    theirs.release()
    assert_gone_everywhere(masters, name)


def test_expiry_then_taken_by_another(r, r2, masters, name):
    a = r.lock(name, timeout=0.5)
    assert a.acquire(blocking=False) is True
    a_token = a.local.token
    pttl = r.pttl(name)
    assert 0 < pttl <= 500
    b = r2.lock(name, timeout=10)
    assert b.acquire(blocking=False) is False

    assert eventually(lambda: a.locked() is False, timeout=2.0)
    assert all(v is None for v in values(masters, name))
    assert a.owned() is False

    assert b.acquire(blocking=False) is True
    b_token = b.local.token
    assert b_token != a_token
    assert holders(masters, name, b_token) >= QUORUM
    assert b.owned() is True

    # The former holder can neither extend nor release the new holder's lock.
    with pytest.raises(LockNotOwnedError):
        a.extend(10)
    with pytest.raises(LockNotOwnedError):
        a.reacquire()
    with pytest.raises(LockNotOwnedError):
        a.release()
    assert r.get(name) == b_token
    assert eventually(lambda: holders(masters, name, b_token) == 3)
    assert 9000 < r.pttl(name) <= 10000
    b.release()
    assert_gone_everywhere(masters, name)


def test_context_manager(r, r2, masters, name):
    with r.lock(name, timeout=10) as lock:
        token = lock.local.token
        assert token
        assert holders(masters, name, token) >= QUORUM
        assert lock.owned() is True
        assert r2.lock(name, timeout=10).acquire(blocking=False) is False
    assert_gone_everywhere(masters, name)
    assert r.get(name) is None

    # A context manager that cannot acquire raises LockError and leaves the
    # holder alone.
    holder = r2.lock(name, timeout=10)
    assert holder.acquire(blocking=False) is True
    t0 = time.monotonic()
    with pytest.raises(LockError):
        with r.lock(name, timeout=10, blocking_timeout=0.3):
            pytest.fail("entered a lock held by another client")
    assert time.monotonic() - t0 < 2.0
    assert r.get(name) == holder.local.token
    holder.release()

    # The lock is released when the block raises.
    with pytest.raises(RuntimeError):
        with r.lock(name, timeout=10):
            assert r.get(name) is not None
            raise RuntimeError("boom")
    assert_gone_everywhere(masters, name)


def test_thread_local_false(r, masters, name):
    lock = r.lock(name, timeout=10, thread_local=False)
    assert lock.acquire(blocking=False) is True
    token = lock.local.token
    seen = {}

    def worker():
        try:
            seen["owned"] = lock.owned()
            seen["extend"] = lock.extend(5)
            seen["pttl"] = r.pttl(name)
            lock.release()
            seen["released"] = True
        except Exception as e:  # reported below
            seen["error"] = e

    t = threading.Thread(target=worker)
    t.start()
    t.join(10)
    assert "error" not in seen, seen.get("error")
    assert seen["owned"] is True
    assert seen["extend"] is True
    assert 14000 < seen["pttl"] <= 15000
    assert seen["released"] is True
    assert lock.local.token is None
    assert token is not None
    assert_gone_everywhere(masters, name)


def test_thread_local_true_hides_token(r, masters, name):
    lock = r.lock(name, timeout=10)
    assert lock.acquire(blocking=False) is True
    seen = {}

    def worker():
        seen["token"] = getattr(lock.local, "token", None)

    t = threading.Thread(target=worker)
    t.start()
    t.join(10)
    assert "token" in seen
    assert seen["token"] is None
    assert lock.owned() is True
    assert holders(masters, name, lock.local.token) >= QUORUM
    lock.release()
    assert_gone_everywhere(masters, name)


def test_lock_without_timeout(r, masters, name):
    lock = r.lock(name)
    assert lock.acquire(blocking=False) is True
    token = lock.local.token
    assert eventually(lambda: holders(masters, name, token) == 3)
    assert r.pttl(name) == -1
    for m in masters:
        assert m.pttl(name) == -1
    assert r.lock(name).acquire(blocking=False) is False
    lock.release()
    assert_gone_everywhere(masters, name)


def test_only_one_of_many_contenders_wins(masters, name):
    n = 8
    clients = [proxy_client() for _ in range(n)]
    locks = [c.lock(name, timeout=10, thread_local=False) for c in clients]
    barrier = threading.Barrier(n)
    results = [None] * n

    def go(i):
        barrier.wait()
        results[i] = locks[i].acquire(blocking=False)

    threads = [threading.Thread(target=go, args=(i,)) for i in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(10)
    try:
        assert results.count(True) == 1, results
        winner = locks[results.index(True)]
        token = winner.local.token
        assert clients[0].get(name) == token
        # Losers' tokens are cleaned up: eventually every master holds the
        # winner's token or nothing, and a quorum holds the winner's.
        assert eventually(
            lambda: all(v in (token, None) for v in values(masters, name)), timeout=2.0
        ), values(masters, name)
        assert holders(masters, name, token) >= QUORUM
        winner.release()
        assert_gone_everywhere(masters, name)
    finally:
        for c in clients:
            c.close()


def test_evalsha_noscript_fallback_on_fresh_client(masters, name):
    # Forget every script the proxy has been sent, then let a brand-new
    # client's Lock run its first release and extend by EVALSHA. The proxy
    # knows redis-py's scripts by their SHA1 even so (as a restarted proxy
    # would), and SCRIPT EXISTS says so; an unknown script still gets
    # NOSCRIPT, which redis-py answers by loading it.
    r = proxy_client()
    try:
        r.script_flush()
        lock = r.lock(name, timeout=10)
        shas = [Lock.lua_release.sha, Lock.lua_extend.sha, Lock.lua_reacquire.sha]
        assert r.script_exists(*shas) == [True, True, True]
        unknown = r.register_script("return 'not a lock script'")
        assert r.script_exists(unknown.sha) == [False]
        assert unknown() == b"not a lock script"
        assert r.script_exists(unknown.sha) == [True]

        assert lock.acquire(blocking=False) is True
        token = lock.local.token
        assert lock.extend(5) is True
        assert 14000 < r.pttl(name) <= 15000
        assert lock.reacquire() is True
        assert 9000 < r.pttl(name) <= 10000
        assert r.script_exists(*shas)[1:] == [True, True]
        assert holders(masters, name, token) >= QUORUM
        lock.release()
        assert r.script_exists(*shas) == [True, True, True]
        assert_gone_everywhere(masters, name)

        # A second brand-new connection finds them already known.
        r3 = proxy_client()
        try:
            lock = r3.lock(name, timeout=10)
            assert lock.acquire(blocking=False) is True
            assert lock.extend(1, replace_ttl=True) is True
            assert 500 < r3.pttl(name) <= 1000
            lock.release()
            assert_gone_everywhere(masters, name)
        finally:
            r3.close()

        # The release runs on the quorum, not on one backend: the masters do
        # not need the script loaded.
        r.script_flush()
        lock = r.lock(name, timeout=10)
        assert lock.acquire(blocking=False) is True
        for m in masters:
            m.script_flush()
        lock.release()
        assert_gone_everywhere(masters, name)
    finally:
        r.close()


def test_info_parses(r, masters):
    # redis-py's INFO parser reads every line of every section the proxy
    # answers; a value with both "," and "=" must be "k=v" pairs.
    for section in (None, "all", "redlock", "server"):
        info = r.info(section) if section else r.info()
        assert info, section
    info = r.info("redlock")
    assert info["masters"] == len(masters)
    assert info["quorum"] == QUORUM
    assert isinstance(info["settings"], dict) and info["settings"]["quorum"] == QUORUM
    assert info["master0"]["state"] == "up"


def test_client_list_parses(r, r2):
    # redis-py's client_list() and client_info() read the proxy's own
    # clients as a Redis's: one dict per connection, with Redis's fields.
    r.client_setname("py-one")
    r2.client_setname("py-two")
    clients = {c["name"]: c for c in r.client_list()}
    assert {"py-one", "py-two"} <= set(clients)
    for c in (clients["py-one"], clients["py-two"]):
        for field in ("id", "addr", "laddr", "fd", "age", "idle", "flags", "db", "cmd", "user", "resp"):
            assert field in c, field
        assert c["db"] == "0"
    me = r.client_info()
    assert me["name"] == "py-one"
    assert int(me["id"]) == r.client_id()
    assert me["cmd"] == "client|info"
    assert [c["name"] for c in r.client_list(client_id=[str(r2.client_id())])] == ["py-two"]
    # CLIENT KILL of the other connection by its id.
    assert r.client_kill_filter(_id=r2.client_id()) == 1
    assert "py-two" not in {c["name"] for c in r.client_list()}
