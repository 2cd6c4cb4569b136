// jest globalSetup: with METROPOLIS_TRACE_TIMERS=1, remembers where every
// timer still pending was created, so that scripts/jest-open-handles.js can
// name the code behind a leftover "Timeout" instead of its type alone.
//
//   METROPOLIS_TRACE_TIMERS=1 npx jest --runInBand packages/curator
//
// `npm test` turns it on (the suite took 1,122 s traced, about as long as
// untraced); off by default for a jest run of your own. It sees the test
// files only when they run in this process (--runInBand, or one worker).
const asyncHooks = require("node:async_hooks");

module.exports = async function traceTimers() {
  if (process.env.METROPOLIS_TRACE_TIMERS !== "1") return;
  /** Pending timers: their resource and the stack that created them. */
  const pending = new Map();
  asyncHooks
    .createHook({
      init(id, type, _trigger, resource) {
        if (type !== "Timeout") return;
        const holder = {};
        Error.captureStackTrace(holder);
        pending.set(id, { resource, stack: holder.stack });
      },
      destroy(id) {
        pending.delete(id);
      },
    })
    .enable();
  globalThis.__metropolisPendingTimers = pending;
};
