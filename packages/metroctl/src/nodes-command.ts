/**
 * `nodes`: the cluster's nodes, one row each — what state they are in, what
 * they do, and whether the leader still hears from them.
 */
import { withOwnerSession } from "./cluster-session";
import type { CommandContext } from "./command-context";
import type { DefineCommand } from "./define-command";
import { writeLine } from "./io";
import { nodeView, type NodeView } from "./node-view";
import {
  outputFormatOption,
  renderTable,
  writeJson,
  type Column,
  type OutputFormat,
} from "./output";

const columns: readonly Column<NodeView>[] = [
  { heading: "ID", cell: (n) => n.id },
  { heading: "ADDRESS", cell: (n) => n.address ?? "-" },
  { heading: "STATE", cell: (n) => n.state },
  { heading: "ROLES", cell: (n) => n.roles.join(",") || "-" },
  { heading: "HEALTH", cell: (n) => n.health },
  {
    heading: "HEARTBEAT",
    cell: (n) => (n.heartbeatAgeSeconds === null ? "-" : `${n.heartbeatAgeSeconds}s ago`),
  },
  {
    heading: "LABELS",
    cell: (n) =>
      Object.entries(n.labels)
        .map(([k, v]) => `${k}=${v}`)
        .join(",") || "-",
  },
];

/** `nodes [-o json]` */
export async function listNodes(
  ctx: CommandContext,
  opts: { output: OutputFormat },
): Promise<void> {
  const nodes = await withOwnerSession(ctx, (session) => session.getNodes());
  const views = nodes.map(nodeView).sort((a, b) => a.id.localeCompare(b.id));
  if (opts.output === "json") writeJson(ctx.io.stdout, views);
  else writeLine(ctx.io.stdout, renderTable(columns, views));
}

/** Adds `nodes`. */
export function registerNodesCommand(define: DefineCommand): void {
  define<{ output: OutputFormat }>("nodes", (ctx, _args, opts) => listNodes(ctx, opts))
    .description("list the cluster's nodes: id, address, state, roles, health, last heartbeat")
    .addOption(outputFormatOption());
}
