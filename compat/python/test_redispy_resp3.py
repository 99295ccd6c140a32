"""redis-py 6 with protocol=3, unmodified, through the proxy.

Each reply is compared, type for type, with what a plain redis-server
(REDIS_PLAIN) answers to the same commands; the lock lives on a quorum of
the masters (REDLOCK_MASTERS). Every key is a lock key in this stack
(proxy.lock_keys = ["*"]), so GET, SET, PTTL, EXISTS and DEL run on the
quorum while hashes, sets and sorted sets pass through.
"""

import os
import uuid

import pytest
import redis
from redis.lock import Lock

QUORUM = 2


def _addr(s):
    host, port = s.rsplit(":", 1)
    return host, int(port)


def client(env, **kw):
    host, port = _addr(os.environ[env])
    return redis.Redis(host=host, port=port, protocol=3, **kw)


def masters():
    out = []
    for a in os.environ["REDLOCK_MASTERS"].split(","):
        host, port = _addr(a)
        out.append(redis.Redis(host=host, port=port))
    return out


def holders(key, value):
    return sum(1 for m in masters() if m.get(key) == value)


def test_version_speaks_resp3():
    assert redis.__version__.split(".")[0] >= "5", redis.__version__
    for env in ("REDLOCK_PROXY", "REDIS_PLAIN"):
        hello = client(env).execute_command("HELLO", "3")
        assert hello[b"proto"] == 3, (env, hello)
    p, r = client("REDLOCK_PROXY").execute_command("HELLO", "3"), client("REDIS_PLAIN").execute_command("HELLO", "3")
    assert sorted(p) == sorted(r)
    assert {k: type(v) for k, v in p.items()} == {k: type(v) for k, v in r.items()}


def run_all(c, k):
    out = []
    cmds = [
        ("SET", k + ":s", "v"),
        ("GET", k + ":s"),
        ("GET", k + ":missing"),
        ("SET", k + ":s", "w", "NX", "PX", "10000"),
        ("PTTL", k + ":missing"),
        ("EXISTS", k + ":s", k + ":missing"),
        ("HSET", k + ":h", "a", "1", "b", "2"),
        ("HGETALL", k + ":h"),
        ("HGETALL", k + ":missing"),
        ("HGET", k + ":h", "zz"),
        ("SADD", k + ":set", "x", "y"),
        ("SMEMBERS", k + ":set"),
        ("ZADD", k + ":z", "1.5", "m"),
        ("ZSCORE", k + ":z", "m"),
        ("ZSCORE", k + ":z", "nope"),
        ("ZRANGE", k + ":z", "0", "-1", "WITHSCORES"),
        ("INCRBYFLOAT", k + ":f", "2.5"),
        ("CONFIG", "GET", "maxmemory-policy"),
        ("RPUSH", k + ":l", "a", "b"),
        ("LRANGE", k + ":l", "0", "-1"),
        ("DEL", k + ":s"),
        ("GET", k + ":s"),
        ("PING",),
        ("ECHO", "hi"),
    ]
    for cmd in cmds:
        try:
            out.append((cmd[0], c.execute_command(*cmd)))
        except redis.ResponseError as e:
            out.append((cmd[0], "error: " + str(e).split(" ")[0]))
    return out


def test_replies_type_for_type():
    k = "resp3:" + uuid.uuid4().hex
    got = run_all(client("REDLOCK_PROXY"), k)
    want = run_all(client("REDIS_PLAIN"), k)
    for (name, g), (_, w) in zip(got, want):
        assert type(g) is type(w), (name, g, w)
        assert g == w, (name, g, w)


def test_lock_in_resp3():
    r = client("REDLOCK_PROXY")
    name = "resp3:lock:" + uuid.uuid4().hex
    a = Lock(r, name, timeout=10)
    assert a.acquire(blocking=False)
    token = a.local.token
    assert holders(name, token) >= QUORUM
    b = Lock(r, name, timeout=10)
    assert not b.acquire(blocking=False)
    assert a.extend(20)
    assert all(m.pttl(name) > 15000 for m in masters() if m.get(name) == token)
    a.release()
    assert holders(name, token) == 0
    assert b.acquire(blocking=False)
    b.release()


def test_info_parses_in_resp3():
    r = client("REDLOCK_PROXY")
    for section in (None, "all", "redlock"):
        assert (r.info(section) if section else r.info()), section
    assert r.info("redlock")["quorum"] == QUORUM


def test_pubsub_in_resp3():
    p = client("REDLOCK_PROXY").pubsub()
    p.subscribe("resp3:ch")
    m = p.get_message(timeout=5)
    assert m and m["type"] == "subscribe", m
    publishers = [client("REDLOCK_PROXY"), client("REDLOCK_BACKEND")]
    for i, pub in enumerate(publishers):
        assert pub.publish("resp3:ch", "m%d" % i) == 1
        m = p.get_message(timeout=5)
        assert m and m["type"] == "message" and m["data"] == b"m%d" % i, m
    p.unsubscribe("resp3:ch")
    m = p.get_message(timeout=5)
    assert m and m["type"] == "unsubscribe", m
    p.close()


if __name__ == "__main__":
    raise SystemExit(pytest.main([__file__]))
