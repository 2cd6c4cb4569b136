import { WatcherClosedError } from "./errors";
import type { Watcher } from "./watcher";

/**
 * The `[Symbol.asyncIterator]` of every watcher in this package: yields what
 * `get()` returns and closes the watcher when the loop ends for any reason
 * (break, return, throw), so that `for await` cannot leak a subscription.
 *
 * A watcher closed from elsewhere ends the loop normally rather than with
 * `WatcherClosedError`: closing is how another component says "stop reading".
 * Any other error from `get()` ends the loop by throwing it.
 */
export async function* iterateWatcher<T>(watcher: Watcher<T>): AsyncGenerator<T, void, undefined> {
  try {
    for (;;) {
      let v: T;
      try {
        v = await watcher.get();
      } catch (err) {
        if (err instanceof WatcherClosedError) return;
        throw err;
      }
      yield v;
    }
  } finally {
    watcher.close();
  }
}
