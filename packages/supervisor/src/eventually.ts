/**
 * `eventually`: waits in a test for a condition that no event announces
 * (state behind an RPC, a process gone), by polling it with a deadline —
 * never by sleeping for a fixed time and hoping.
 */
import { SupervisorError } from "./errors";

/** The condition did not hold before the deadline. */
export class EventuallyTimeoutError extends SupervisorError {
  constructor(what: string, timeoutMs: number, lastError: unknown) {
    super(
      `timed out after ${timeoutMs} ms waiting for ${what}` +
        (lastError === undefined
          ? ""
          : ` (last attempt failed: ${lastError instanceof Error ? lastError.message : String(lastError)})`),
      { cause: lastError },
    );
  }
}

/**
 * Calls `check` until it returns something other than `undefined` or
 * `false`, and returns that. A `check` that throws counts as "not yet"; its
 * last error is reported if the deadline passes.
 */
export async function eventually<T>(
  check: () => T | undefined | false | Promise<T | undefined | false>,
  what: string,
  opts: { timeoutMs?: number; intervalMs?: number } = {},
): Promise<T> {
  const timeoutMs = opts.timeoutMs ?? 20_000;
  const deadline = Date.now() + timeoutMs;
  let lastError: unknown;
  for (;;) {
    try {
      const result = await check();
      if (result !== undefined && result !== false) return result;
    } catch (e) {
      lastError = e;
    }
    if (Date.now() > deadline) throw new EventuallyTimeoutError(what, timeoutMs, lastError);
    await new Promise((r) => setTimeout(r, opts.intervalMs ?? 50));
  }
}
