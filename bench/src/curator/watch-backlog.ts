/**
 * Scenario 3 of the curator benchmark, Watch backlog: with every registered
 * node's record (and the bootstrap node's), the time from opening
 * Watch(NodesInCluster) on an established connection until the
 * LAST_BACKLOGGED marker arrives — what every node pays to learn the
 * cluster. Target (absolute, see bench/README.md): 250 ms, on the median of
 * several rounds after a warm-up round.
 *
 * Then the same watch resumed from the revision a full one reached
 * (`resume_from_revision`, what a node's directory does after a failover):
 * its time and how many nodes its backlog carried, beside the full one's in
 * the same run — every node of a cluster watches all nodes, so after a
 * failover the full backlog is N² records and the resumed one the nodes that
 * changed.
 */
import { performance } from "node:perf_hooks";
import { curatorClientCredentials } from "@metropolis/curator";
import { common, curator as curatorProto } from "@metropolis/proto";
import { median, type Row } from "../report";
import type { BenchContext } from "./bench-context";
import { isCancelled } from "./grpc-calls";
import type { RegisteredNode } from "./registration";

const TARGET_MS = 250;

/** The rounds of {@link measureWatchBacklog}. */
export interface WatchBacklog {
  /** Each full round's time to LAST_BACKLOGGED, ms. */
  full: number[];
  /** Each resumed round's time to LAST_BACKLOGGED, ms. */
  resumed: number[];
  /** The most nodes a resumed round's backlog carried. */
  resumedNodes: number;
  /**
   * The leader's CPU per full and per resumed round, ms (mean over the
   * rounds, less what it spends at rest), when the caller can read it and
   * the leader has nothing else to do meanwhile.
   */
  leaderCpuMs?: { full: number; resumed: number };
}

/** One watch's backlog: its time, its nodes, and what its end said. */
interface Backlog {
  ms: number;
  nodes: number;
  end: curatorProto.WatchResponse;
}

/**
 * Times Watch(NodesInCluster) until LAST_BACKLOGGED, on one connection of
 * node `as`: full rounds (`expected` nodes, all UP), then rounds resumed
 * from the revision the warm-up round (a full one) reached. With `leaderCpuMs` (the
 * leader's process CPU so far), also what each kind of round cost it.
 */
export async function measureWatchBacklog(
  ctx: BenchContext,
  address: string,
  as: RegisteredNode,
  expected: number,
  leaderCpuMs?: () => number,
): Promise<WatchBacklog> {
  const client = new curatorProto.CuratorClient(
    address,
    curatorClientCredentials(ctx.cluster.caPem, as.tls),
  );
  // A resume names the revision and the etcd cluster it belongs to (the
  // leader resumes only its own cluster's).
  const once = (resumeFromRevision: number, resumeEtcdClusterId = "") =>
    new Promise<Backlog>((resolve, reject) => {
      const started = performance.now();
      let nodes = 0;
      let up = 0;
      const stream = client.watch({
        kind: {
          $case: "nodesInCluster",
          nodesInCluster: { resumeFromRevision, resumeEtcdClusterId },
        },
      });
      stream.on("data", (res: curatorProto.WatchResponse) => {
        nodes += res.nodes.length;
        up += res.nodes.filter((n) => n.state === common.NodeState.UP).length;
        if (res.progress !== curatorProto.WatchResponse_Progress.LAST_BACKLOGGED) return;
        const ms = performance.now() - started;
        stream.cancel();
        if (res.nodeCount !== expected)
          reject(new Error(`the leader counted ${res.nodeCount} nodes, expected ${expected}`));
        else if (resumeFromRevision > 0 && !res.resumed)
          reject(new Error(`the watch resumed from ${resumeFromRevision} was not resumed`));
        else if (resumeFromRevision === 0 && (nodes !== expected || up !== expected))
          reject(new Error(`backlog had ${nodes} nodes (${up} UP), expected ${expected} UP`));
        else resolve({ ms, nodes, end: res });
      });
      stream.on("error", (e) => {
        if (!isCancelled(e)) reject(e);
      });
    });
  try {
    // Warm-up: connects, and lets both sides' code get optimized.
    const warm = await once(0);
    await once(warm.end.revision, warm.end.etcdClusterId);
    const result: WatchBacklog = { full: [], resumed: [], resumedNodes: 0 };
    const rounds = ctx.config.watchRounds;
    const from = warm.end.revision;
    const fromCluster = warm.end.etcdClusterId;
    // What the leader spends at rest (its reconciler's passes, the garbage
    // of the warm-up), taken off each batch's CPU: /proc counts in 10 ms
    // ticks, and a resumed round costs a few ms at most.
    const idle = leaderCpuMs && (await cpuRate(leaderCpuMs, 1000));
    const resumedBatch = await leaderCpuOf(leaderCpuMs, idle, async () => {
      for (let i = 0; i < rounds * 5; i++) {
        const resumed = await once(from, fromCluster);
        result.resumed.push(resumed.ms);
        result.resumedNodes = Math.max(result.resumedNodes, resumed.nodes);
      }
    });
    const fullBatch = await leaderCpuOf(leaderCpuMs, idle, async () => {
      for (let i = 0; i < rounds; i++) result.full.push((await once(0)).ms);
    });
    if (resumedBatch !== undefined && fullBatch !== undefined)
      result.leaderCpuMs = { full: fullBatch / rounds, resumed: resumedBatch / (rounds * 5) };
    return result;
  } finally {
    client.close();
  }
}

/** CPU ms per wall ms of the process `cpuMs` reads, over `ms`. */
async function cpuRate(cpuMs: () => number, ms: number): Promise<number> {
  const cpu = cpuMs();
  const started = performance.now();
  await new Promise((r) => setTimeout(r, ms));
  return (cpuMs() - cpu) / (performance.now() - started);
}

/** The CPU `cpuMs` counts while `work` runs, less `idle` (per wall ms) of it; undefined without `cpuMs`. */
async function leaderCpuOf(
  cpuMs: (() => number) | undefined,
  idle: number | undefined,
  work: () => Promise<void>,
): Promise<number | undefined> {
  const cpu = cpuMs?.();
  const started = performance.now();
  await work();
  if (cpuMs === undefined || cpu === undefined || idle === undefined) return undefined;
  return cpuMs() - cpu - idle * (performance.now() - started);
}

/** The report row of the Watch backlog rounds, for a backlog of `nodes` nodes. */
export function watchBacklogRows(ctx: BenchContext, nodes: number, backlog: WatchBacklog): Row[] {
  const backlogMs = median(backlog.full);
  const resumedMs = median(backlog.resumed);
  return [
    {
      measure: `(3) Watch(all) backlog of ${nodes} nodes (median of ${ctx.config.watchRounds})`,
      value: backlogMs,
      unit: "ms",
      target: `< ${TARGET_MS} ms`,
      met: backlogMs < TARGET_MS,
    },
    {
      measure: `(3) Watch(all) resumed, backlog of ${backlog.resumedNodes} nodes at most (median of ${backlog.resumed.length})`,
      value: resumedMs,
      unit: "ms",
    },
    { measure: "(3) Watch(all): full / resumed", value: backlogMs / resumedMs, unit: "×" },
    ...(backlog.leaderCpuMs
      ? [
          {
            measure: "(3) leader process CPU per full Watch(all)",
            value: backlog.leaderCpuMs.full,
            unit: "ms",
          },
          {
            measure: "(3) leader process CPU per resumed Watch(all)",
            value: backlog.leaderCpuMs.resumed,
            unit: "ms",
          },
        ]
      : []),
  ];
}
