/**
 * `@metropolis/supervisor/testing`: helpers for testing runnables.
 * `testHarness` runs one under a real supervisor in a jest test;
 * `MockContext` (and `startOnMock`) stands in for the supervisor in a unit
 * test of one runnable; `eventually` polls a condition with a deadline;
 * `liveHeapBytes` measures what a process still holds, for leak tests;
 * `runLate` blocks the event loop, as a process running late does.
 *
 * @example
 * ```ts
 * import { startOnMock } from "@metropolis/supervisor/testing";
 *
 * const run = startOnMock("root.worker", worker);
 * expect(run.ctx.healthyCalls).toBe(1);
 * await run.stop(); // aborts, awaits, throws if the runnable broke a rule
 * ```
 *
 * @module
 */
export {
  MockContext,
  startOnMock,
  type MockChildRun,
  type MockRun,
  type RecordedChild,
} from "./mock-context";
export {
  testHarness,
  HarnessTimeoutError,
  UnexpectedDeathError,
  type TestHarness,
  type TestHarnessOptions,
} from "./test-harness";
export { eventually, EventuallyTimeoutError } from "./eventually";
export { liveHeapBytes } from "./live-heap";
export { runLate } from "./run-late";
