/**
 * Errors made without a stack trace, for failures that are events rather
 * than bugs: a run told to stop, a stream that ended, a watcher closed.
 *
 * Such an error is made where the event is noticed (an event emitter's
 * callback, the supervisor's own bookkeeping), so its frames say nothing a
 * reader needs: its message and cause do. Capturing them is not free, and
 * these errors come by the thousand at the worst moment: in a profile of
 * 1,250 simulated nodes re-finding their curator after a failover, making
 * stream errors and formatting their stacks took 3–4 % of the CPU, and in a
 * group restart the abort reasons' stacks were 10 %.
 */

/** What `make` returns, with no stack frames captured by errors made in it (`stack` is their first line). */
export function withoutStackTrace<T>(make: () => T): T {
  const limit = Error.stackTraceLimit;
  Error.stackTraceLimit = 0;
  try {
    return make();
  } finally {
    Error.stackTraceLimit = limit;
  }
}
