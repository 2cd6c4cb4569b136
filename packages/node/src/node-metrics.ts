/**
 * The node's own metrics, next to the supervisor's: its cluster state, and
 * whether it runs a consensus member, leads the curators, and runs
 * workloads. A runnable keeps the latest values; the gauges read them when
 * Prometheus scrapes.
 */
import type { ClusterManager } from "@metropolis/cluster";
import { Followers, iterateWatcher, type Watcher } from "@metropolis/event";
import { common } from "@metropolis/proto";
import type { Roleserver } from "@metropolis/roleserve";
import type { Runnable } from "@metropolis/supervisor";
import { Gauge, type Registry } from "prom-client";
import { readGauge } from "./metrics-server";

interface Latest {
  state: common.ClusterState;
  consensus: boolean;
  leader: boolean;
  workloads: number;
  nodeId?: string;
}

/** Registers the node's gauges in `registry`; the returned runnable keeps them current. */
export function nodeMetricsRunnable(
  registry: Registry,
  manager: ClusterManager,
  roleserver: Roleserver,
): Runnable {
  const latest: Latest = {
    state: common.ClusterState.UNKNOWN,
    consensus: false,
    leader: false,
    workloads: 0,
  };
  new Gauge({
    name: "metropolis_cluster_state",
    help: "1 for this node's current cluster state (UNKNOWN, FOREIGN, TRUSTED, HOME, DISOWNING, SPLIT).",
    labelNames: ["state"],
    registers: [registry],
    collect() {
      this.reset();
      this.set({ state: common.clusterStateToJSON(latest.state).replace("CLUSTER_STATE_", "") }, 1);
    },
  });
  const flag = (name: string, help: string, read: () => number) =>
    readGauge(registry, name, help, read);
  flag("metropolis_consensus_running", "1 while this node runs an etcd member.", () =>
    Number(latest.consensus),
  );
  flag("metropolis_curator_leader", "1 while this node's curator leads the cluster.", () =>
    Number(latest.leader),
  );
  flag(
    "metropolis_workloads_running",
    "Workload processes this node runs as a worker.",
    () => latest.workloads,
  );

  return async (ctx) => {
    const followers = new Followers();
    let leaders: Watcher<unknown> | undefined;
    followers.follow(manager.status, (s) => {
      latest.state = s.state;
      latest.consensus = s.hasLocalConsensus;
      latest.nodeId = s.credentials?.nodeId;
    });
    followers.follow(roleserver.values.workloadStatus, (w) => {
      latest.workloads = w.running ? w.workloads.length : 0;
    });
    followers.follow(roleserver.values.localControlPlane, (plane) => {
      // A new control plane has a new curator: follow its leader instead.
      leaders?.close();
      latest.leader = false;
      if (!plane) return;
      const watcher = plane.curator.leader.watch();
      leaders = watcher;
      void (async () => {
        for await (const leader of iterateWatcher(watcher)) {
          latest.leader = leader !== undefined && leader.nodeId === latest.nodeId;
        }
      })();
    });
    ctx.healthy();
    await ctx.untilAborted();
    leaders?.close();
    await followers.close();
  };
}
