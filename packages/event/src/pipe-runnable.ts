import type { Runnable } from "@metropolis/supervisor";
import type { Value, Watchable } from "./watcher";

/**
 * Where `pipeRunnable` forwards values: a `Value` to set, or a function. A
 * function may return a promise; the next value is forwarded only after it
 * settles, and values set in the meantime collapse into the newest one. The
 * signal is the runnable's, for a function that does slow work.
 */
export type Sink<T> = Value<T> | ((v: T, signal: AbortSignal) => void | Promise<void>);

/**
 * A supervisor runnable that forwards every update of `source` to `sink` until
 * it is cancelled, e.g. to publish a mapped or combined view of internal state
 * as another service's input:
 *
 * @example
 * ctx.run("status-pipe", pipeRunnable(map(membership, (m) => m.roles), roles));
 *
 * It declares itself healthy once it is watching, resolves when `ctx.signal`
 * aborts, and fails (so the supervisor restarts it) if the source's `get()` or
 * the sink throws. Its watcher is closed however it ends.
 */
export function pipeRunnable<T>(source: Watchable<T>, sink: Sink<T>): Runnable {
  return async (ctx) => {
    const watcher = source.watch();
    const { signal } = ctx;
    try {
      ctx.healthy();
      for (;;) {
        const v = await watcher.get({ signal });
        if (typeof sink === "function") await sink(v, signal);
        else sink.set(v);
      }
    } catch (err) {
      // Cancellation is a clean end, not a failure to restart from.
      if (signal.aborted) return;
      throw err;
    } finally {
      watcher.close();
    }
  };
}
