/**
 * The raft state of the cluster as this member sees it: which member leads
 * raft and in which term (etcd's Maintenance.Status of the member), and which
 * peers this member has a raft connection with right now (etcd's
 * `etcd_network_active_peers` gauge, from the member's own /metrics).
 *
 * Both come from this member alone: every member's client endpoint is a unix
 * socket of its own node, so no member can ask another for its status. The
 * raft leader named is the one this member follows (every member of a healthy
 * cluster names the same one); the connections are this member's, so a peer
 * it cannot reach shows as unconnected even if others still reach it.
 *
 *   member's unix socket ─┬─ gRPC Maintenance.Status ──▶ leader, term, learner?
 *                         └─ HTTP GET /metrics ────────▶ etcd_network_active_peers{Local,Remote}
 *
 * etcd names members by 64-bit IDs. Its v3 API (as etcd3 decodes it) gives
 * them in decimal, its metrics and etcdctl in hex; this module speaks hex
 * everywhere ({@link hexMemberId}), as operators see IDs in etcdctl.
 */
import { request } from "node:http";
import type { Etcd3 } from "etcd3";
import { RaftStatusError } from "./errors";

/** The raft state of the cluster as one member sees it; see the module comment. */
export interface RaftStatus {
  /** The answering member's ID, hex. */
  memberId: string;
  /**
   * The ID (hex) of the member the answering member believes leads raft;
   * undefined while it knows of no leader (an election, or no quorum).
   */
  leaderId: string | undefined;
  /** The raft term the answering member is in: it grows with every election. */
  raftTerm: number;
  /** Whether the answering member is a learner. */
  isLearner: boolean;
  /**
   * IDs (hex) of the peers the answering member has an open raft stream with
   * right now (a peer it never reached, or whose stream broke, is missing);
   * undefined when its metrics did not answer in time, so nothing is known.
   */
  connectedPeers: ReadonlySet<string> | undefined;
}

/** How long {@link readRaftStatus} waits for the member by default. */
export const raftStatusTimeoutMs = 2_000;

/** The most of etcd's /metrics that is read (it is about 100 KiB). */
const maxMetricsBytes = 8 * 1024 * 1024;

/**
 * An etcd member ID as etcd3 gives it (decimal) in hex, as etcdctl and etcd's
 * metrics print it. Throws RaftStatusError on anything but a decimal number.
 */
export function hexMemberId(decimal: string): string {
  if (!/^\d{1,20}$/.test(decimal)) {
    throw new RaftStatusError(`${JSON.stringify(decimal)} is not an etcd member ID`);
  }
  return BigInt(decimal).toString(16);
}

/**
 * The raft state as the member at `socketPath` (whose client is `client`)
 * sees it; see {@link RaftStatus}. Rejects with RaftStatusError when the
 * member does not answer its status within `timeoutMs`; metrics that do not
 * answer in that time only leave `connectedPeers` unknown.
 */
export async function readRaftStatus(
  client: Etcd3,
  socketPath: string,
  timeoutMs = raftStatusTimeoutMs,
): Promise<RaftStatus> {
  const deadline = Date.now() + timeoutMs;
  const [status, metrics] = await Promise.all([
    client.maintenance.status({ deadline }).catch((e: unknown) => {
      throw new RaftStatusError(
        `the etcd member did not answer its status within ${timeoutMs} ms: ${String(e)}`,
        { cause: e },
      );
    }),
    fetchMetrics(socketPath, timeoutMs).catch(() => undefined),
  ]);
  const memberId = hexMemberId(status.header.member_id);
  return {
    memberId,
    // etcd says 0 while it knows no leader.
    leaderId: status.leader === "0" ? undefined : hexMemberId(status.leader),
    raftTerm: Number(status.raftTerm),
    isLearner: status.isLearner,
    connectedPeers: metrics === undefined ? undefined : activePeers(metrics, memberId),
  };
}

/**
 * The remote members (hex IDs) with a positive `etcd_network_active_peers`
 * gauge of the local member `local` in Prometheus text `metrics`.
 */
export function activePeers(metrics: string, local: string): Set<string> {
  const peers = new Set<string>();
  for (const line of metrics.split("\n")) {
    const sample = /^etcd_network_active_peers\{([^}]*)\}\s+(\S+)/.exec(line);
    if (sample === null || !(Number(sample[2]) > 0)) continue;
    const labels = new Map(
      [...sample[1].matchAll(/(\w+)="([^"]*)"/g)].map(([, name, value]) => [name, value]),
    );
    const remote = labels.get("Remote");
    if (labels.get("Local") === local && remote !== undefined) peers.add(remote);
  }
  return peers;
}

/**
 * GET /metrics of the member at `socketPath`, within `timeoutMs` (at most
 * 8 MiB); rejects with RaftStatusError on another HTTP status.
 */
export function fetchMetrics(socketPath: string, timeoutMs: number): Promise<string> {
  return new Promise((resolve, reject) => {
    const req = request(
      { socketPath, path: "/metrics", agent: false, signal: AbortSignal.timeout(timeoutMs) },
      (res) => {
        if (res.statusCode !== 200) {
          res.resume();
          reject(new RaftStatusError(`etcd's /metrics answered HTTP ${res.statusCode}`));
          return;
        }
        const chunks: Buffer[] = [];
        let size = 0;
        res.on("data", (chunk: Buffer) => {
          size += chunk.length;
          if (size > maxMetricsBytes) {
            req.destroy(new RaftStatusError(`etcd's /metrics is over ${maxMetricsBytes} bytes`));
            return;
          }
          chunks.push(chunk);
        });
        res.on("end", () => resolve(Buffer.concat(chunks).toString("utf8")));
        res.on("error", reject);
      },
    );
    req.on("error", reject);
    req.end();
  });
}
