/**
 * etcd logs JSON lines (zap); this turns each one into a line of the
 * supervisor's log tree at the consensus DN, at etcd's own level, with its
 * structured fields kept as metadata.
 *
 * Two of etcd's lines are also facts the service acts on: that this member
 * was removed from its cluster ({@link reportsMemberRemoved}), and that a
 * joining member could not check its version against the running members
 * yet ({@link refusesJoinForNow}). etcd says them only with these words, so
 * they are read here, in the one module that speaks etcd's log format, and
 * leave it as typed states of the service.
 */
import type { Logger } from "@metropolis/supervisor";

const levels: Record<string, "debug" | "info" | "warn" | "error"> = {
  debug: "debug",
  info: "info",
  warn: "warn",
  error: "error",
  dpanic: "error",
  panic: "error",
  fatal: "error",
};

/** One of etcd's JSON log lines as an object; undefined when the line is not one. */
function parseEtcdLine(line: string): Record<string, unknown> | undefined {
  let entry: unknown;
  try {
    entry = JSON.parse(line);
  } catch {
    return undefined;
  }
  if (!entry || typeof entry !== "object" || Array.isArray(entry)) return undefined;
  return entry as Record<string, unknown>;
}

/** A `commandRunnable` `logLine` for etcd's output. Lines that are not JSON are logged as they are. */
export function logEtcdLine(line: string, stream: "stdout" | "stderr", logger: Logger): void {
  const entry = parseEtcdLine(line);
  if (!entry) {
    logger[stream === "stderr" ? "warn" : "info"](line);
    return;
  }
  const { level, msg, ts: _ts, ...fields } = entry;
  logger[levels[String(level)] ?? "info"](String(msg ?? line), fields);
}

/**
 * etcd's ErrMemberRemoved: the words with which etcd 3.4 (etcdserver) stops a
 * member that its cluster removed — whether it applies its own removal while
 * running, replays it from its log at a restart, or learns it from its peers,
 * who answer a removed member's raft traffic with 410 Gone. It then exits
 * (status 0) and asks for its data directory to be removed.
 */
const memberRemovedError = "the member has been permanently removed from the cluster";

/**
 * Whether `line` is etcd saying that this member was removed from its
 * cluster: its `server error` line with etcd's ErrMemberRemoved. It is
 * said by this member's own etcd, after its cluster committed the removal
 * (a peer tells only once it applied it), so it is proof from the source of
 * truth that the member's data will never be part of the cluster again.
 */
export function reportsMemberRemoved(line: string): boolean {
  const entry = parseEtcdLine(line);
  return entry?.msg === "server error" && entry.error === memberRemovedError;
}

/**
 * etcd 3.4's refusal to join when it could not read the version of any
 * running member (`IsCompatibleWithCluster`, when it starts without data and
 * with `--initial-cluster-state=existing`): the members it asks have just
 * added it, and a busy one answers its version request too late. Seen in CI
 * on a loaded machine, ten starts in a row in 2.7 s. It is a matter of
 * seconds, not a refusal of this member (that would be a removal or a
 * revoked certificate), so a joining member starts its etcd again.
 */
const joinNotYetError = "incompatible with current running cluster";

/** Whether `line` is etcd giving up a join for now: its fatal `discovery failed` line with the error above. */
export function refusesJoinForNow(line: string): boolean {
  const entry = parseEtcdLine(line);
  return entry?.msg === "discovery failed" && entry.error === joinNotYetError;
}
