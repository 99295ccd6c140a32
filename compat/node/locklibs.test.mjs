// Node lock libraries beside node-redlock, unmodified, with redlock-proxy as
// their only Redis: @sesamecare-oss/redlock (the maintained node-redlock
// fork, whose scripts SELECT a database first), redis-semaphore's Mutex
// (SET NX PX, and its own release and refresh scripts) and
// simple-redis-mutex (its waiters subscribe to a channel its release script
// publishes on) and redlock-universal (whose automatic extension sends an
// "atomic extend" that answers an array) and redis-lock (plain SET NX PX
// and DEL, with node-redis 4). Each lock is on a
// quorum of the masters while held, refused to a contender, kept alive by
// the library's extend or refresh past its first TTL, and gone from every
// master once released.
//
// REDLOCK_PROXY is the proxy ("host:port"); REDLOCK_MASTERS the masters.

import { test } from "node:test";
import assert from "node:assert/strict";
import { randomBytes } from "node:crypto";
import { setTimeout as sleep } from "node:timers/promises";

import { Redlock as SesameRedlock } from "@sesamecare-oss/redlock";
import { Mutex } from "redis-semaphore";
import { lock as srmLock, tryLock as srmTryLock } from "simple-redis-mutex";
import { createClient } from "redis6";
import { createLock as ruCreateLock, IoredisAdapter } from "redlock-universal";
import { createClient as createClient4 } from "redis";
import redisLock from "redis-lock";
import { PROXY, BACKEND, MASTERS, QUORUM, eventually, holders, ioredis, masters, track } from "./stack.mjs";

// Waits until no master holds value at any of keys.
async function goneEverywhere(keys, value, what) {
  await eventually(what, async () => {
    for (const k of keys) if ((await holders(k, value)) > 0) return false;
    return true;
  });
}
async function minPTTL(key) {
  const ttls = await Promise.all(masters.map((m) => m.pttl(key)));
  return ttls.sort((a, b) => a - b)[MASTERS.length - QUORUM];
}

test("ioredis: its ready check parses the proxy's INFO", async () => {
  // ioredis sends INFO on connect and reads it line by line (enableReadyCheck,
  // its default) before it reports "ready".
  const c = ioredis(PROXY);
  if (c.status !== "ready") await new Promise((resolve, reject) => { c.once("ready", resolve); c.once("error", reject); });
  const info = await c.info("redlock");
  assert.match(info, new RegExp(`\\r\\nquorum:${QUORUM}\\r\\n`));
});

test("@sesamecare-oss/redlock 1.4.0: acquire, contender refused, extend, release", async () => {
  const a = new SesameRedlock([ioredis(PROXY)], { retryCount: 0 });
  const b = new SesameRedlock([ioredis(PROXY)], { retryCount: 0 });
  const key = `sesame:${randomBytes(6).toString("hex")}`;
  const lock = await a.acquire([key], 2000);
  assert.ok((await holders(key, lock.value)) >= QUORUM, "held on a quorum");
  await assert.rejects(b.acquire([key], 2000), "a contender is refused");
  const extended = await lock.extend(10000);
  assert.ok((await minPTTL(key)) > 8000, "extended on a quorum");
  await sleep(2200); // past the first TTL
  assert.ok((await holders(key, extended.value)) >= QUORUM, "still held after the first TTL");
  await assert.rejects(b.acquire([key], 2000), "still refused");
  await extended.release();
  await goneEverywhere([key], extended.value, "gone from every master");
  const again = await b.acquire([key], 2000);
  await again.release();

  // Two resources at once.
  const k2 = `${key}:2`;
  const both = await a.acquire([key, k2], 5000);
  assert.ok((await holders(key, both.value)) >= QUORUM && (await holders(k2, both.value)) >= QUORUM);
  await both.release();
  await goneEverywhere([key, k2], both.value, "both gone from every master");

  // On database 1 (the library's db option, and the connection's): the
  // lock lives in database 1 of the masters, apart from database 0's.
  const db1 = new SesameRedlock([ioredis(PROXY, 1)], { retryCount: 0, db: 1 });
  const k1 = `${key}:db1`;
  const l1 = await db1.acquire([k1], 5000);
  const masters1 = MASTERS.map((a) => ioredis(a, 1));
  const on1 = await Promise.all(masters1.map((m) => m.get(k1)));
  assert.ok(on1.filter((v) => v === l1.value).length >= QUORUM, "held in database 1 of a quorum");
  assert.equal(await holders(k1, l1.value), 0, "nothing in database 0");
  const db0 = await a.acquire([k1], 5000); // the same name in database 0 is another lock
  await db0.release();
  await assert.rejects(db1.acquire([k1], 2000), "refused in database 1 while held");
  await l1.release();
  await eventually("gone from database 1", async () => (await Promise.all(masters1.map((m) => m.exists(k1)))).every((n) => n === 0));

  // A script that selects another database than its connection's is refused.
  const other = new SesameRedlock([ioredis(PROXY)], { retryCount: 0, db: 1 });
  await assert.rejects(other.acquire([`${key}:db1x`], 2000));
  const left = await Promise.all(masters1.map((m) => m.exists(`${key}:db1x`)));
  assert.deepEqual(left, MASTERS.map(() => 0), "nothing taken");
});

