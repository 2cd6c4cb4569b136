import { ConcurrentGetError } from "./errors";
import type { GetOptions, Watchable, Watcher } from "./watcher";
import { iterateWatcher } from "./watcher-iterator";

/**
 * A read-only view of `source` with `f` applied to every value, e.g. the
 * roleserver watching only the roles part of the node's cluster membership:
 *
 * @example
 * const roles = map(membership, (m) => m.roles);
 *
 * Each watcher of the result owns one watcher of `source` and closes it on
 * `close()`. `f` runs once per delivered source value, in the reader's
 * `get()`; a `filter` given to `get()` sees mapped values. If `f` throws,
 * `get()` rejects with the thrown error and the watcher stays usable.
 */
export function map<S, T>(source: Watchable<S>, f: (v: S) => T): Watchable<T> {
  return { watch: () => new MappedWatcher(source.watch(), f) };
}

class MappedWatcher<S, T> implements Watcher<T> {
  /**
   * Guards the gap between the source get() resolving and this get() finishing,
   * in which the source watcher alone would let a second reader in.
   */
  private busy = false;

  constructor(
    private readonly source: Watcher<S>,
    private readonly f: (v: S) => T,
  ) {}

  async get(opts?: GetOptions<T>): Promise<T> {
    if (this.busy) throw new ConcurrentGetError();
    this.busy = true;
    try {
      const sourceOpts = opts?.signal === undefined ? undefined : { signal: opts.signal };
      for (;;) {
        const v = this.f(await this.source.get(sourceOpts));
        if (opts?.filter === undefined || opts.filter(v)) return v;
      }
    } finally {
      this.busy = false;
    }
  }

  close(): void {
    this.source.close();
  }

  [Symbol.asyncIterator](): AsyncIterator<T> {
    return iterateWatcher(this);
  }
}
