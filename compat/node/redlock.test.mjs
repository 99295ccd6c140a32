// node-redlock v4 and v5, unmodified, with redlock-proxy as their only Redis
// client: the library's own quorum is then 1, and the proxy must make every
// lock it grants live on a quorum of the masters behind it.
//
// REDLOCK_PROXY is the proxy ("host:port"); REDLOCK_MASTERS the masters
// (comma-separated), used only to check where the locks really are.

import { test, describe } from "node:test";
import assert from "node:assert/strict";
import { createHash, randomBytes } from "node:crypto";
import { setTimeout as sleep } from "node:timers/promises";

import Redlock4 from "redlock4";
import Redlock5, { ExecutionError } from "redlock5";
import IORedis4 from "ioredis4";
import IORedis5 from "ioredis";
import { PROXY, QUORUM, addr, masters, track } from "./stack.mjs";

const clientOptions = {
  maxRetriesPerRequest: 1,
  enableOfflineQueue: true,
  retryStrategy: () => null,
};

// A description of a command that does not reproduce script text: the SHA1
// and size of an EVAL body stand in for it.
function describeCommand(name, args) {
  const a = args.map((x) => (Buffer.isBuffer(x) ? x.toString() : String(x)));
  if (name === "eval" && a.length > 0) {
    const sha = createHash("sha1").update(a[0]).digest("hex");
    a[0] = `<script sha1=${sha} bytes=${a[0].length}>`;
  }
  return `${name.toUpperCase()} ${a.join(" ")}`;
}

// A client of the proxy whose EVAL/EVALSHA commands and replies are recorded
// in trace, so that a failure shows what the library sent and what the proxy
// answered.
const traceMark = Symbol("traced");

function proxyClient(IORedis, trace) {
  const c = new IORedis({ ...addr(PROXY), ...clientOptions });
  const send = c.sendCommand.bind(c);
  c.sendCommand = (command, stream) => {
    const r = send(command, stream);
    const name = String(command.name).toLowerCase();
    // A command sent before the connection is ready passes here twice: once
    // into the offline queue and once when the queue is flushed.
    if ((name === "eval" || name === "evalsha") && !command[traceMark]) {
      command[traceMark] = true;
      const line = describeCommand(name, command.args);
      command.promise.then(
        (reply) => trace.push(`${line} -> ${JSON.stringify(reply)}`),
        (err) => trace.push(`${line} -> error ${err.message}`),
      );
    }
    return r;
  };
  track(c);
  return c;
}

function uniqueKey(version, name) {
  return `lock:node:${version}:${name}:${randomBytes(6).toString("hex")}`;
}

// Values and PTTLs of key on every master.
async function onMasters(key) {
  return Promise.all(
    masters.map(async (m) => ({ value: await m.get(key), pttl: await m.pttl(key) })),
  );
}

async function holders(key, value) {
  return (await onMasters(key)).filter((s) => s.value === value).length;
}

async function assertQuorum(key, value, what) {
  const state = await onMasters(key);
  const n = state.filter((s) => s.value === value).length;
  assert.ok(
    n >= QUORUM,
    `${what}: ${key} holds the token on ${n} of ${masters.length} masters, want >= ${QUORUM}; masters: ${JSON.stringify(state)}`,
  );
}

// Waits up to ms for key to be gone from every master.
async function assertGoneEverywhere(key, what, ms = 1000) {
  const deadline = Date.now() + ms;
  let state;
  for (;;) {
    state = await onMasters(key);
    if (state.every((s) => s.value === null)) return;
    if (Date.now() > deadline) break;
    await sleep(50);
  }
  assert.fail(`${what}: ${key} is still on a master after ${ms}ms: ${JSON.stringify(state)}`);
}

// Runs fn with a trace of the library's scripts; the trace is printed when
// fn fails.
async function traced(t, fn) {
  const trace = [];
  try {
    await fn(trace);
  } catch (err) {
    t.diagnostic("library <-> proxy, in reply order:");
    for (const line of trace) t.diagnostic("  " + line);
    throw err;
  }
}

const TIMEOUT = { timeout: 30000 };

// ---------------------------------------------------------------------------
// redlock 4.2.0 with ioredis 4