test("redis-semaphore 5.8.0 Mutex: acquire, contender refused, refresh, release", async () => {
  const key = `sem:${randomBytes(6).toString("hex")}`;
  const m = new Mutex(ioredis(PROXY), key, { lockTimeout: 1000, refreshInterval: 200, acquireTimeout: 500, retryInterval: 50 });
  await m.acquire();
  assert.ok((await holders(`mutex:${key}`, m.identifier)) >= QUORUM, "held on a quorum");
  const other = new Mutex(ioredis(PROXY), key, { lockTimeout: 1000, refreshInterval: 0, acquireTimeout: 200, retryInterval: 50 });
  assert.equal(await other.tryAcquire(), false, "a contender is refused");
  await sleep(2500); // its refreshes keep it past the TTL
  assert.ok(m.isAcquired, "not lost");
  assert.ok((await holders(`mutex:${key}`, m.identifier)) >= QUORUM, "refreshed on a quorum");
  assert.equal(await other.tryAcquire(), false, "still refused");
  await m.release();
  await goneEverywhere([`mutex:${key}`], m.identifier, "gone from every master");
  assert.equal(await other.tryAcquire(), true);
  await other.release();
});

// What key holds on a quorum of the masters (null if none).
async function quorumValue(key) {
  const vals = await Promise.all(masters.map((m) => m.get(key)));
  for (const v of vals) {
    if (v !== null && vals.filter((x) => x === v).length >= QUORUM) return v;
  }
  return null;
}

test("simple-redis-mutex 3.0.0: lock on a quorum, a waiter woken by the release's publish, once per release", async () => {
  const r = createClient({ url: `redis://${PROXY}`, RESP: 2 });
  r.on("error", () => {});
  track(r);
  await r.connect();
  // A subscriber straight on the backend counts the release messages.
  const watcher = createClient({ url: `redis://${BACKEND}`, RESP: 2 });
  watcher.on("error", () => {});
  track(watcher);
  await watcher.connect();
  const name = `srm-${randomBytes(6).toString("hex")}`;
  const key = `@simple-redis-mutex:lock-${name}`;
  const released = [];
  await watcher.subscribe("@simple-redis-mutex:locks-releases", (m) => {
    const msg = JSON.parse(m);
    if (msg.key === key) released.push(msg.value);
  });

  const release1 = await srmLock(r, name, { timeout: 10000 });
  const held = await quorumValue(key);
  assert.ok(held, "held on a quorum");
  const [got] = await srmTryLock(r, name, { timeout: 10000 });
  assert.equal(got, false, "tryLock by another is refused");

  // A waiter that would poll only after a minute: the publish wakes it.
  const start = Date.now();
  const waiting = srmLock(r, name, { timeout: 10000, pollingInterval: 60000 });
  await sleep(300);
  await release1();
  const release2 = await waiting;
  const waited = Date.now() - start;
  assert.ok(waited < 5000, `the waiter got the lock after ${waited} ms: not woken by the release`);
  assert.notEqual(await quorumValue(key), held, "the waiter holds it now");
  await release2();
  await release1(); // a second release of the same lock does nothing
  for (let i = 0; i < 50 && released.length < 2; i++) await sleep(20);
  await sleep(200);
  assert.equal(released.length, 2, `one message per release, got ${JSON.stringify(released)}`);
  assert.equal(released[0], held);
  assert.equal(await quorumValue(key), null, "gone after the last release");
});

