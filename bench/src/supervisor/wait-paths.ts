/**
 * The two ways a supervised runnable waits for the end of its run, which the
 * supervisor benchmark measures every figure for: `await ctx.untilAborted()`,
 * and a listener on `ctx.signal` (what `events.once(signal, "abort")`,
 * fetch and child_process do).
 */
import type { RunContext } from "@metropolis/supervisor";

export const paths = ["untilAborted", "signal"] as const;
export type WaitPath = (typeof paths)[number];

/** How a runnable waits for its end, on each path. */
export function untilEnd(ctx: RunContext, path: WaitPath): Promise<void> {
  if (path === "untilAborted") return ctx.untilAborted();
  const signal = ctx.signal;
  return new Promise<void>((resolve) => {
    if (signal.aborted) resolve();
    else signal.addEventListener("abort", () => resolve(), { once: true });
  });
}
