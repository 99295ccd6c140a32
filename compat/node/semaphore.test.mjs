// redis-semaphore's Semaphore, unmodified, with redlock-proxy as its only
// Redis: its acquire and refresh scripts run as quorum operations on the
// semaphore's sorted set, and its release (ZREM) removes the permit from
// every master. A permit is held on at least the semaphore's quorum of
// masters, floor(N·limit/(limit+1)) + 1 (2 of 3 for limit 1, 3 of 3 for
// limit 2), which keeps the semaphore to its limit; a further contender is
// refused, or waits (the library polls) until a permit is released.
//
// REDLOCK_PROXY is the proxy ("host:port"); REDLOCK_MASTERS the masters.

import { test } from "node:test";
import assert from "node:assert/strict";
import { randomBytes } from "node:crypto";
import { setTimeout as sleep } from "node:timers/promises";

import { Semaphore } from "redis-semaphore";
import { PROXY, MASTERS, eventually, ioredis, masters } from "./stack.mjs";

// The semaphore's quorum (engine.PermitQuorum).
const quorum = (limit) => Math.floor((MASTERS.length * limit) / (limit + 1)) + 1;

// A client of the proxy that records the scripts' EVALSHA failures: the
// library sends EVALSHA first and falls back to EVAL on NOSCRIPT.
const noscripts = [];
function proxyClient() {
  const c = ioredis(PROXY);
  const evalsha = c.evalsha.bind(c);
  c.evalsha = async (...args) => {
    try {
      return await evalsha(...args);
    } catch (err) {
      noscripts.push(String(err));
      throw err;
    }
  };
  return c;
}

// The number of masters on which id holds a permit of the semaphore name.
async function holders(name, id) {
  const scores = await Promise.all(masters.map((m) => m.zscore(`semaphore:${name}`, id)));
  return scores.filter((s) => s !== null).length;
}

// Waits until cond() holds (the proxy answers at quorum; the last master
// follows a moment later).

const opts = { lockTimeout: 1000, refreshInterval: 200, acquireTimeout: 500, retryInterval: 50 };

test("redis-semaphore 5.8.0 Semaphore, limit 2: two holders, a third refused or waiting, refresh, release", async () => {
  const name = `sem2:${randomBytes(6).toString("hex")}`;
  const a = new Semaphore(proxyClient(), name, 2, opts);
  const b = new Semaphore(proxyClient(), name, 2, opts);
  await a.acquire();
  await b.acquire();
  for (const s of [a, b]) {
    assert.ok((await holders(name, s.identifier)) >= quorum(2), "held on the semaphore's quorum (3 of 3)");
  }
  const c = new Semaphore(proxyClient(), name, 2, { ...opts, refreshInterval: 0, acquireTimeout: 200 });
  assert.equal(await c.tryAcquire(), false, "a third contender is refused");
  // A refused permit is taken back on the masters that took it; the last
  // of those may land a moment after the reply.
  await eventually("the refused contender leaves nothing behind", async () => (await holders(name, c.identifier)) === 0);

  await sleep(2500); // their refreshes keep them past the lock timeout
  assert.ok(a.isAcquired && b.isAcquired, "not lost");
  for (const s of [a, b]) {
    assert.ok((await holders(name, s.identifier)) >= quorum(2), "refreshed on the semaphore's quorum");
  }
  assert.equal(await c.tryAcquire(), false, "still refused");

  // A waiter polls until a permit is released.
  const waiter = new Semaphore(proxyClient(), name, 2, { ...opts, acquireTimeout: 5000 });
  const waiting = waiter.acquire();
  await sleep(300);
  assert.equal(waiter.isAcquired, false, "waits while both permits are held");
  await a.release();
  await waiting;
  assert.ok((await holders(name, waiter.identifier)) >= quorum(2), "the waiter holds a permit on the quorum");
  await eventually("the released permit gone from every master", async () => (await holders(name, a.identifier)) === 0);

  await b.release();
  await waiter.release();
  await eventually("every permit gone from every master", async () =>
    (await holders(name, b.identifier)) + (await holders(name, waiter.identifier)) === 0);
  assert.equal(await c.tryAcquire(), true, "free again");
  await c.release();
  assert.deepEqual(noscripts, [], "EVALSHA of the library's scripts works on a proxy that never saw them");
});

test("redis-semaphore 5.8.0 Semaphore, limit 1: a contender refused, then admitted after the release", async () => {
  const name = `sem1:${randomBytes(6).toString("hex")}`;
  const a = new Semaphore(proxyClient(), name, 1, opts);
  await a.acquire();
  assert.ok((await holders(name, a.identifier)) >= quorum(1), "held on a majority");
  const b = new Semaphore(proxyClient(), name, 1, { ...opts, refreshInterval: 0, acquireTimeout: 200 });
  assert.equal(await b.tryAcquire(), false, "a contender is refused");
  await sleep(1500);
  assert.ok(a.isAcquired, "kept by its refreshes");
  assert.equal(await b.tryAcquire(), false, "still refused");
  await a.release();
  await eventually("released from every master", async () => (await holders(name, a.identifier)) === 0);
  assert.equal(await b.tryAcquire(), true, "admitted after the release");
  await b.release();
});

// The library scores each permit by its client's Date.now() and prunes
// those older than now − lockTimeout, so on one Redis a client whose clock
// runs a minute ahead prunes the others' permits and is admitted beside
// them. Through the proxy each master judges expiry by its own clock, and
// the client's is not used: it is refused.
test("redis-semaphore 5.8.0 Semaphore: a client with a clock a minute ahead does not prune the holder's permit", async () => {
  const name = `semclock:${randomBytes(6).toString("hex")}`;
  const a = new Semaphore(proxyClient(), name, 1, { ...opts, lockTimeout: 10000, refreshInterval: 0 });
  await a.acquire();
  const b = new Semaphore(proxyClient(), name, 1, { ...opts, lockTimeout: 10000, refreshInterval: 0, acquireTimeout: 200 });
  const now = Date.now;
  Date.now = () => now() + 60000;
  let admitted;
  try {
    admitted = await b.tryAcquire();
  } finally {
    Date.now = now;
  }
  assert.equal(admitted, false, "refused while the holder holds the one permit");
  assert.ok((await holders(name, a.identifier)) >= quorum(1), "the holder's permit is still on a majority");
  await a.release();
});
