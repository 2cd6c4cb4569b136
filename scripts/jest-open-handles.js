// jest globalTeardown: finds what the tests left keeping the process alive.
//
// With one worker (CI's two-core machines) jest runs every test file in its
// own process, so a timer or socket a test forgot (an etcd3 watch reconnecting
// for ever, a client never closed) keeps jest from exiting: the run passes and
// then hangs until CI's time limit. This hook waits up to 30 s for the
// event loop to drain, then writes what is still alive to
// reports/open-handles.json; `npm test` runs jest with --forceExit and then
// scripts/check-open-handles.js, which fails naming the leftovers. With
// several workers the test files ran elsewhere and nothing is found here.
//
// Finding the culprit: the report names resource types only (Node has no
// public list of timers), unless the run traced timers: with
// METROPOLIS_TRACE_TIMERS=1 (see scripts/jest-trace-timers.js) each leftover
// timer is reported with the stack that created it.
const fs = require("node:fs");
const path = require("node:path");

// How long what is still alive may take to end by itself: a retry loop with
// a deadline (a client finding a leader, a call's deadline) that a test left
// running ends within it and never hung jest; what outlives it would have.
const GRACE_MS = 30_000;

function leftovers() {
  const stdio = new Set([process.stdin, process.stdout, process.stderr]);
  const handles = process
    ._getActiveHandles()
    .filter((h) => !stdio.has(h) && (typeof h.hasRef !== "function" || h.hasRef()))
    .map(describe);
  const traced = globalThis.__metropolisPendingTimers;
  const timers = traced
    ? [...traced.values()]
        .filter(({ resource }) => resource.hasRef() && !resource._destroyed)
        .map(({ stack }) => `Timeout created${createdAt(stack)}`)
    : process.getActiveResourcesInfo().filter((t) => t === "Timeout" || t === "Immediate");
  return [...handles, ...timers];
}

/** The frames of a traced timer's creation, without Node's own. */
function createdAt(stack) {
  const frames = stack.split("\n").slice(1);
  return frames
    .filter((f) => !/\(node:(internal|timers)/.test(f))
    .slice(0, 8)
    .join("\n");
}

function describe(h) {
  const type = h.constructor?.name ?? typeof h;
  if (typeof h.pid === "number") return `${type} pid ${h.pid} (${h.spawnfile ?? "?"})`;
  if (h.remoteAddress) return `${type} to ${h.remoteAddress}:${h.remotePort}`;
  if (typeof h.address === "function") {
    const a = h.address();
    if (a && typeof a === "object") return `${type} on ${a.address}:${a.port}`;
  }
  return type;
}

module.exports = async function openHandles(globalConfig) {
  const deadline = Date.now() + GRACE_MS;
  let left = leftovers();
  while (left.length > 0 && Date.now() < deadline) {
    await new Promise((resolve) => setTimeout(resolve, 100));
    left = leftovers();
  }
  const file = path.join(globalConfig.rootDir, "reports", "open-handles.json");
  fs.mkdirSync(path.dirname(file), { recursive: true });
  fs.writeFileSync(file, JSON.stringify({ leftovers: left }, null, 2) + "\n");
};
