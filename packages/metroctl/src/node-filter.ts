/**
 * `--filter EXPR`: which nodes a listing shows, as a CEL expression over the
 * node record (`node`, a {@link NodeDescription}), e.g.
 *
 *   node.state == "UP" && "worker" in node.roles
 *   node.labels["zone"] == "a"
 *   node.curator.leader
 *
 * The expression is parsed and type-checked against the record's declared
 * fields before anything is sent, so a typo (`node.sate`) or a comparison
 * of a string with a number is a usage error naming the position, not an
 * empty listing. CEL is what Monogon's metroctl filters with; the
 * implementation is @marcbachmann/cel-js (zero dependencies, typed).
 */
import { Environment, type ParseResult } from "@marcbachmann/cel-js";
import { UsageError } from "./errors";
import type { NodeDescription } from "./node-view";

/** The declared fields of `node`: a field not listed here is a usage error. */
const nodeSchema = {
  id: "string",
  address: "dyn", // string, or null before the node's first status
  state: "string",
  roles: "list<string>",
  health: "string",
  heartbeatAgeSeconds: "dyn", // double, or null if no heartbeat was heard
  labels: "map<string, string>",
  version: "dyn",
  bootId: "dyn",
  statusTime: "dyn",
  consensus: { member: "bool", voter: "dyn" },
  curator: { running: "bool", port: "dyn", leader: "bool" },
} as const;

const environment = new Environment({
  limits: { maxAstNodes: 1000, maxDepth: 50 },
}).registerVariable({ name: "node", schema: nodeSchema });

/** The message of a CEL error without its source excerpt, and where it points. */
function describeCelError(e: unknown, expression: string): string {
  const error = e as { message?: unknown; range?: { start?: unknown } };
  const message = String(error.message ?? e).split("\n")[0];
  const start = error.range?.start;
  if (typeof start !== "number") return message;
  const near = expression.slice(start, start + 20);
  return `${message} at position ${start + 1}${near ? ` (near "${near}")` : " (end of expression)"}`;
}

/** A checked filter: true for the nodes to show. */
export type NodeFilter = (node: NodeDescription) => boolean;

/** Parses and type-checks `expression`; a {@link UsageError} (`--filter: …`) if it is not a bool over `node`. */
export function parseNodeFilter(expression: string): NodeFilter {
  let parsed: ParseResult;
  try {
    parsed = environment.parse(expression);
  } catch (e) {
    throw new UsageError(`--filter: ${describeCelError(e, expression)}`, { cause: e });
  }
  const check = parsed.check();
  if (!check.valid) {
    throw new UsageError(`--filter: ${describeCelError(check.error, expression)}`, {
      cause: check.error,
    });
  }
  if (check.type !== "bool" && check.type !== "dyn") {
    throw new UsageError(`--filter: the expression is a ${check.type}, not a bool`);
  }
  return (node) => {
    try {
      // A label the node does not have is an error in CEL ("No such key"): such a node does
      // not match. Write `"zone" in node.labels && …` to say so explicitly.
      return parsed({ node }) === true;
    } catch {
      return false;
    }
  };
}
