import { after } from "node:test";
import IORedis from "ioredis";

// The stack every test file here runs against, from the Go harness
// (compat/harness_test.go): REDLOCK_PROXY is the proxy ("host:port"),
// REDLOCK_MASTERS the masters behind it (comma-separated), which the tests
// read directly only to check where the locks really are, and
// REDLOCK_BACKEND the application's Redis (the proxy's passthrough
// backend), where pub/sub and what is not a lock live.

export const PROXY = process.env.REDLOCK_PROXY;
export const MASTERS = (process.env.REDLOCK_MASTERS || "").split(",").filter(Boolean);
export const BACKEND = process.env.REDLOCK_BACKEND;
if (!PROXY || MASTERS.length === 0 || !BACKEND) {
  throw new Error("REDLOCK_PROXY, REDLOCK_MASTERS and REDLOCK_BACKEND must be set");
}
// A majority of the masters: the quorum of a lock.
export const QUORUM = Math.floor(MASTERS.length / 2) + 1;

// addr splits "host:port" into a client's options.
export function addr(s) {
  const i = s.lastIndexOf(":");
  if (i <= 0) throw new Error(`bad address ${s}`);
  return { host: s.slice(0, i), port: Number(s.slice(i + 1)) };
}

// eventually waits up to ms for cond() to hold, and fails with what if it
// does not. A release is answered once a quorum of masters carried it out;
// the delete on the last master may land a moment after the reply, so a
// check of every master waits for it.
export async function eventually(what, cond, ms = 2000) {
  const deadline = Date.now() + ms;
  while (!(await cond())) {
    if (Date.now() > deadline) throw new Error(`${what}: not true after ${ms} ms`);
    await new Promise((r) => setTimeout(r, 20));
  }
}

// Options of every ioredis client of the tests: fail at once, no reconnecting.
const ioredisOptions = { maxRetriesPerRequest: 1, retryStrategy: () => null };

// Clients closed when the file's tests are done.
const opened = [];
after(() => {
  for (const c of opened) {
    try {
      if (c.destroy) c.destroy();
      else c.disconnect();
    } catch {}
  }
});

// track closes clients (ioredis or node-redis) at the end of the file's tests.
export function track(...clients) {
  opened.push(...clients);
}

// ioredis returns a tracked ioredis client of a (host:port), on database db.
export function ioredis(a, db = 0) {
  const c = new IORedis({ ...addr(a), ...ioredisOptions, db });
  track(c);
  return c;
}

// Direct connections to the masters, for checks only.
export const masters = MASTERS.map((a) => ioredis(a));

// holders is how many masters hold value at key.
export async function holders(key, value) {
  const vals = await Promise.all(masters.map((m) => m.get(key)));
  return vals.filter((v) => v === value).length;
}
