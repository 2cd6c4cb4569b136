/**
 * `cluster health [-o json]`: the curator leader's health checks
 * (health-view.ts), one line each with its verdict, then a summary line.
 * Exit status 0 when no check failed (warnings included), 1 when any did —
 * also when no curator leader answers, which is itself the failing check.
 */
import { withOwnerSession } from "./cluster-session";
import type { CommandContext } from "./command-context";
import { readClusterHealth, renderHealth } from "./health-view";
import { writeLine } from "./io";
import { writeJson, type OutputFormat } from "./output";

/** The exit status of an unhealthy cluster. */
export const unhealthyExitCode = 1;

/** `cluster health [-o json]`; resolves to the exit status. */
export async function clusterHealth(
  ctx: CommandContext,
  opts: { output: OutputFormat },
): Promise<number> {
  const view = await withOwnerSession(ctx, (session) => readClusterHealth(session, ctx.signal));
  if (opts.output === "json") writeJson(ctx.io.stdout, view);
  else for (const line of renderHealth(view)) writeLine(ctx.io.stdout, line);
  return view.verdict === "fail" ? unhealthyExitCode : 0;
}
