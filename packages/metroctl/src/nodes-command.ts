/**
 * `nodes`: the cluster's nodes, one row each — what state they are in, what
 * they do, and whether the leader still hears from them. The listing options
 * (`--filter`, `--columns`, `-o`) are shared with `approve` without an ID,
 * which lists the nodes waiting for approval.
 */
import type { api } from "@metropolis/proto";
import { withOwnerSession, type ClusterSession } from "./cluster-session";
import type { CommandContext } from "./command-context";
import { UsageError } from "./errors";
import { writeLine } from "./io";
import {
  allColumns,
  columnNames,
  tableColumns,
  wideColumns,
  type ListingOptions,
  type NodeColumn,
} from "./listing-options";
import type { NodeFilter } from "./node-filter";
import { nodeDescription, nodeView } from "./node-view";
import { renderTable, writeJson, writeYaml } from "./output";

export type { ListingOptions } from "./listing-options";

/** The columns `--columns` names, checked. */
function parseColumns(text: string): NodeColumn[] {
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

/**
 * A checked listing request: which nodes, printed how. Everything is checked
 * before any call. The CEL engine is loaded only for a `--filter`.
 */
async function parseListing(opts: ListingOptions): Promise<{
  filter: NodeFilter;
  columns: NodeColumn[];
}> {
  const filter: NodeFilter =
    opts.filter === undefined
      ? () => true
      : (await import("./node-filter.js")).parseNodeFilter(opts.filter);
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
  const { filter, columns } = await parseListing(opts);
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
    await writeYaml(
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

/** `nodes [--filter EXPR] [--columns a,b] [-o table|wide|json|yaml]` */
export function listNodes(ctx: CommandContext, opts: ListingOptions): Promise<void> {
  return listNodesWith(ctx, opts, (session) => session.getNodes());
}
