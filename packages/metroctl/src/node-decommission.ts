/**
 * `node decommission ID [--force] [-o json]`: takes an UP node out of service
 * for good (Management.DecommissionNode): its etcd member removed first (and
 * etcd's word that it is gone), then its roles, its certificates revoked, its
 * state DECOMMISSIONED. The node's watch of itself is then refused and it
 * stops; `delete` removes its record afterwards without bypasses. Refused
 * FAILED_PRECONDITION when the quorum check fails, unless `--force`.
 *
 * `--wipe`: the node also erases its storage and powers off. The curator
 * records the request in the node's record before it revokes the node's
 * certificate, and waits for the node to acknowledge it on its heartbeat;
 * the node acts on its record only (see the curator's
 * management-decommission.ts for why it is not told from here). A wipe the
 * node did not acknowledge is said on stderr and fails the command (exit 1):
 * the node is decommissioned, but its storage must be erased by hand.
 */
import { withOwnerSession } from "./cluster-session";
import type { CommandContext } from "./command-context";
import { byId } from "./node-changes";
import { parseNodeId } from "./flag-values";
import { warnForced } from "./forced";
import { MetroctlError } from "./errors";
import { writeLine } from "./io";
import { writeJson, type OutputFormat } from "./output";

/** How long a decommission may take at least: etcd's member removal is retried for up to a minute. */
export const decommissionTimeoutMs = 120_000;

/** Flags of `node decommission`, as given. */
export interface DecommissionOptions {
  force?: boolean;
  wipe?: boolean;
  output: OutputFormat;
}

/**
 * `node decommission --wipe`: the node did not acknowledge the wipe before
 * its certificate was revoked, so it may never learn of it.
 */
export class WipeNotAcknowledgedError extends MetroctlError {
  constructor(readonly nodeId: string) {
    super(
      `node ${nodeId} is decommissioned, but it did not acknowledge the wipe before its certificate was revoked (it was stopped or cut off): its storage may be intact; erase it on its machine (stop metropolis-node, then empty the data and esp directories under its --root)`,
    );
  }
}

/** `node decommission` as `-o json` prints it. */
export interface DecommissionView {
  nodeId: string;
  consensusMemberRemoved: boolean;
  revokedPeerCertificates: number;
  alreadyDecommissioned: boolean;
  wipeRequested: boolean;
  wipeAcknowledged: boolean;
}

/** `node decommission ID [--force] [--wipe] [-o json]` */
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
      { node: byId(id), force, wipe: opts.wipe === true },
      Math.max(ctx.dialTimeoutMs, decommissionTimeoutMs),
    ),
  );
  const view: DecommissionView = {
    nodeId: res.nodeId,
    consensusMemberRemoved: res.consensusMemberRemoved,
    revokedPeerCertificates: res.revokedPeerCertificates,
    alreadyDecommissioned: res.alreadyDecommissioned,
    wipeRequested: res.wipeRequested,
    wipeAcknowledged: res.wipeAcknowledged,
  };
  // Only a wipe this call asked for is checked: an earlier one is the earlier call's.
  const unacknowledged = opts.wipe === true && !view.wipeAcknowledged;
  if (opts.output === "json") {
    writeJson(ctx.io.stdout, view);
    if (unacknowledged) throw new WipeNotAcknowledgedError(id);
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
  if (unacknowledged) throw new WipeNotAcknowledgedError(id);
  if (opts.wipe === true) {
    writeLine(
      ctx.io.stdout,
      `node ${id} acknowledged the wipe: it erases its storage and powers off`,
    );
  }
}
