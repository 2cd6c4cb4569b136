/**
 * `abortable`: bounds a promise that takes no signal of its own (a library
 * call, a connection that looks for a leader) by a runnable's or a caller's
 * signal, the way `abortableSleep` bounds a wait.
 */

/**
 * Settles as `promise` does, or rejects with `signal.reason` as soon as
 * `signal` aborts (at once if it already has). Once aborted, the outcome of
 * `promise` no longer matters to anyone and its rejection is not reported as
 * unhandled.
 */
export function abortable<T>(promise: Promise<T>, signal: AbortSignal): Promise<T> {
  if (signal.aborted) {
    promise.catch(() => undefined);
    return Promise.reject(signal.reason);
  }
  return new Promise<T>((resolve, reject) => {
    const onAbort = () => reject(signal.reason);
    signal.addEventListener("abort", onAbort, { once: true });
    promise.then(
      (value) => {
        signal.removeEventListener("abort", onAbort);
        resolve(value);
      },
      (e: unknown) => {
        signal.removeEventListener("abort", onAbort);
        reject(e);
      },
    );
  });
}
