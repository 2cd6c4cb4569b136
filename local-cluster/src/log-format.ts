/**
 * How the local cluster shows its nodes' logs on a terminal: one compact
 * line per log line, `[node2] root.roleserver.heartbeat: heartbeats answered`,
 * instead of the nodes' JSON. etcd's own (very chatty) info lines are left
 * out unless asked for; its warnings and errors always show.
 */
import type { NodeLine } from "./node-process";

const etcdDn = /\.etcd$/;

/**
 * The terminal form of `line`, or undefined when it is not shown.
 *
 * @param verbose show etcd's info lines too.
 */
export function formatNodeLine(line: NodeLine, verbose = false): string | undefined {
  const prefix = `[${line.node}]`;
  if (line.message === undefined) {
    return `${prefix} ${line.stream === "stderr" ? "stderr: " : ""}${line.raw}`;
  }
  const level = line.level ?? "info";
  if (!verbose && level === "info" && line.dn !== undefined && etcdDn.test(line.dn)) {
    return undefined;
  }
  const levelTag = level === "info" ? "" : `${level.toUpperCase()} `;
  const dn = line.dn ? `${line.dn}: ` : "";
  return `${prefix} ${levelTag}${dn}${line.message}`;
}

/**
 * The last `limit` warnings, errors and stderr lines of `lines`, oldest
 * first, each in its terminal form after its time of day (UTC, to the ms):
 * what a failed run shows of a node's log.
 */
export function formatTrouble(lines: readonly NodeLine[], limit: number): string[] {
  return lines
    .filter((l) => l.level === "warn" || l.level === "error" || l.stream === "stderr")
    .slice(-limit)
    .map((l) => `${l.time?.slice(11, 23) ?? ""} ${formatNodeLine(l, true) ?? ""}`.trim());
}
