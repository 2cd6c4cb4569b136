/**
 * Following several values at once: a runnable that keeps the latest value
 * of each source for its requests applies every value as it comes, until it
 * stops and closes them all together.
 */
import type { Watchable, Watcher } from "./watcher";
import { iterateWatcher } from "./watcher-iterator";

/**
 * Watchers whose every value is applied as it comes, closed together.
 *
 * @example
 * const followers = new Followers();
 * followers.follow(directory, (d) => (latest = d));
 * await ctx.untilAborted();
 * await followers.close();
 */
export class Followers {
  private readonly watchers: Watcher<unknown>[] = [];
  private readonly loops: Promise<void>[] = [];

  /** Applies every value of `source`, the current one first, until {@link close}. */
  follow<T>(source: Watchable<T>, apply: (v: T) => void): void {
    const watcher = source.watch();
    this.watchers.push(watcher);
    const loop = (async () => {
      for await (const v of iterateWatcher(watcher)) apply(v);
    })();
    // Handled here so that a failure waits for close() to be reported, not crash the process.
    loop.catch(() => undefined);
    this.loops.push(loop);
  }

  /** Closes every watcher and waits for its loop; rejects with the first loop's failure. */
  async close(): Promise<void> {
    for (const w of this.watchers) w.close();
    await Promise.all(this.loops);
  }
}
