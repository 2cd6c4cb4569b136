/**
 * The owner's changes to one node: `approve`, `set-role`, `label`,
 * `delete`. Every flag is checked before anything is sent, so a typo never
 * half-applies; the cluster's own refusals (a node that is not there, a
 * role that cannot go yet) come back as its gRPC status, one line.
 */
import { Option } from "commander";
import { api, common } from "@metropolis/proto";
import { withOwnerSession } from "./cluster-session";
import type { CommandContext } from "./command-context";
import { collectValues, type DefineCommand } from "./define-command";
import { UsageError } from "./errors";
import { parseLabelChanges, parseNodeId, parseOnOff } from "./flag-values";
import { writeLine } from "./io";
import { addListingOptions, listNodesWith, type ListingOptions } from "./nodes-command";

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

/** The safety checks of DeleteNode that `--bypass` can lift. */
const bypassChecks = ["has-roles", "node-up"] as const;

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

/** Adds `approve`, `set-role`, `label` and `delete`. */
export function registerNodeChangeCommands(define: DefineCommand): void {
  addListingOptions(
    define<ListingOptions>("approve", (ctx, [id], opts) => approveOrList(ctx, id, opts))
      .description(
        "let a NEW node into the cluster (it becomes STANDBY and then commits); without an ID, list the nodes waiting for approval",
      )
      .argument("[id]", "node ID"),
  );

  const onOff = (name: string, role: string) =>
    new Option(`--${name} <on|off>`, `give or take away the ${role} role`);
  define<SetRoleOptions>("set-role", (ctx, [id], opts) => setRole(ctx, id, opts))
    .description("give or take away roles of a node")
    .argument("<id>", "node ID")
    .addOption(onOff("consensus", "consensus member (etcd + curator)"))
    .addOption(onOff("controller", "Kubernetes controller"))
    .addOption(onOff("worker", "Kubernetes worker"));

  define("label", (ctx, [id, ...changes]) => labelNode(ctx, id, changes))
    .description("set (key=value) or remove (key-) labels of a node")
    .argument("<id>", "node ID")
    .argument("<changes...>", "key=value to set, key- to remove");

  define<{ bypass: string[] }>("delete", (ctx, [id], opts) => deleteNode(ctx, id, opts))
    .description(
      "remove a node from the cluster (refused while it has roles or is UP, unless bypassed)",
    )
    .argument("<id>", "node ID")
    .option(
      "--bypass <checks>",
      `safety checks to skip: ${bypassChecks.join(", ")} (comma-separated or repeated)`,
      collectValues,
      [],
    );
}
