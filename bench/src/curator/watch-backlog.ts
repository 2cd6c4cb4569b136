/**
 * Scenario 3 of the curator benchmark, Watch backlog: with every registered
 * node's record (and the bootstrap node's), the time from opening
 * Watch(NodesInCluster) on an established connection until the
 * LAST_BACKLOGGED marker arrives — what every node pays to learn the
 * cluster. Target (absolute, see bench/README.md): 250 ms, on the median of
 * several rounds after a warm-up round.
 */
import { performance } from "node:perf_hooks";
import { curatorClientCredentials } from "@metropolis/curator";
import { common, curator as curatorProto } from "@metropolis/proto";
import { median, type Row } from "../report";
import type { BenchContext } from "./bench-context";
import { isCancelled } from "./grpc-calls";
import type { RegisteredNode } from "./registration";

const TARGET_MS = 250;

/** Times Watch(NodesInCluster) until LAST_BACKLOGGED, on one connection of node `as`; `expected` nodes, all UP. */
export async function measureWatchBacklog(
  ctx: BenchContext,
  address: string,
  as: RegisteredNode,
  expected: number,
): Promise<number[]> {
  const client = new curatorProto.CuratorClient(
    address,
    curatorClientCredentials(ctx.cluster.caPem, as.tls),
  );
  const once = () =>
    new Promise<number>((resolve, reject) => {
      const started = performance.now();
      let nodes = 0;
      let up = 0;
      const stream = client.watch({
        kind: { $case: "nodesInCluster", nodesInCluster: { resumeFromRevision: 0 } },
      });
      stream.on("data", (res: curatorProto.WatchResponse) => {
        nodes += res.nodes.length;
        up += res.nodes.filter((n) => n.state === common.NodeState.UP).length;
        if (res.progress !== curatorProto.WatchResponse_Progress.LAST_BACKLOGGED) return;
        const elapsed = performance.now() - started;
        stream.cancel();
        if (nodes !== expected || up !== expected)
          reject(new Error(`backlog had ${nodes} nodes (${up} UP), expected ${expected} UP`));
        else resolve(elapsed);
      });
      stream.on("error", (e) => {
        if (!isCancelled(e)) reject(e);
      });
    });
  try {
    await once(); // warm-up: connects, and lets both sides' code get optimized
    const times: number[] = [];
    for (let i = 0; i < ctx.config.watchRounds; i++) times.push(await once());
    return times;
  } finally {
    client.close();
  }
}

/** The report row of the Watch backlog rounds, for a backlog of `nodes` nodes. */
export function watchBacklogRows(
  ctx: BenchContext,
  nodes: number,
  times: readonly number[],
): Row[] {
  const backlogMs = median(times);
  return [
    {
      measure: `(3) Watch(all) backlog of ${nodes} nodes (median of ${ctx.config.watchRounds})`,
      value: backlogMs,
      unit: "ms",
      target: `< ${TARGET_MS} ms`,
      met: backlogMs < TARGET_MS,
    },
  ];
}
