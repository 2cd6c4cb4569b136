/**
 * The one abortable sleep of the project: a runnable's `ctx.sleep()` is this
 * with its own signal, and code that is not a runnable (a launcher, a poller
 * with a caller's signal) uses it directly.
 */
/**
 * Resolves after `ms`, or rejects with `signal.reason` as soon as `signal`
 * aborts (at once if it already has); leaves no timer behind. Without a
 * signal it only waits.
 */
export function abortableSleep(ms: number, signal?: AbortSignal): Promise<void> {
  return new Promise<void>((resolve, reject) => {
    if (signal?.aborted) return reject(signal.reason);
    const onAbort = () => {
      clearTimeout(timer);
      reject(signal?.reason);
    };
    const timer = setTimeout(() => {
      signal?.removeEventListener("abort", onAbort);
      resolve();
    }, ms);
    signal?.addEventListener("abort", onAbort, { once: true });
  });
}
