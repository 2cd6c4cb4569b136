/** Small runnables and waits shared by the supervisor's tests. */
import type { RunContext } from "@metropolis/supervisor";

/** Resolves when `signal` aborts (at once if it already has; `events.once` would wait forever). */
export function aborted(signal: AbortSignal): Promise<void> {
  if (signal.aborted) return Promise.resolve();
  return new Promise((resolve) => signal.addEventListener("abort", () => resolve(), { once: true }));
}

/** Signals healthy and runs until aborted. */
export async function serve(ctx: RunContext): Promise<void> {
  ctx.healthy();
  await aborted(ctx.signal);
}

/** A promise with its resolve function, for runnables a test releases by hand. */
export function deferred<T = void>(): { promise: Promise<T>; resolve: (v: T) => void } {
  let resolve!: (v: T) => void;
  const promise = new Promise<T>((r) => (resolve = r));
  return { promise, resolve };
}
