// Lock load from Node clients, for the benchmark (bench/node.go): loops
// concurrent lock/release loops, each on its own key, for the given
// seconds, all on one client per address (one connection each, as these
// clients are used: every request of the process multiplexed on it).
//
//   node loadgen.mjs redlock5 <seconds> <loops> <addr>[,<addr>…]
//       node-redlock v5 over one ioredis client per address: acquire([key],
//       8 s), then release. Through the proxy, one address (quorum 1 in the
//       library); straight to the masters, all of them.
//   node loadgen.mjs noderedis <seconds> <loops> <addr>
//       node-redis 4 (RESP2): SET key token NX PX 8000, then the unlock
//       script by EVALSHA.
//
// It prints one line of JSON: pairs (lock+release pairs that both
// succeeded), lockErrors, unlockErrors, p50 and p99 acquire latency in ms,
// seconds (the timed part), and the first error seen, if any.

import { randomBytes } from "node:crypto";
import { performance } from "node:perf_hooks";

import Redlock from "redlock5";
import IORedis from "ioredis";
import { createClient } from "redis";

const [mode, secondsArg, loopsArg, addrsArg] = process.argv.slice(2);
const seconds = Number(secondsArg);
const loops = Number(loopsArg);
const addrs = (addrsArg || "").split(",").filter(Boolean).map((s) => {
  const i = s.lastIndexOf(":");
  return { host: s.slice(0, i), port: Number(s.slice(i + 1)) };
});
if (!["redlock5", "noderedis"].includes(mode) || !(seconds > 0) || !(loops > 0) || addrs.length === 0) {
  console.error("usage: node loadgen.mjs redlock5|noderedis <seconds> <loops> <addr>[,<addr>…]");
  process.exit(2);
}

const unlockScript = 'if redis.call("get",KEYS[1]) == ARGV[1] then return redis.call("del",KEYS[1]) else return 0 end';
const run = randomBytes(4).toString("hex");

// pair takes and releases key once; it throws on a failed lock (tagged)
// or release.
let pair;
let close;
if (mode === "redlock5") {
  const clients = addrs.map((a) => new IORedis({ ...a, maxRetriesPerRequest: 1, enableAutoPipelining: false }));
  const redlock = new Redlock(clients, { retryCount: 0, driftFactor: 0.01 });
  pair = async (key) => {
    let lock;
    try {
      lock = await redlock.acquire([key], 8000);
    } catch (e) {
      e.lockFailed = true;
      throw e;
    }
    await lock.release();
  };
  close = () => clients.forEach((c) => c.disconnect());
} else {
  const client = createClient({ socket: addrs[0] });
  await client.connect();
  const sha = await client.scriptLoad(unlockScript);
  pair = async (key) => {
    const token = randomBytes(12).toString("hex");
    const ok = await client.set(key, token, { NX: true, PX: 8000 });
    if (ok !== "OK") {
      const e = new Error(`SET NX answered ${ok}`);
      e.lockFailed = true;
      throw e;
    }
    const n = await client.evalSha(sha, { keys: [key], arguments: [token] });
    if (n !== 1) throw new Error(`unlock answered ${n}`);
  };
  close = () => client.disconnect();
}

const lat = [];
let pairs = 0, lockErrors = 0, unlockErrors = 0, firstError = "";
let timing = false;
let stop = false;

async function loop(i) {
  const key = `bench:${run}:${i}`;
  await pair(key).catch(() => {}); // warm-up, untimed
  while (!stop) {
    const t0 = performance.now();
    try {
      await pair(key);
      if (timing) {
        pairs++;
        lat.push(performance.now() - t0);
      }
    } catch (e) {
      if (timing) {
        if (e.lockFailed) lockErrors++;
        else unlockErrors++;
        if (!firstError) firstError = String(e.message || e).slice(0, 200);
      }
    }
  }
}

const all = [];
for (let i = 0; i < loops; i++) all.push(loop(i));
await new Promise((r) => setTimeout(r, 500)); // every loop past its warm-up pair
timing = true;
const t0 = performance.now();
await new Promise((r) => setTimeout(r, seconds * 1000));
timing = false;
const elapsed = (performance.now() - t0) / 1000;
stop = true;
await Promise.all(all);
close();

lat.sort((a, b) => a - b);
const q = (p) => (lat.length ? lat[Math.min(lat.length - 1, Math.floor(p * lat.length))] : 0);
console.log(JSON.stringify({ pairs, lockErrors, unlockErrors, p50: q(0.5), p99: q(0.99), seconds: elapsed, firstError }));
