// The stack every test file here runs against, from the Go harness
// (compat/harness_test.go): REDLOCK_PROXY is the proxy ("host:port"),
// REDLOCK_MASTERS the masters behind it (comma-separated), which the tests
// read directly only to check where the locks really are.

export const PROXY = process.env.REDLOCK_PROXY;
export const MASTERS = (process.env.REDLOCK_MASTERS || "").split(",").filter(Boolean);
if (!PROXY || MASTERS.length === 0) {
  throw new Error("REDLOCK_PROXY and REDLOCK_MASTERS must be set");
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
