/**
 * Resolves when `signal` aborts — at once if it already has. (`events.once`
 * on an already-aborted signal never resolves, a classic way for a runnable
 * to hang its own shutdown.) Most long-running runnables end with
 * `await untilAborted(ctx.signal)`.
 */
export function untilAborted(signal: AbortSignal): Promise<void> {
  if (signal.aborted) return Promise.resolve();
  return new Promise((resolve) =>
    signal.addEventListener("abort", () => resolve(), { once: true }),
  );
}
