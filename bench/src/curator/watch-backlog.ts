/**
 * Scenario 3 of the curator benchmark, Watch backlog: with every registered
 * node's record (and the bootstrap node's), the time from opening
 * Watch(NodesInCluster) on an established connection until the
 * LAST_BACKLOGGED marker arrives — what every node pays to learn the
 * cluster. Target (absolute, see bench/README.md): 250 ms, on the median of
 * several rounds after a warm-up round.
 *
 * Then the same watch resumed from the revision the last full one reached
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
 * from the revision the last full one reached.
 */
export async function measureWatchBacklog(
  ctx: BenchContext,
  address: string,
  as: RegisteredNode,
  expected: number,
): Promise<WatchBacklog> {
  const client = new curatorProto.CuratorClient(
    address,
    curatorClientCredentials(ctx.cluster.caPem, as.tls),
  );
  const once = (resumeFromRevision: number) =>
    new Promise<Backlog>((resolve, reject) => {
      const started = performance.now();
      let nodes = 0;
      let up = 0;
      const stream = client.watch({
        kind: { $case: "nodesInCluster", nodesInCluster: { resumeFromRevision } },
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
    let last = await once(0);
    await once(last.end.revision);
    const result: WatchBacklog = { full: [], resumed: [], resumedNodes: 0 };
    for (let i = 0; i < ctx.config.watchRounds; i++) {
      last = await once(0);
      result.full.push(last.ms);
    }
    for (let i = 0; i < ctx.config.watchRounds; i++) {
      const resumed = await once(last.end.revision);
      result.resumed.push(resumed.ms);
      result.resumedNodes = Math.max(result.resumedNodes, resumed.nodes);
    }
    return result;
  } finally {
    client.close();
  }
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
      measure: `(3) Watch(all) resumed, backlog of ${backlog.resumedNodes} nodes at most (median of ${ctx.config.watchRounds})`,
      value: resumedMs,
      unit: "ms",
    },
    { measure: "(3) Watch(all): full / resumed", value: backlogMs / resumedMs, unit: "×" },
  ];
}
