/**
 * The listing options of `nodes` and `approve` without an ID — `--filter`,
 * `--columns`, `-o table|wide|json|yaml` — and the columns a listing can
 * show. Apart from the listing itself (`nodes-command.ts`: the cluster
 * session, CEL) so that the command table can describe them without
 * loading it.
 */
import type { Command } from "commander";
import type { NodeDescription } from "./node-view";
import { listingFormatOption, type ListingFormat } from "./output-formats";

/** A column of a listing: its heading and how to show a node's value. */
export interface NodeColumn {
  heading: string;
  cell: (node: NodeDescription) => string;
}

const dash = (value: string | number | null) => (value === null || value === "" ? "-" : `${value}`);

/** Every column a node listing can show, by its `--columns` name. */
export const allColumns: Record<string, NodeColumn> = {
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

/** The columns of `-o table`. */
export const tableColumns = ["id", "address", "state", "roles", "health", "heartbeat", "labels"];

/** The columns of `-o wide`: the table's, then version, curator and leader. */
export const wideColumns = [...tableColumns, "version", "curator", "leader"];

/** The listing flags, as commander hands them over. */
export interface ListingOptions {
  output: ListingFormat;
  filter?: string;
  columns?: string;
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
