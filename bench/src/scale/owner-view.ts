/**
 * The cluster as its owner sees it, through the Management API of whichever
 * curator leads (found and followed by a `CuratorConnection`, as metroctl's
 * is): how many of a set of nodes the leader reports HEALTHY, waiting until
 * all of them are, and owner clients that list every node once a second (the
 * load of operators and dashboards on the leader).
 */
import { performance } from "node:perf_hooks";
import {
  CuratorConnection,
  unaryCall,
  type CuratorAddress,
  type CuratorKeepalive,
  type TlsPem,
} from "@metropolis/curator";
import { common, type api } from "@metropolis/proto";

/**
 * The keepalive of the connection through which the benchmark watches the
 * nodes come back (see {@link untilAllHealthy}): a ping every second, 2 s to
 * answer. It is the instrument: with an operator's keepalive (a ping every
 * 10 s, 20 s to answer) a leader that hangs (`--freeze`) held its listings
 * for up to 30 s, and the benchmark then measured its own connection, not
 * the nodes (which give a hung leader up after 10 s).
 */
export const instrumentKeepalive = { timeMs: 1000, timeoutMs: 2000 };

/** An owner's connection to the cluster's leader, with an operator's keepalive unless given. */
export function ownerConnection(
  caPem: string,
  owner: TlsPem,
  curators: readonly CuratorAddress[],
  keepalive?: CuratorKeepalive,
): CuratorConnection {
  return new CuratorConnection({
    endpoints: curators,
    ca: caPem,
    identity: { cert: owner.cert, key: owner.key },
    keepalive,
  });
}

/** Every node of the cluster, as the leader lists it to its owner. */
export async function listNodes(owner: CuratorConnection, timeoutMs = 30_000): Promise<api.Node[]> {
  const res = await owner.call(
    (leader) =>
      unaryCall<api.GetNodesRequest, api.GetNodesResponse>(
        leader.management.getNodes.bind(leader.management),
        { states: [], roles: [], labels: new Map() },
      ),
    { timeoutMs },
  );
  return res.nodes;
}

/** Sets label `key` of node `nodeId` to `value`, as the owner (Management.UpdateNodeLabels). */
export async function setNodeLabel(
  owner: CuratorConnection,
  nodeId: string,
  key: string,
  value: string,
): Promise<void> {
  await owner.call((leader) =>
    unaryCall<api.UpdateNodeLabelsRequest, api.UpdateNodeLabelsResponse>(
      leader.management.updateNodeLabels.bind(leader.management),
      { node: { $case: "id", id: nodeId }, add: new Map([[key, value]]), remove: [] },
    ),
  );
}

/** How many of `ids` the leader reports HEALTHY. */
export async function healthyCount(
  owner: CuratorConnection,
  ids: ReadonlySet<string>,
  timeoutMs?: number,
): Promise<number> {
  const nodes = await listNodes(owner, timeoutMs);
  return nodes.filter((n) => ids.has(n.id) && n.health === common.NodeHealth.HEALTHY).length;
}

/** How long a poll of the owner's view took to reach every node HEALTHY, and what it saw on the way. */
export interface Recovery {
  /** Time until every node was HEALTHY, or until the wait gave up (see `complete`). */
  ms: number;
  /** Whether every node was HEALTHY in the end; false when the wait gave up at its timeout. */
  complete: boolean;
  /** Nodes HEALTHY at the last poll. */
  healthy: number;
  /** [ms since the start, nodes HEALTHY (-1: the listing failed)] of every poll. */
  timeline: [number, number][];
}

/**
 * Polls the leader every `everyMs` until it reports every one of `ids`
 * HEALTHY. Each poll may take 5 s at most (a failed one counts as none
 * HEALTHY), so that a stalled listing shows in the timeline rather than
 * hiding it. Gives up after `timeoutMs` (`complete: false`, with how many
 * were HEALTHY by then), so that a run goes on to its other figures.
 */
export async function untilAllHealthy(
  owner: CuratorConnection,
  ids: ReadonlySet<string>,
  timeoutMs: number,
  progress: (what: string) => void,
  /** Says more about the cluster in the progress lines (who leads, as each curator sees it). */
  describe: () => string | Promise<string> = () => "",
  everyMs = 500,
): Promise<Recovery> {
  const started = performance.now();
  const timeline: [number, number][] = [];
  let shown = 0;
  for (;;) {
    let healthy = -1;
    let failure = "";
    try {
      healthy = await healthyCount(owner, ids, 5000);
    } catch (e) {
      // No leader yet (a failover), or one too busy to answer in time: poll again.
      failure = e instanceof Error ? e.message : String(e);
    }
    const elapsed = performance.now() - started;
    timeline.push([Math.round(elapsed), healthy]);
    if (healthy === ids.size) return { ms: elapsed, complete: true, healthy, timeline };
    if (elapsed > timeoutMs) {
      progress(
        `  gave up: ${healthy} of ${ids.size} HEALTHY after ${(elapsed / 1000).toFixed(1)} s`,
      );
      return { ms: elapsed, complete: false, healthy, timeline };
    }
    if (elapsed - shown > 5000) {
      shown = elapsed;
      const seen = healthy < 0 ? `no answer (${failure})` : `${healthy} of ${ids.size} HEALTHY`;
      progress(`  ${seen} after ${(elapsed / 1000).toFixed(1)} s; curators: ${await describe()}`);
    }
    await new Promise((r) => setTimeout(r, everyMs));
  }
}

/** Owner clients each listing every node once a second, until stopped. */
export class ListingOwners {
  /** Listings answered, and the time each took (ms). */
  readonly latencies: number[] = [];
  failures = 0;
  private stopped = false;
  private readonly loops: Promise<void>[];
  private readonly connections: CuratorConnection[];

  constructor(count: number, connect: () => CuratorConnection) {
    this.connections = Array.from({ length: count }, connect);
    this.loops = this.connections.map((c, i) => this.loop(c, (i * 1000) / count));
  }

  private async loop(connection: CuratorConnection, offsetMs: number): Promise<void> {
    await new Promise((r) => setTimeout(r, offsetMs));
    while (!this.stopped) {
      const started = performance.now();
      try {
        await listNodes(connection);
        this.latencies.push(performance.now() - started);
      } catch {
        this.failures++;
      }
      const wait = 1000 - (performance.now() - started);
      if (wait > 0 && !this.stopped) await new Promise((r) => setTimeout(r, wait));
    }
  }

  async stop(): Promise<void> {
    this.stopped = true;
    await Promise.all(this.loops);
    for (const c of this.connections) c.close();
  }
}
