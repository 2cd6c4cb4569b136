/**
 * `nodes`: the cluster's nodes, one row each — what state they are in, what
 * they do, and whether the leader still hears from them. The listing options
 * (`--filter`, `--columns`, `-o`) are shared with `approve` without an ID,
 * which lists the nodes waiting for approval.
 */
import type { Command } from "commander";
import type { api } from "@metropolis/proto";
import { withOwnerSession, type ClusterSession } from "./cluster-session";
import type { CommandContext } from "./command-context";
import type { DefineCommand } from "./define-command";
import { UsageError } from "./errors";
import { writeLine } from "./io";
import { parseNodeFilter } from "./node-filter";
import { nodeDescription, nodeView, type NodeDescription } from "./node-view";
import {
  listingFormatOption,
  renderTable,
  writeJson,
  writeYaml,
  type Column,
  type ListingFormat,
} from "./output";

const dash = (value: string | number | null) => (value === null || value === "" ? "-" : `${value}`);

/** Every column a node listing can show, by its `--columns` name. */
const allColumns: Record<string, Column<NodeDescription>> = {
  id: { heading: "ID", cell: (n) => n.id },
  address: { heading: "ADDRESS", cell: (n) => dash(n.address) },
  state: { heading: "STATE", cell: (n) => n.state },
  roles: { heading: "ROLES", cell: (n) => n.roles.join(",") || "-" },
  health: { heading: "HEALTH", cell: (n) => n.health },
  heartbeat: {
    heading: "HEARTBEAT",
    cell: (n) => (n.heartbeatAgeSeconds === null ? "-" : `${n.heartbeatAgeSeconds}s ago`),
  },
  labels: {
    heading: "LABELS",
    cell: (n) =>
      Object.entries(n.labels)
        .map(([k, v]) => `${k}=${v}`)
        .join(",") || "-",
  },
  version: { heading: "VERSION", cell: (n) => dash(n.version) },
  curator: {
    heading: "CURATOR",
    cell: (n) => (n.curator.running ? `:${dash(n.curator.port)}` : "-"),
  },
  leader: { heading: "LEADER", cell: (n) => (n.curator.leader ? "yes" : "-") },
};

/** The names `--columns` takes. */
export const columnNames = Object.keys(allColumns);

const tableColumns = ["id", "address", "state", "roles", "health", "heartbeat", "labels"];
const wideColumns = [...tableColumns, "version", "curator", "leader"];

/** The listing flags, as commander hands them over. */
export interface ListingOptions {
  output: ListingFormat;
  filter?: string;
  columns?: string;
}

/** The columns `--columns` names, checked. */
function parseColumns(text: string): Column<NodeDescription>[] {
  const names = text.split(",").map((c) => c.trim().toLowerCase());
  return names.map((name) => {
    if (!Object.hasOwn(allColumns, name)) {
      throw new UsageError(
        `--columns: "${name}" is not a column (columns: ${columnNames.join(", ")})`,
      );
    }
    return allColumns[name];
  });
}

/** A checked listing request: which nodes, printed how. Everything is checked before any call. */
function parseListing(opts: ListingOptions) {
  const filter = opts.filter === undefined ? () => true : parseNodeFilter(opts.filter);
  if (opts.columns !== undefined && (opts.output === "json" || opts.output === "yaml")) {
    throw new UsageError(`--columns: chooses table columns; -o ${opts.output} prints every field`);
  }
  const columns =
    opts.columns !== undefined
      ? parseColumns(opts.columns)
      : (opts.output === "wide" ? wideColumns : tableColumns).map((name) => allColumns[name]);
  return { filter, columns };
}

/**
 * Lists the nodes `fetch` returns that pass `--filter`, in the format `-o`
 * asks for. JSON and YAML print the fields of `nodes -o json` (see
 * {@link nodeView}); `-o wide` adds version, curator and leader columns.
 */
export async function listNodesWith(
  ctx: CommandContext,
  opts: ListingOptions,
  fetch: (session: ClusterSession) => Promise<api.Node[]>,
): Promise<void> {
  const { filter, columns } = parseListing(opts);
  const [nodes, leaderId] = await withOwnerSession(ctx, async (session) => {
    const nodes = await fetch(session);
    return [nodes, await session.leaderId()] as const;
  });
  const shown = nodes
    .map((node) => ({ node, description: nodeDescription(node, leaderId) }))
    .filter(({ description }) => filter(description))
    .sort((a, b) => a.node.id.localeCompare(b.node.id));
  if (opts.output === "json")
    writeJson(
      ctx.io.stdout,
      shown.map(({ node }) => nodeView(node)),
    );
  else if (opts.output === "yaml")
    writeYaml(
      ctx.io.stdout,
      shown.map(({ node }) => nodeView(node)),
    );
  else
    writeLine(
      ctx.io.stdout,
      renderTable(
        columns,
        shown.map(({ description }) => description),
      ),
    );
}

/** Adds `--filter`, `--columns` and `-o table|wide|json|yaml` to a listing command. */
export function addListingOptions(command: Command): Command {
  return command
    .option(
      "--filter <expr>",
      'CEL expression over `node` choosing the nodes to list, e.g. node.state == "UP" && "worker" in node.roles',
    )
    .option("--columns <names>", `table columns, comma-separated: ${columnNames.join(",")}`)
    .addOption(listingFormatOption());
}

/** `nodes [--filter EXPR] [--columns a,b] [-o table|wide|json|yaml]` */
export function listNodes(ctx: CommandContext, opts: ListingOptions): Promise<void> {
  return listNodesWith(ctx, opts, (session) => session.getNodes());
}

/** Adds `nodes`. */
export function registerNodesCommand(define: DefineCommand): void {
  addListingOptions(
    define<ListingOptions>("nodes", (ctx, _args, opts) => listNodes(ctx, opts)).description(
      "list the cluster's nodes: id, address, state, roles, health, last heartbeat",
    ),
  );
}
