import { Tree } from "./tree";
import type { Runnable, Supervisor, SupervisorOptions } from "./types";

/**
 * Starts a supervision tree whose root (DN `root`) runs `root`.
 *
 * @example
 * const sup = supervise(async (ctx) => {
 *   ctx.run("server", serverRunnable);
 *   ctx.healthy();
 *   await once(ctx.signal, "abort");
 * });
 * // …
 * await sup.stop();
 */
export function supervise(root: Runnable, opts?: SupervisorOptions): Supervisor {
  return new Tree(root, opts);
}
