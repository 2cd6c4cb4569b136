/** Small runnables and waits shared by the supervisor's tests. */
import type { RunContext } from "@metropolis/supervisor";
import winston from "winston";

/** A logger that writes nothing, for trees whose logs a test does not read. */
export const quiet = () =>
  winston.createLogger({ transports: [new winston.transports.Console({ silent: true })] });

/** Signals healthy and runs until aborted. */
export async function serve(ctx: RunContext): Promise<void> {
  ctx.healthy();
  await ctx.untilAborted();
}

/** A promise with its resolve function, for runnables a test releases by hand. */
export function deferred<T = void>(): { promise: Promise<T>; resolve: (v: T) => void } {
  let resolve!: (v: T) => void;
  const promise = new Promise<T>((r) => (resolve = r));
  return { promise, resolve };
}
