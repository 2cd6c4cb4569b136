/**
 * The vocabulary of the authorization matrices (the curator's, in
 * authz-matrix.test.ts, and the Debug service's, in
 * packages/node/test/debug-authz.test.ts): the callers, the expected
 * outcomes, rows, and the copies of the tables in the packages' READMEs.
 *
 * A README shows a table between `<!-- authz-matrix:<name>:begin -->` and
 * `<!-- authz-matrix:<name>:end -->`. {@link readmeTables} compares its cells
 * with the test's table, and with `METROPOLIS_WRITE_AUTHZ_README=1` first
 * rewrites it from the test's table.
 */
import { readFileSync, writeFileSync } from "node:fs";
import { accessRoles, mayCall } from "./access-roles";

/** Who calls: the columns of a matrix. */
export const identities = [
  /** No client certificate at all. */
  "none",
  /** Self-signed, claiming a real node's ID as CN (for a key that is not that node's). */
  "self-signed node",
  /** Self-signed, claiming CN=owner. */
  "self-signed owner",
  /** Issued by another CA (with the cluster CA's name) for a real node's ID as CN. */
  "foreign node",
  /** Issued by another CA (with the cluster CA's name) for CN=owner. */
  "foreign owner",
  /**
   * Self-signed for the caller's own key, CN = that key's node ID, as
   * registering nodes present: the key the call is about (a fresh node key
   * for RegisterNode, a STANDBY node's key for CommitNode, an UP node's join
   * key for JoinNode, the owner key for Escrow), a fresh key otherwise.
   */
  "ephemeral",
  /** An UP node of the cluster (no roles). */
  "node",
  /** A node deleted by the owner, presenting its still valid node certificate. */
  "deleted node",
  /** The owner's certificate. */
  "owner",
  /** A scoped credential of the reader role (`metroctl access issue --role reader`). */
  "reader",
  /** A scoped credential of the operator role. */
  "operator",
  /** A scoped credential of the backup role. */
  "backup",
  /** A scoped credential (reader) past its notAfter. */
  "expired",
] as const;
export type Identity = (typeof identities)[number];

/** An expected outcome: OK, or the name of the gRPC status the call is refused with. */
export type Expected =
  | "OK"
  | "UNAUTHENTICATED"
  | "PERMISSION_DENIED"
  | "NOT_FOUND"
  | "UNIMPLEMENTED"
  | "UNAVAILABLE"
  | "FAILED_PRECONDITION"
  | "INVALID_ARGUMENT";

/** The expected outcome of one method for each caller. */
export type Row = Record<Identity, Expected>;

/** The row of a method every caller gets the same answer from. */
export const everyone = (outcome: Expected): Row => ({
  none: outcome,
  "self-signed node": outcome,
  "self-signed owner": outcome,
  "foreign node": outcome,
  "foreign owner": outcome,
  ephemeral: outcome,
  node: outcome,
  "deleted node": outcome,
  owner: outcome,
  reader: outcome,
  operator: outcome,
  backup: outcome,
  expired: outcome,
});

/**
 * The row of a method that needs a certificate: callers that prove nothing
 * (none, self-signed claims, another CA's certificates, a revoked or expired
 * one) are UNAUTHENTICATED, every proven identity PERMISSION_DENIED, except
 * those `granted` otherwise. The scoped credentials' cells are those of the
 * roles' table ({@link withAccessRoles}), not given here.
 */
export const certified = (granted: Partial<Row>): Row => ({
  none: "UNAUTHENTICATED",
  "self-signed node": "UNAUTHENTICATED",
  "self-signed owner": "UNAUTHENTICATED",
  "foreign node": "UNAUTHENTICATED",
  "foreign owner": "UNAUTHENTICATED",
  ephemeral: "PERMISSION_DENIED",
  node: "PERMISSION_DENIED",
  "deleted node": "UNAUTHENTICATED",
  owner: "PERMISSION_DENIED",
  reader: "PERMISSION_DENIED",
  operator: "PERMISSION_DENIED",
  backup: "PERMISSION_DENIED",
  expired: "UNAUTHENTICATED",
  ...granted,
});

/**
 * `row` (of the method `Service.Method` `key`) with the cells of the scoped
 * credentials taken from the one table of access-roles.ts: a role the table
 * lets call the method gets the owner's outcome, any other keeps the row's
 * (PERMISSION_DENIED from {@link certified}). So the matrix, and the README
 * tables made from it, say what the table says.
 */
export function withAccessRoles(key: string, row: Row): Row {
  const roles = Object.fromEntries(
    accessRoles.filter((role) => mayCall(role, key)).map((role) => [role, row.owner]),
  );
  return { ...row, ...roles };
}

/** A table: a row per method key (`Service.Method`). */
export type Table = Record<string, Row>;

/** `table` as Markdown, rows sorted by method. */
export function markdownTable(table: Table): string {
  const header = `| method | ${identities.join(" | ")} |`;
  const rule = `| --- | ${identities.map(() => "---").join(" | ")} |`;
  const rows = Object.keys(table)
    .sort()
    .map((key) => `| ${key} | ${identities.map((i) => table[key][i]).join(" | ")} |`);
  return [header, rule, ...rows].join("\n");
}

/**
 * The cells of a Markdown table, row by row, without the header's rule:
 * Prettier pads the columns of Markdown tables, which changes no cell.
 */
export function tableCells(markdown: string): string[][] {
  return markdown
    .split("\n")
    .map((line) => line.trim())
    .filter((line) => line.startsWith("|") && !/^\|[\s|:-]+\|$/.test(line))
    .map((line) =>
      line
        .slice(1, -1)
        .split("|")
        .map((cell) => cell.trim()),
    );
}

const markers = (name: string) =>
  [`<!-- authz-matrix:${name}:begin -->`, `<!-- authz-matrix:${name}:end -->`] as const;

/** Where the README's table `name` is: the text between its markers. */
function tableRange(readme: string, name: string): { from: number; to: number } {
  const [begin, end] = markers(name);
  const at = readme.indexOf(begin);
  const to = readme.indexOf(end);
  if (at === -1 || to === -1 || to < at) throw new Error(`README has no ${begin} … ${end}`);
  return { from: at + begin.length, to };
}

/**
 * The cells of each of `tables` as the README at `readmePath` shows them
 * (`shown`) and as the test has them (`expected`), to compare. With
 * `METROPOLIS_WRITE_AUTHZ_README=1`, the README is first rewritten from the
 * test's tables.
 */
export function readmeTables(
  readmePath: string,
  tables: Record<string, Table>,
): Record<string, { shown: string[][]; expected: string[][] }> {
  let readme = readFileSync(readmePath, "utf8");
  if (process.env.METROPOLIS_WRITE_AUTHZ_README === "1") {
    for (const [name, table] of Object.entries(tables)) {
      const { from, to } = tableRange(readme, name);
      readme = `${readme.slice(0, from)}\n\n${markdownTable(table)}\n\n${readme.slice(to)}`;
    }
    writeFileSync(readmePath, readme);
  }
  const result: Record<string, { shown: string[][]; expected: string[][] }> = {};
  for (const [name, table] of Object.entries(tables)) {
    const { from, to } = tableRange(readme, name);
    result[name] = {
      shown: tableCells(readme.slice(from, to)),
      expected: tableCells(markdownTable(table)),
    };
  }
  return result;
}
