/**
 * A node's supervision tree, from the flat list the Debug service sends
 * (parents before children, DNs like `root.consensus.etcd`) to a tree, drawn
 * with its states, restart counts, last errors and what each runnable says
 * it is doing (a state machine's current state) — the first place to look
 * when a node does not come up, or does not do what it should.
 */
import { api } from "@metropolis/proto";
import type { SupervisionTreeNode } from "./node-fields";
import { renderTable } from "./output";

export type { SupervisionTreeNode } from "./node-fields";

const parentDn = (dn: string) => {
  const dot = dn.lastIndexOf(".");
  return dot === -1 ? undefined : dn.slice(0, dot);
};

/**
 * Builds the tree. A runnable whose parent is missing from the list (which a
 * consistent snapshot never has) becomes a root of its own rather than being
 * dropped: the operator sees everything the node sent.
 */
export function buildSupervisionTree(nodes: readonly api.SupervisionNode[]): SupervisionTreeNode[] {
  const byDn = new Map<string, SupervisionTreeNode>();
  const roots: SupervisionTreeNode[] = [];
  for (const n of nodes) {
    const parent = parentDn(n.dn);
    const node: SupervisionTreeNode = {
      dn: n.dn,
      name: parent !== undefined && byDn.has(parent) ? n.dn.slice(parent.length + 1) : n.dn,
      state: api.RunnableState[n.state] ?? `STATE_${n.state}`,
      restarts: n.restarts,
      since: n.since ? n.since.toISOString() : null,
      lastError: n.lastError === "" ? null : n.lastError,
      nextRestartInMs: n.nextRestartInMs ?? null,
      givenUp: n.givenUp,
      status: n.status === "" ? null : n.status,
      children: [],
    };
    byDn.set(n.dn, node);
    const parentNode = parent === undefined ? undefined : byDn.get(parent);
    if (parentNode) parentNode.children.push(node);
    else roots.push(node);
  }
  return roots;
}

interface Row {
  label: string;
  node: SupervisionTreeNode;
}

function flatten(nodes: readonly SupervisionTreeNode[], prefix: string, rows: Row[], top: boolean) {
  nodes.forEach((node, i) => {
    const last = i === nodes.length - 1;
    const branch = top ? "" : last ? "└─ " : "├─ ";
    rows.push({ label: prefix + branch + node.name, node });
    const childPrefix = top ? "" : prefix + (last ? "   " : "│  ");
    flatten(node.children, childPrefix, rows, false);
  });
}

/**
 * The DETAIL cell: first what the runnable says it is doing (its machine's
 * state), which an operator reads on every line, then what went wrong.
 */
function detail(node: SupervisionTreeNode): string {
  const parts: string[] = [];
  // A node of this version sends one line; one of another need not.
  if (node.status !== null) parts.push(`state: ${node.status.split("\n")[0]}`);
  if (node.givenUp) parts.push("gave up");
  else if (node.nextRestartInMs !== null)
    parts.push(`restart in ${(node.nextRestartInMs / 1000).toFixed(1)}s`);
  // One line per runnable: a multi-line error (a stack) would break the tree apart.
  if (node.lastError !== null) parts.push(`last error: ${node.lastError.split("\n")[0]}`);
  return parts.join("; ");
}

/** Draws the tree: one line per runnable, indented under its parent. */
export function renderSupervisionTree(roots: readonly SupervisionTreeNode[]): string {
  const rows: Row[] = [];
  flatten(roots, "", rows, true);
  return renderTable<Row>(
    [
      { heading: "RUNNABLE", cell: (r) => r.label },
      { heading: "STATE", cell: (r) => r.node.state },
      { heading: "RESTARTS", cell: (r) => String(r.node.restarts) },
      { heading: "DETAIL", cell: (r) => detail(r.node) },
    ],
    rows,
  );
}