describe("redlock 4.2.0 (ioredis 4)", () => {
  const V = "v4";
  const redlock = (trace, opts = {}) =>
    new Redlock4([proxyClient(IORedis4, trace)], { retryCount: 0, retryDelay: 50, retryJitter: 10, ...opts });

  test("acquire puts the token on a quorum of masters", TIMEOUT, async (t) => {
    await traced(t, async (trace) => {
      const key = uniqueKey(V, "acquire");
      const lock = await redlock(trace).lock(key, 10000);
      assert.equal(typeof lock.value, "string");
      assert.ok(lock.expiration > Date.now(), "lock already expired");
      await assertQuorum(key, lock.value, "after acquire");
      await lock.unlock();
    });
  });

  test("a second Redlock cannot take a held resource", TIMEOUT, async (t) => {
    await traced(t, async (trace) => {
      const key = uniqueKey(V, "contend");
      const lock = await redlock(trace).lock(key, 10000);
      await assertQuorum(key, lock.value, "after acquire");
      await assert.rejects(redlock(trace, { retryCount: 1 }).lock(key, 10000), (err) => {
        assert.equal(err.name, "LockError");
        return true;
      });
      // The holder is untouched on the masters.
      await assertQuorum(key, lock.value, "after the failed second acquire");
      await lock.unlock();
    });
  });

  test("extend renews the TTL on the masters", TIMEOUT, async (t) => {
    await traced(t, async (trace) => {
      const key = uniqueKey(V, "extend");
      const lock = await redlock(trace).lock(key, 2000);
      await assertQuorum(key, lock.value, "after acquire");
      await sleep(300);
      const before = await onMasters(key);
      const extended = await lock.extend(20000);
      assert.equal(extended.value, lock.value);
      assert.ok(extended.expiration > Date.now() + 15000, "library's expiration was not moved");
      await assertQuorum(key, lock.value, "after extend");
      const afterExt = await onMasters(key);
      let grown = 0;
      afterExt.forEach((s, i) => {
        if (s.value === lock.value && s.pttl > 15000 && s.pttl > before[i].pttl) grown++;
      });
      assert.ok(grown >= QUORUM, `PTTL grew on ${grown} masters, want >= ${QUORUM}: before ${JSON.stringify(before)} after ${JSON.stringify(afterExt)}`);
      await lock.unlock();
    });
  });

  test("release removes the lock from every master", TIMEOUT, async (t) => {
    await traced(t, async (trace) => {
      const key = uniqueKey(V, "release");
      const lock = await redlock(trace).lock(key, 10000);
      await assertQuorum(key, lock.value, "after acquire");
      await lock.unlock();
      await assertGoneEverywhere(key, "after release");
      // And the resource is free again for someone else.
      const again = await redlock(trace).lock(key, 10000);
      assert.notEqual(again.value, lock.value);
      await assertQuorum(key, again.value, "after acquire by another client");
      await again.unlock();
      await assertGoneEverywhere(key, "after the second release");
    });
  });

  test("multi-resource acquire and release", TIMEOUT, async (t) => {
    await traced(t, async (trace) => {
      const a = uniqueKey(V, "multi-a");
      const b = uniqueKey(V, "multi-b");
      const c = uniqueKey(V, "multi-c");
      const lock = await redlock(trace).lock([a, b], 10000);
      await assertQuorum(a, lock.value, "after multi acquire (first key)");
      await assertQuorum(b, lock.value, "after multi acquire (second key)");
      // Overlapping on b: refused as a whole, and c is not left behind.
      await assert.rejects(redlock(trace).lock([c, b], 10000), (err) => err.name === "LockError");
      await assertGoneEverywhere(c, "after refused overlapping acquire");
      await assertQuorum(b, lock.value, "after refused overlapping acquire");
      const extended = await lock.extend(20000);
      assert.ok(extended.expiration > Date.now() + 15000);
      for (const k of [a, b]) {
        const st = await onMasters(k);
        const n = st.filter((s) => s.value === lock.value && s.pttl > 15000).length;
        assert.ok(n >= QUORUM, `after multi extend ${k}: ${JSON.stringify(st)}`);
      }
      await lock.unlock();
      await assertGoneEverywhere(a, "after multi release (first key)");
      await assertGoneEverywhere(b, "after multi release (second key)");
    });
  });
});

// ---------------------------------------------------------------------------
// redlock 5.0.0-beta.2 with ioredis 5

