/**
 * What `--force` risks, said on stderr before a forced command runs: the
 * quorum check it skips is the cluster's (Management.CheckNodeMaintenance and
 * the quorum check of each call that removes a member), and skipping it may
 * leave fewer healthy etcd voters than a quorum.
 */
import type { CommandContext } from "./command-context";
import { writeLine } from "./io";

/** The risk of skipping the quorum check, in one sentence. */
export const forceRisk =
  "if fewer healthy etcd voters than a quorum remain, the cluster stops committing writes (no node changes, no curator failover) until enough of them are back";

/** Writes `metroctl: COMMAND: --force: WHAT is not quorum-checked; RISK` on stderr. */
export function warnForced(ctx: CommandContext, command: string, what: string): void {
  writeLine(
    ctx.io.stderr,
    `metroctl: ${command}: --force: ${what} is not quorum-checked; ${forceRisk}`,
  );
}
