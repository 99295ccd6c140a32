// node-redis 6, unmodified, with redlock-proxy as its Redis: in its default
// RESP3 and with RESP: 2. A lock taken with SET NX PX is on a quorum of the
// masters and refused to a second client, the unlock script releases it,
// pub/sub works both ways (a publish through the proxy and one straight to
// the backend reach a subscriber of the proxy), and replies keep their
// types (maps, doubles, nulls).
//
// REDLOCK_PROXY is the proxy ("host:port"); REDLOCK_MASTERS the masters
// (comma-separated); REDLOCK_BACKEND the proxy's passthrough backend.

import { test } from "node:test";
import assert from "node:assert/strict";
import { randomBytes } from "node:crypto";
import { setTimeout as sleep } from "node:timers/promises";

import { createClient } from "redis6";
import { BACKEND, PROXY, QUORUM, eventually, holders, ioredis, masters, track } from "./stack.mjs";

async function client(RESP) {
  const c = createClient({ url: `redis://${PROXY}`, RESP, name: `noderedis6-resp${RESP}` });
  c.on("error", () => {});
  track(c);
  await c.connect();
  return c;
}

const unlock = `if redis.call("get",KEYS[1]) == ARGV[1] then return redis.call("del",KEYS[1]) else return 0 end`;

for (const RESP of [3, 2]) {
  test(`node-redis 6, RESP${RESP}: lock on a quorum, contender refused, release`, async () => {
    const a = await client(RESP);
    const b = await client(RESP);
    const info = await a.sendCommand(["CLIENT", "INFO"]);
    assert.match(String(info), new RegExp(` resp=${RESP} `));
    const key = `noderedis6:${RESP}:${randomBytes(6).toString("hex")}`;
    assert.equal(await a.sendCommand(["SET", key, "t1", "NX", "PX", "10000"]), "OK");
    assert.ok((await holders(key, "t1")) >= QUORUM, "held on a quorum");
    assert.equal(await b.sendCommand(["SET", key, "t2", "NX", "PX", "10000"]), null);
    assert.equal(await b.get(key), "t1");
    const pttl = await b.pTTL(key);
    assert.ok(pttl > 9000 && pttl <= 10000, `PTTL ${pttl}`);
    assert.equal(await b.eval(unlock, { keys: [key], arguments: ["t2"] }), 0);
    assert.equal(await a.eval(unlock, { keys: [key], arguments: ["t1"] }), 1);
    await eventually("unlocked on every master", async () => (await holders(key, "t1")) === 0);
    assert.equal(await a.get(key), null);
    assert.equal(await b.sendCommand(["SET", key, "t2", "NX", "PX", "10000"]), "OK");
    assert.equal(await b.eval(unlock, { keys: [key], arguments: ["t2"] }), 1);
  });

  test(`node-redis 6, RESP${RESP}: reply types as from Redis`, async () => {
    const c = await client(RESP);
    const k = `noderedis6:${RESP}:types:${randomBytes(6).toString("hex")}`;
    await c.hSet(`${k}:h`, { a: "1", b: "2" });
    assert.deepEqual({ ...(await c.hGetAll(`${k}:h`)) }, { a: "1", b: "2" });
    await c.zAdd(`${k}:z`, { score: 1.5, value: "m" });
    assert.equal(await c.zScore(`${k}:z`, "m"), 1.5);
    await c.sAdd(`${k}:s`, "x");
    assert.deepEqual(await c.sMembers(`${k}:s`), ["x"]);
    assert.equal(await c.get(`${k}:missing`), null);
    await c.del([`${k}:h`, `${k}:z`, `${k}:s`]);
  });

  test(`node-redis 6, RESP${RESP}: pub/sub through the proxy and from the backend`, async () => {
    const c = await client(RESP);
    const sub = await client(RESP);
    const channel = `noderedis6:${RESP}:ch:${randomBytes(6).toString("hex")}`;
    const got = [];
    await sub.subscribe(channel, (message) => got.push(message));
    assert.equal(await c.publish(channel, "through the proxy"), 1);
    assert.equal(await ioredis(BACKEND).publish(channel, "from the backend"), 1);
    for (let i = 0; i < 50 && got.length < 2; i++) await sleep(20);
    assert.deepEqual(got, ["through the proxy", "from the backend"]);
    const pattern = [];
    await sub.pSubscribe(`${channel}:*`, (message, ch) => pattern.push([ch, message]));
    await c.publish(`${channel}:x`, "p");
    for (let i = 0; i < 50 && pattern.length < 1; i++) await sleep(20);
    assert.deepEqual(pattern, [[`${channel}:x`, "p"]]);
    await sub.unsubscribe(channel);
    await sub.pUnsubscribe(`${channel}:*`);
    assert.equal(await c.publish(channel, "after"), 0);
    // Unsubscribed, the same connection serves lock commands again. (After
    // pub/sub in RESP2, node-redis hands sendCommand's replies back as
    // buffers.)
    const key = `${channel}:lock`;
    assert.equal(String(await sub.sendCommand(["SET", key, "t", "NX", "PX", "5000"])), "OK");
    assert.ok((await holders(key, "t")) >= QUORUM);
    assert.equal(await sub.eval(unlock, { keys: [key], arguments: ["t"] }), 1);
  });
}
