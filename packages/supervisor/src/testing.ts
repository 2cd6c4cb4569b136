/**
 * @metropolis/supervisor/testing — helpers for testing runnables:
 * `testHarness` runs one under a real supervisor in a jest test;
 * `MockContext` stands in for the supervisor in a unit test of one runnable.
 */
export { MockContext, startOnMock, type MockRun, type RecordedChild } from "./mock-context";
export {
  testHarness,
  HarnessTimeoutError,
  UnexpectedDeathError,
  type TestHarness,
  type TestHarnessOptions,
} from "./test-harness";
export { eventually, EventuallyTimeoutError } from "./eventually";
