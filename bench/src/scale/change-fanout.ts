/**
 * How fast one change of a node reaches the nodes watching the cluster:
 * `watchers` simulated nodes each hold Watch(NodesInCluster) on the leader;
 * the owner changes a label of one node `changes` times, one change at a
 * time, and each watcher's latency from the owner's call to the event naming
 * that label value is recorded.
 */
import { performance } from "node:perf_hooks";
import { curatorClientCredentials, type CuratorConnection } from "@metropolis/curator";
import { curator as curatorProto } from "@metropolis/proto";
import { isCancelled } from "../curator/grpc-calls";
import type { RegisteredNode } from "../curator/registration";
import { setNodeLabel } from "./owner-view";

const LABEL = "bench.scale/change";

/** Latencies (ms) of every change at every watcher. */
export async function measureChangeFanout(
  leaderAddress: string,
  caPem: string,
  watchers: readonly RegisteredNode[],
  owner: CuratorConnection,
  target: string,
  changes: number,
): Promise<number[]> {
  const latencies: number[] = [];
  let expected = "";
  let changedAt = 0;
  let seen = 0;
  let onSeen = () => {};
  const clients: curatorProto.CuratorClient[] = [];
  const streams: ReturnType<curatorProto.CuratorClient["watch"]>[] = [];
  try {
    await Promise.all(
      watchers.map(
        (w) =>
          new Promise<void>((resolve, reject) => {
            const client = new curatorProto.CuratorClient(
              leaderAddress,
              curatorClientCredentials(caPem, w.tls),
            );
            clients.push(client);
            const stream = client.watch({
              kind: {
                $case: "nodesInCluster",
                nodesInCluster: { resumeFromRevision: 0, resumeEtcdClusterId: "" },
              },
            });
            streams.push(stream);
            let backlogged = false;
            stream.on("data", (res: curatorProto.WatchResponse) => {
              if (res.progress === curatorProto.WatchResponse_Progress.LAST_BACKLOGGED) {
                backlogged = true;
                resolve();
                return;
              }
              if (!backlogged || expected === "") return;
              if (res.nodes.some((n) => n.id === target && n.labels.get(LABEL) === expected)) {
                latencies.push(performance.now() - changedAt);
                seen++;
                onSeen();
              }
            });
            stream.on("error", (e) => {
              if (!isCancelled(e)) reject(e);
            });
          }),
      ),
    );
    for (let i = 0; i < changes; i++) {
      seen = 0;
      const all = new Promise<void>((resolve, reject) => {
        const timer = setTimeout(
          () =>
            reject(new Error(`change ${i} reached ${seen} of ${watchers.length} watchers in 10 s`)),
          10_000,
        );
        onSeen = () => {
          if (seen < watchers.length) return;
          clearTimeout(timer);
          resolve();
        };
      });
      expected = `v${i}`;
      changedAt = performance.now();
      await setNodeLabel(owner, target, LABEL, expected);
      await all;
    }
    return latencies;
  } finally {
    for (const s of streams) s.cancel();
    for (const c of clients) c.close();
  }
}
