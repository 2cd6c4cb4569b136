/**
 * Abort reasons (`ctx.signal.reason`) as the tree makes them: a
 * RunAbortedError without a stack trace.
 *
 * A reason says why a run was told to stop and where that happened (its
 * message names the DN); a stack would only show the supervisor's own frames,
 * since the tree, not the run, makes it. Capturing one is not cheap: in a
 * profile of group restarts, the reason's construction and the formatting of
 * its stack were 10 % of the CPU of a restart (one per failure).
 */
import { RunAbortedError } from "./errors";
import { withoutStackTrace } from "./without-stack-trace";

/** A RunAbortedError for `dn` and `why`, with no frames captured (its `stack` is its first line). */
export function abortReason(dn: string, why: string): RunAbortedError {
  return withoutStackTrace(() => new RunAbortedError(dn, why));
}
