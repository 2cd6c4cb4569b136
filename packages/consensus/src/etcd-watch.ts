/**
 * Opening an etcd watch that a stopping runnable can give up on.
 *
 * etcd3's `WatchBuilder.create()` resolves once etcd has created the watch,
 * and never while the member is unreachable: etcd3 reconnects its watch
 * stream for ever. A runnable awaiting create() when its member stopped
 * (a sibling, stopped along with it) would never end, and its parent, which
 * is restarted only once its whole subtree has ended, would never start the
 * member again. {@link openWatch} ends with the caller's signal instead.
 */
import type { Watcher, WatchBuilder } from "etcd3";

/**
 * Opens the watch `builder` describes and resolves with it once etcd has
 * created it, as `builder.create()` does; rejects with `signal`'s reason
 * when it aborts first (the watch is then cancelled), and with etcd's
 * error when etcd refuses the watch.
 *
 * @example
 * const watcher = await openWatch(kv.watch().prefix("nodes/"), ctx.signal);
 */
export async function openWatch(builder: WatchBuilder, signal: AbortSignal): Promise<Watcher> {
  signal.throwIfAborted();
  // watcher() rather than create(): the watch exists, and can be cancelled, from here on.
  const watcher = builder.watcher();
  let onConnected = () => undefined as void;
  let onError = (_e: unknown) => undefined as void;
  let onAbort = () => undefined as void;
  try {
    await new Promise<void>((resolve, reject) => {
      onConnected = () => resolve();
      onError = (e) => reject(e);
      onAbort = () => reject(signal.reason);
      watcher.once("connected", onConnected);
      watcher.once("error", onError);
      signal.addEventListener("abort", onAbort, { once: true });
    });
  } catch (e) {
    // Not awaited: a cancel while etcd is unreachable waits for etcd3's next reconnection.
    void watcher.cancel().catch(() => undefined);
    throw e;
  } finally {
    watcher.off("connected", onConnected);
    watcher.off("error", onError);
    signal.removeEventListener("abort", onAbort);
  }
  return watcher;
}
