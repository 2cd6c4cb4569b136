import type { Watchable } from "./watcher";

/**
 * The first value of `source` (its current one included) for which
 * `predicate` returns true, e.g. a launcher waiting for storage to be mounted:
 *
 * @example
 * const s = await waitFor(storage, (s) => s.mounted, ctx.signal);
 *
 * Uses a watcher of its own and closes it however the wait ends. Rejects with
 * the abort reason when `signal` aborts, and with the error of `predicate` or
 * of the source if either throws.
 */
export async function waitFor<T>(
  source: Watchable<T>,
  predicate: (v: T) => boolean,
  signal?: AbortSignal,
): Promise<T> {
  const watcher = source.watch();
  try {
    return await watcher.get({ signal, filter: predicate });
  } finally {
    watcher.close();
  }
}
