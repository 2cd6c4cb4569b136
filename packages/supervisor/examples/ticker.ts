/**
 * A runnable to supervise: it starts one child, declares itself healthy and
 * ticks until it is told to stop. Used by minimal-tree.ts and unit-tested in
 * ticker.test.ts.
 */
import type { RunContext, Runnable } from "@metropolis/supervisor";

/** Logs a tick every `intervalMs` until the run is aborted. */
export function ticker(intervalMs: number): Runnable {
  return async (ctx: RunContext) => {
    ctx.run("heartbeat", async (c) => {
      c.healthy();
      await c.untilAborted();
    });
    ctx.healthy();
    let n = 0;
    while (!ctx.signal.aborted) {
      ctx.logger.info("tick", { n: n++ });
      // ctx.sleep rejects when the run is aborted: that ends the loop.
      await ctx.sleep(intervalMs).catch(() => undefined);
    }
  };
}
