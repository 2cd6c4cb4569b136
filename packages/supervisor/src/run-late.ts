/**
 * `runLate`: keeps this process's event loop busy for a while, as a
 * process running late does (a busy machine, a long garbage collection, a
 * host of thousands of simulated nodes on a shared CPU). For tests of code
 * that must not give up on what arrived while it ran late (see
 * `answerDeadline`): whatever becomes due meanwhile — timers, socket reads —
 * is handled only after it returns, in the loop's own order.
 */

/** Blocks the event loop for `ms` milliseconds, doing nothing. */
export function runLate(ms: number): void {
  const until = performance.now() + ms;
  while (performance.now() < until) {
    // busy: nothing else of this process runs meanwhile
  }
}
