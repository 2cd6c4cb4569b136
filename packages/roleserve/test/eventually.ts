/**
 * Waiting in tests for conditions that no event announces (a process gone,
 * a file written, a health the curator reports), by polling with a deadline
 * instead of sleeping a fixed time.
 */

/**
 * Polls `check` until it returns something other than undefined or false,
 * and returns that; fails naming `what` after `timeoutMs`. For conditions
 * that no event announces (a process gone, a file written, a health seen by
 * the curator).
 */
export async function eventually<T>(
  what: string,
  check: () => Promise<T | undefined | false> | T | undefined | false,
  timeoutMs = 10_000,
): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  let last: unknown;
  for (;;) {
    try {
      const result = await check();
      if (result !== undefined && result !== false) return result;
      last = undefined;
    } catch (e) {
      last = e;
    }
    if (Date.now() > deadline) {
      throw new Error(
        `timed out after ${timeoutMs} ms waiting for ${what}${last ? `: ${String(last)}` : ""}`,
      );
    }
    await new Promise((r) => setTimeout(r, 20));
  }
}
