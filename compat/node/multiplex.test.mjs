// A multiplexing client: node-redlock 5 over ONE ioredis connection to the
// proxy, with many lock operations in flight on it at once, as a Node
// process that shares its client between requests runs them. The proxy runs
// them concurrently (proxy/pipeline.go); this checks, with the real library,
// that every lock it grants lives on a quorum of masters, that locks of one
// key contended on the one connection are granted once, and that a
// pipeline's effects come in request order.
//
// REDLOCK_PROXY is the proxy ("host:port"); REDLOCK_MASTERS the masters
// (comma-separated), used only to check where the locks really are.

import { test } from "node:test";
import assert from "node:assert/strict";
import { randomBytes } from "node:crypto";

import Redlock5, { ExecutionError } from "redlock5";
import { PROXY, QUORUM, eventually, holders, ioredis, masters } from "./stack.mjs";

// The one connection every lock operation of this file goes through.
const proxy = ioredis(PROXY);

const unlockScript =
  'if redis.call("get",KEYS[1]) == ARGV[1] then return redis.call("del",KEYS[1]) else return 0 end';

function key(name) {
  return `lock:mux:${name}:${randomBytes(6).toString("hex")}`;
}

// Waits until no master holds value at k.
async function goneEverywhere(k, value, what) {
  await eventually(`${what}: ${k} gone from every master`, async () => (await holders(k, value)) === 0);
}

// INFO's count of the lock operations the proxy ran together with others
// of their connection (its concurrent path, proxy/pipeline.go).
async function pipelinedOps() {
  const info = await proxy.info("redlock");
  const m = /pipelined_lock_operations:(\d+)/.exec(info);
  assert.ok(m, `INFO redlock has no pipelined_lock_operations:\n${info}`);
  return Number(m[1]);
}

test("200 locks in flight on one connection: each granted on a quorum, then released", async () => {
  const redlock = new Redlock5([proxy], { retryCount: 0 });
  const keys = Array.from({ length: 200 }, (_, i) => key(`many${i}`));
  const before = await pipelinedOps();
  const locks = await Promise.all(keys.map((k) => redlock.acquire([k], 20000)));
  const ran = (await pipelinedOps()) - before;
  for (const [i, lock] of locks.entries()) {
    const n = await holders(keys[i], lock.value);
    assert.ok(n >= QUORUM, `${keys[i]}: held on ${n} of ${masters.length} masters`);
  }
  // They ran together, not one after another: ioredis wrote them at once,
  // and every one read while others were in flight took the concurrent path.
  assert.ok(ran >= keys.length / 2, `${ran} of ${keys.length} acquires ran together with others`);

  await Promise.all(locks.map((l) => l.release()));
  for (const [i, lock] of locks.entries()) {
    await goneEverywhere(keys[i], lock.value, "released");
  }
});

test("50 acquires of one key in flight on one connection: exactly one granted", async () => {
  const redlock = new Redlock5([proxy], { retryCount: 0 });
  const k = key("contended");
  const results = await Promise.allSettled(Array.from({ length: 50 }, () => redlock.acquire([k], 20000)));
  const won = results.filter((r) => r.status === "fulfilled");
  assert.equal(won.length, 1, `${won.length} of 50 acquires of ${k} were granted`);
  for (const r of results) {
    if (r.status === "rejected") {
      assert.ok(r.reason instanceof ExecutionError, `unexpected failure: ${r.reason}`);
    }
  }
  const lock = won[0].value;
  assert.ok((await holders(k, lock.value)) >= QUORUM, `the granted lock of ${k} is not on a quorum`);
  await lock.release();
  await goneEverywhere(k, lock.value, "released");
});

test("one pipeline: SET NX then the unlock script releases it; two SET NX grant one", async () => {
  const a = key("ordered");
  const b = key("twice");
  const replies = await proxy
    .pipeline()
    .set(a, "t1", "PX", 20000, "NX")
    .eval(unlockScript, 1, a, "t1")
    .get(a)
    .set(b, "first", "PX", 20000, "NX")
    .set(b, "second", "PX", 20000, "NX")
    .get(b)
    .pttl(b)
    .exec();
  const values = replies.map(([err, v]) => {
    assert.equal(err, null);
    return v;
  });
  assert.deepEqual(values.slice(0, 6), ["OK", 1, null, "OK", null, "first"]);
  assert.ok(values[6] > 0 && values[6] <= 20000, `PTTL of ${b} = ${values[6]}`);
  assert.ok((await holders(b, "first")) >= QUORUM, `${b} is not on a quorum`);
  assert.equal(await holders(b, "second"), 0, `the second SET NX of ${b} landed on a master`);
  await goneEverywhere(a, "t1", "unlocked in the pipeline");
  await proxy.eval(unlockScript, 1, b, "first");
});