test("redlock-universal 0.8.5: acquire, contender refused, extend, inspect, using() with atomic extension, release", async () => {
  const key = `ru-${randomBytes(6).toString("hex")}`;
  const a = ruCreateLock({ adapter: new IoredisAdapter(ioredis(PROXY)), key, ttl: 1000, retryAttempts: 0 });
  const b = ruCreateLock({ adapter: new IoredisAdapter(ioredis(PROXY)), key, ttl: 1000, retryAttempts: 0 });
  const handle = await a.acquire();
  assert.ok((await holders(key, handle.value)) >= QUORUM, "held on a quorum");
  await assert.rejects(b.acquire(), "a contender is refused");
  assert.equal(await a.extend(handle, 5000), true);
  assert.ok((await minPTTL(key)) > 4000, "extended on a quorum");
  const adapter = new IoredisAdapter(ioredis(PROXY));
  const seen = await adapter.inspect(key);
  assert.equal(seen.value, handle.value);
  assert.ok(seen.ttl > 4000 && seen.ttl <= 5000, `inspect ttl ${seen.ttl}`);
  // The atomic extend at the wire: refused below the least TTL asked,
  // done above it, refused to another value, -2 for a missing key.
  const low = await adapter.atomicExtend(key, handle.value, 60000, 5000);
  assert.equal(low.resultCode, 0);
  const ok = await adapter.atomicExtend(key, handle.value, 1000, 8000);
  assert.equal(ok.resultCode, 1);
  assert.ok((await minPTTL(key)) > 7000, "the atomic extend reached a quorum");
  const other = await adapter.atomicExtend(key, "not-the-holder", 1000, 8000);
  assert.equal(other.resultCode, -1);
  const gone = await adapter.atomicExtend(`${key}:none`, "v", 1000, 8000);
  assert.equal(gone.resultCode, -1);
  assert.equal(gone.actualTTL, -2);
  assert.equal(await a.release(handle), true);
  await goneEverywhere([key], handle.value, "gone from every master");
  assert.equal(await adapter.inspect(key), null);

  // using(): the routine outlives the 1 s TTL; the automatic (atomic)
  // extension keeps the lock on a quorum and others out.
  const key2 = `${key}:using`;
  const c = ruCreateLock({ adapter: new IoredisAdapter(ioredis(PROXY)), key: key2, ttl: 1000, retryAttempts: 0 });
  const d = ruCreateLock({ adapter: new IoredisAdapter(ioredis(PROXY)), key: key2, ttl: 1000, retryAttempts: 0 });
  const result = await c.using(async (signal) => {
    await sleep(2500);
    assert.equal(signal.aborted, false, "the extension did not fail");
    await assert.rejects(d.acquire(), "still refused past the first TTL");
    const v = await quorumValue(key2);
    assert.ok(v, "still held on a quorum");
    return "done";
  });
  assert.equal(result, "done");
  assert.equal(await quorumValue(key2), null, "released after using()");
});

test("redis-lock 1.0.0: held on a quorum, a contender waits until done(), then takes it", async () => {
  const c1 = createClient4({ url: `redis://${PROXY}` });
  const c2 = createClient4({ url: `redis://${PROXY}` });
  track(c1, c2);
  await c1.connect();
  await c2.connect();
  const lockA = redisLock(c1, 20);
  const lockB = redisLock(c2, 20);
  const name = `redis-lock-${randomBytes(6).toString("hex")}`;
  const key = `lock.${name}`;
  const doneA = await lockA(name, 5000);
  const value = await c1.get(key);
  assert.ok(value, "the lock's value reads through the proxy");
  assert.ok((await holders(key, value)) >= QUORUM, "held on a quorum");
  let bHolds = false;
  const waiting = lockB(name, 5000).then((done) => {
    bHolds = true;
    return done;
  });
  await sleep(300);
  assert.equal(bHolds, false, "a contender waits while the lock is held");
  await doneA();
  await goneEverywhere([key], value, "released on every master");
  const doneB = await waiting;
  const valueB = await c2.get(key);
  assert.ok((await holders(key, valueB)) >= QUORUM, "the contender holds it on a quorum");
  await doneB();
  await goneEverywhere([key], valueB, "gone from every master");
});
