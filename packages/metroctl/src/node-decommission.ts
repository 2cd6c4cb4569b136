/**
 * `node decommission ID [--force] [-o json]`: takes an UP node out of service
 * for good (Management.DecommissionNode): its etcd member removed first (and
 * etcd's word that it is gone), then its roles, its certificates revoked, its
 * state DECOMMISSIONED. The node's watch of itself is then refused and it
 * stops; `delete` removes its record afterwards without bypasses. Refused
 * FAILED_PRECONDITION when the quorum check fails, unless `--force`.
 */
import { withOwnerSession } from "./cluster-session";
import type { CommandContext } from "./command-context";
import { byId } from "./node-changes";
import { parseNodeId } from "./flag-values";
import { warnForced } from "./forced";
import { writeLine } from "./io";
import { writeJson, type OutputFormat } from "./output";

/** How long a decommission may take at least: etcd's member removal is retried for up to a minute. */
export const decommissionTimeoutMs = 120_000;

/** Flags of `node decommission`, as given. */
export interface DecommissionOptions {
  force?: boolean;
  output: OutputFormat;
}

/** `node decommission` as `-o json` prints it. */
export interface DecommissionView {
  nodeId: string;
  consensusMemberRemoved: boolean;
  revokedPeerCertificates: number;
  alreadyDecommissioned: boolean;
}

/** `node decommission ID [--force] [-o json]` */
export async function decommissionNode(
  ctx: CommandContext,
  id: string,
  opts: DecommissionOptions,
): Promise<void> {
  parseNodeId(id);
  const force = opts.force === true;
  if (force) warnForced(ctx, "node decommission", `removing the etcd member of node ${id}`);
  const res = await withOwnerSession(ctx, (session) =>
    session.decommissionNode(
      { node: byId(id), force },
      Math.max(ctx.dialTimeoutMs, decommissionTimeoutMs),
    ),
  );
  const view: DecommissionView = {
    nodeId: res.nodeId,
    consensusMemberRemoved: res.consensusMemberRemoved,
    revokedPeerCertificates: res.revokedPeerCertificates,
    alreadyDecommissioned: res.alreadyDecommissioned,
  };
  if (opts.output === "json") {
    writeJson(ctx.io.stdout, view);
    return;
  }
  const member = view.consensusMemberRemoved
    ? `its etcd member removed, ${view.revokedPeerCertificates} etcd peer certificates revoked; `
    : "";
  writeLine(
    ctx.io.stdout,
    view.alreadyDecommissioned
      ? `node ${id} was decommissioned already (${member || "nothing left to do; "}its certificate is revoked)`
      : `node ${id} decommissioned: ${member}its roles taken away and its certificate revoked (the node stops); \`metroctl delete ${id}\` removes its record`,
  );
}