describe("redlock 5.0.0-beta.2 (ioredis 5)", () => {
  const V = "v5";
  const redlock = (trace, opts = {}) =>
    new Redlock5([proxyClient(IORedis5, trace)], { retryCount: 0, retryDelay: 50, retryJitter: 10, ...opts });

  test("acquire puts the token on a quorum of masters", TIMEOUT, async (t) => {
    await traced(t, async (trace) => {
      const key = uniqueKey(V, "acquire");
      const lock = await redlock(trace).acquire([key], 10000);
      assert.equal(typeof lock.value, "string");
      assert.ok(lock.expiration > Date.now(), "lock already expired");
      await assertQuorum(key, lock.value, "after acquire");
      await lock.release();
    });
  });

  test("a second Redlock cannot take a held resource", TIMEOUT, async (t) => {
    await traced(t, async (trace) => {
      const key = uniqueKey(V, "contend");
      const lock = await redlock(trace).acquire([key], 10000);
      await assertQuorum(key, lock.value, "after acquire");
      await assert.rejects(redlock(trace, { retryCount: 1 }).acquire([key], 10000), (err) => {
        assert.ok(err instanceof ExecutionError, `got ${err}`);
        assert.equal(err.attempts.length, 2);
        return true;
      });
      await assertQuorum(key, lock.value, "after the failed second acquire");
      await lock.release();
    });
  });

  test("extend renews the TTL on the masters", TIMEOUT, async (t) => {
    await traced(t, async (trace) => {
      const key = uniqueKey(V, "extend");
      const lock = await redlock(trace).acquire([key], 2000);
      await assertQuorum(key, lock.value, "after acquire");
      await sleep(300);
      const before = await onMasters(key);
      const extended = await lock.extend(20000);
      assert.equal(extended.value, lock.value);
      assert.ok(extended.expiration > Date.now() + 15000, "library's expiration was not moved");
      await assertQuorum(key, lock.value, "after extend");
      const afterExt = await onMasters(key);
      let grown = 0;
      afterExt.forEach((s, i) => {
        if (s.value === lock.value && s.pttl > 15000 && s.pttl > before[i].pttl) grown++;
      });
      assert.ok(grown >= QUORUM, `PTTL grew on ${grown} masters, want >= ${QUORUM}: before ${JSON.stringify(before)} after ${JSON.stringify(afterExt)}`);
      await extended.release();
    });
  });

  test("extend by a client that does not hold the lock fails", TIMEOUT, async (t) => {
    await traced(t, async (trace) => {
      const key = uniqueKey(V, "extend-foreign");
      const lock = await redlock(trace).acquire([key], 10000);
      await assertQuorum(key, lock.value, "after acquire");
      const other = redlock(trace);
      const forged = { ...lock, redlock: other, value: "not-the-token", expiration: Date.now() + 10000 };
      await assert.rejects(other.extend(forged, 20000), ExecutionError);
      await assertQuorum(key, lock.value, "after the foreign extend");
      await lock.release();
    });
  });

  test("release removes the lock from every master", TIMEOUT, async (t) => {
    await traced(t, async (trace) => {
      const key = uniqueKey(V, "release");
      const lock = await redlock(trace).acquire([key], 10000);
      await assertQuorum(key, lock.value, "after acquire");
      await lock.release();
      await assertGoneEverywhere(key, "after release");
      const again = await redlock(trace).acquire([key], 10000);
      assert.notEqual(again.value, lock.value);
      await assertQuorum(key, again.value, "after acquire by another client");
      await again.release();
      await assertGoneEverywhere(key, "after the second release");
    });
  });

  test("using() extends automatically past the TTL and keeps others out", TIMEOUT, async (t) => {
    await traced(t, async (trace) => {
      const key = uniqueKey(V, "using");
      const duration = 1000;
      const holder = redlock(trace, { automaticExtensionThreshold: 400 });
      let value;
      let checks = 0;
      const result = await holder.using([key], duration, async (signal) => {
        const start = Date.now();
        // Run for three TTLs; take a look every ~400ms.
        while (Date.now() - start < 3 * duration) {
          await sleep(400);
          assert.equal(signal.aborted, false, `lock lost: ${signal.error}`);
          const state = await onMasters(key);
          const byValue = new Map();
          for (const s of state) if (s.value !== null) byValue.set(s.value, (byValue.get(s.value) || 0) + 1);
          const top = [...byValue.entries()].sort((x, y) => y[1] - x[1])[0];
          assert.ok(top && top[1] >= QUORUM, `${Date.now() - start}ms into using(): no token on a quorum: ${JSON.stringify(state)}`);
          if (value === undefined) value = top[0];
          assert.equal(top[0], value, "token changed while held");
          await assert.rejects(
            redlock(trace).acquire([key], duration),
            ExecutionError,
            `${Date.now() - start}ms into using(): another client took the lock`,
          );
          checks++;
        }
        return "done";
      });
      assert.equal(result, "done");
      assert.ok(checks >= 6, `only ${checks} checks`);
      await assertGoneEverywhere(key, "after using() returned");
      const next = await redlock(trace).acquire([key], duration);
      await next.release();
    });
  });

  test("multi-resource acquire and release", TIMEOUT, async (t) => {
    await traced(t, async (trace) => {
      const a = uniqueKey(V, "multi-a");
      const b = uniqueKey(V, "multi-b");
      const c = uniqueKey(V, "multi-c");
      const lock = await redlock(trace).acquire([a, b], 10000);
      await assertQuorum(a, lock.value, "after multi acquire (first key)");
      await assertQuorum(b, lock.value, "after multi acquire (second key)");
      await assert.rejects(redlock(trace).acquire([c, b], 10000), ExecutionError);
      await assertGoneEverywhere(c, "after refused overlapping acquire");
      await assertQuorum(b, lock.value, "after refused overlapping acquire");
      const extended = await lock.extend(20000);
      for (const k of [a, b]) {
        const st = await onMasters(k);
        const n = st.filter((s) => s.value === lock.value && s.pttl > 15000).length;
        assert.ok(n >= QUORUM, `after multi extend ${k}: ${JSON.stringify(st)}`);
      }
      await extended.release();
      await assertGoneEverywhere(a, "after multi release (first key)");
      await assertGoneEverywhere(b, "after multi release (second key)");
    });
  });
});
