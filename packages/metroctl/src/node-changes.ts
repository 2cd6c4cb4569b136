/**
 * The owner's changes to one node: `approve`, `set-role`, `label`,
 * `delete`. Every flag is checked before anything is sent, so a typo never
 * half-applies; the cluster's own refusals (a node that is not there, a
 * role that cannot go yet) come back as its gRPC status, one line.
 */
import { api, common } from "@metropolis/proto";
import { withOwnerSession } from "./cluster-session";
import type { CommandContext } from "./command-context";
import { UsageError } from "./errors";
import { bypassChecks } from "./flag-defaults";
import { parseLabelChanges, parseNodeId, parseOnOff } from "./flag-values";
import { warnForced } from "./forced";
import { writeLine } from "./io";
import { listNodesWith, type ListingOptions } from "./nodes-command";

/** A request's `node` naming node `id`. */
export const byId = (id: string) => ({ $case: "id" as const, id });

/** `approve ID` */
export async function approveNode(ctx: CommandContext, id: string): Promise<void> {
  parseNodeId(id);
  await withOwnerSession(ctx, (session) => session.approveNode(id));
  writeLine(ctx.io.stdout, `node ${id} approved`);
}

/**
 * `approve` without an ID: the nodes waiting for approval (state NEW), with
 * the listing options of `nodes`. Given an ID, those options are refused.
 */
export async function approveOrList(
  ctx: CommandContext,
  id: string | undefined,
  opts: ListingOptions,
): Promise<void> {
  if (id === undefined) {
    await listNodesWith(ctx, opts, (session) =>
      session.getNodes({ states: [common.NodeState.NEW] }),
    );
    return;
  }
  if (opts.filter !== undefined || opts.columns !== undefined || opts.output !== "table") {
    throw new UsageError("--filter, --columns and -o list pending nodes: give them without an ID");
  }
  await approveNode(ctx, id);
}

/** Flags of `set-role`, as given. */
export interface SetRoleOptions {
  consensus?: string;
  controller?: string;
  worker?: string;
  force?: boolean;
}

/** Roles to give (true) or take away (false); an unset role stays as it is. */
export interface RoleChanges {
  consensus?: boolean;
  controller?: boolean;
  worker?: boolean;
}

/**
 * The UpdateNodeRoles request of `changes` for node `id`.
 * @throws UsageError when it changes nothing
 */
export function rolesRequest(id: string, changes: RoleChanges): api.UpdateNodeRolesRequest {
  const req: api.UpdateNodeRolesRequest = {
    node: byId(id),
    consensusMember: changes.consensus,
    kubernetesController: changes.controller,
    kubernetesWorker: changes.worker,
  };
  if (
    req.consensusMember === undefined &&
    req.kubernetesController === undefined &&
    req.kubernetesWorker === undefined
  ) {
    throw new UsageError("give at least one of --consensus, --controller, --worker (on or off)");
  }
  return req;
}

/** What `changes` does, in words: `consensus on, worker off`. */
export function describeRoleChanges(changes: RoleChanges): string {
  return (["consensus", "controller", "worker"] as const)
    .filter((role) => changes[role] !== undefined)
    .map((role) => `${role} ${changes[role] ? "on" : "off"}`)
    .join(", ");
}

/** `set-role ID --consensus on|off --controller on|off --worker on|off` */
export async function setRole(
  ctx: CommandContext,
  id: string,
  opts: SetRoleOptions,
): Promise<void> {
  parseNodeId(id);
  const flag = (value: string | undefined, name: string) =>
    value === undefined ? undefined : parseOnOff(value, name);
  const changes: RoleChanges = {
    consensus: flag(opts.consensus, "--consensus"),
    controller: flag(opts.controller, "--controller"),
    worker: flag(opts.worker, "--worker"),
  };
  const req = rolesRequest(id, changes);
  if (opts.force === true) {
    if (changes.consensus !== false) {
      throw new UsageError("--force skips the quorum check of --consensus off: give it with that");
    }
    req.force = true;
    warnForced(ctx, "set-role", `taking the consensus role from node ${id}`);
  }
  await withOwnerSession(ctx, (session) => session.updateNodeRoles(req));
  writeLine(ctx.io.stdout, `node ${id}: ${describeRoleChanges(changes)}`);
}

/** `label ID k=v|k- …` */
export async function labelNode(ctx: CommandContext, id: string, changes: string[]): Promise<void> {
  parseNodeId(id);
  const { add, remove } = parseLabelChanges(changes);
  await withOwnerSession(ctx, (session) =>
    session.updateNodeLabels({ node: byId(id), add, remove }),
  );
  writeLine(ctx.io.stdout, `node ${id} labels updated`);
}

/** `delete ID [--bypass has-roles,node-up]` */
export async function deleteNode(
  ctx: CommandContext,
  id: string,
  opts: { bypass: string[] },
): Promise<void> {
  parseNodeId(id);
  const bypass = new Set<string>();
  for (const value of opts.bypass.flatMap((v) => v.split(","))) {
    if (!(bypassChecks as readonly string[]).includes(value)) {
      throw new UsageError(`--bypass: "${value}" is not one of ${bypassChecks.join(", ")}`);
    }
    bypass.add(value);
  }
  await withOwnerSession(ctx, (session) =>
    session.deleteNode({
      node: byId(id),
      bypassHasRoles: bypass.has("has-roles"),
      bypassNodeUp: bypass.has("node-up"),
    }),
  );
  writeLine(ctx.io.stdout, `node ${id} deleted`);
}
