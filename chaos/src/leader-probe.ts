/**
 * The leader probe: asks every curator *directly* — not through the
 * leader search of CuratorConnection, so that a curator cut off from the
 * others is asked as well — every 400 ms, as the owner, two leader-only
 * calls with a 1 s deadline each:
 *
 * - Management.GetClusterConsensus: a leader answers with its node and its
 *   term (the create revision of its election key), and the raft leader as
 *   its etcd member sees it. Kept as a `serve` observation with the term
 *   (history.ts `LeaderObservation`), and as the latest raft leader (for
 *   the nemesis' `isolate-raft-leader`).
 * - Management.GetNodes: a leader answers from its copy of the node
 *   records (lease-guarded). Kept as a read in the history (client
 *   `probe-<node>`, `servedBy` the node), checked like the workload's reads
 *   — a read served by an old leader after a newer one acknowledged a write
 *   is a stale read (stale-reads.ts) — and as a `serve` observation without
 *   a term.
 *
 * A follower answers both UNAVAILABLE ("not the leader"): nothing is kept.
 * Nothing here is ever retried; a call that did not answer in time is
 * simply not an observation.
 *
 * Guarantees: `stop()` resolves once every curator's current round is over
 * and every channel is closed.
 */
import { Metadata } from "@grpc/grpc-js";
import { ownerTowardsNode, curatorPort, type ClusterNode } from "@metropolis/local-cluster";
import type { OwnerCredentials } from "@metropolis/metroctl";
import { api } from "@metropolis/proto";
import { abortableSleep } from "@metropolis/supervisor";
import type { LeaderObservation, RegisterId } from "./history";
import type { HistoryRecorder } from "./history-recorder";
import { registerId, registerKeys } from "./workload";

export interface LeaderProbeOptions {
  /** Every node that may run a curator. */
  curators: readonly ClusterNode[];
  owner: OwnerCredentials;
  recorder: HistoryRecorder;
  /** The nodes whose labels are the registers. */
  registerNodes: readonly ClusterNode[];
  /** The run's clock. */
  now: () => number;
  /** Pause between two rounds on one curator (default 400 ms). */
  intervalMs?: number;
  /** Deadline of each call (default 1 s). */
  deadlineMs?: number;
}

/** The raft leader as a curator leader's etcd member named it, and when. */
export interface RaftLeaderSeen {
  node: ClusterNode;
  term: number;
  at: number;
}

/** Probes the curators; see the module comment. */
export class LeaderProbe {
  /** Every answer of a leader: `serve` observations. */
  readonly observations: LeaderObservation[] = [];
  /** GetNodes reads that answered, GetClusterConsensus answers. */
  reads = 0;
  consensusAnswers = 0;
  private latestRaft: RaftLeaderSeen | undefined;
  private readonly stopping = new AbortController();
  private running: Promise<unknown> | undefined;

  constructor(private readonly opts: LeaderProbeOptions) {}

  /** Starts probing every curator. */
  start(): void {
    this.running = Promise.all(this.opts.curators.map((c) => this.probe(c)));
  }

  /** Stops probing. */
  async stop(): Promise<void> {
    this.stopping.abort();
    await this.running;
  }

  /** The raft leader a leader named within the last `maxAgeMs`, if any. */
  raftLeader(maxAgeMs = 3000): ClusterNode | undefined {
    const seen = this.latestRaft;
    return seen !== undefined && this.opts.now() - seen.at <= maxAgeMs ? seen.node : undefined;
  }

  private async probe(node: ClusterNode): Promise<void> {
    const { signal } = this.stopping;
    let client: api.ManagementClient | undefined;
    try {
      while (!signal.aborted) {
        // The node ID is known once the node enrolled; the channel is made once.
        client ??= new api.ManagementClient(
          `${node.address}:${curatorPort}`,
          ownerTowardsNode(this.opts.owner, node.id),
        );
        await this.consensus(node, client);
        await this.nodes(node, client);
        await abortableSleep(this.opts.intervalMs ?? 400, signal).catch(() => undefined);
      }
    } finally {
      client?.close();
    }
  }

  private deadline(): number {
    return Date.now() + (this.opts.deadlineMs ?? 1000);
  }

  private async consensus(node: ClusterNode, client: api.ManagementClient): Promise<void> {
    const invokedAt = this.opts.now();
    const res = await new Promise<api.GetClusterConsensusResponse | undefined>((resolve) =>
      client.getClusterConsensus({}, new Metadata(), { deadline: this.deadline() }, (e, r) =>
        resolve(e ? undefined : r),
      ),
    );
    const completedAt = this.opts.now();
    if (!res?.leader) return;
    this.consensusAnswers++;
    this.observations.push({
      kind: "serve",
      curator: this.nameOf(res.leader.nodeId) ?? node.name,
      term: res.leader.term,
      call: "GetClusterConsensus",
      invokedAt,
      completedAt,
    });
    const raftId = res.raft?.leaderMemberId ?? "";
    const member = res.members.find((m) => raftId !== "" && m.memberId === raftId);
    const raftNode = this.opts.curators.find((c) => c.id === member?.nodeId);
    if (raftNode) this.latestRaft = { node: raftNode, term: res.raft?.term ?? 0, at: completedAt };
  }

  private async nodes(node: ClusterNode, client: api.ManagementClient): Promise<void> {
    const op = this.opts.recorder.invoke(`probe-${node.name}`, {
      type: "read",
      source: "get-nodes",
    });
    op.sentTo(node.name);
    const res = await new Promise<api.GetNodesResponse | undefined>((resolve) =>
      client.getNodes(
        { states: [], roles: [], labels: new Map() },
        new Metadata(),
        { deadline: this.deadline() },
        (e, r) => resolve(e ? undefined : r),
      ),
    );
    if (res === undefined) {
      op.drop();
      return;
    }
    const values = new Map<RegisterId, string | null>();
    for (const target of this.opts.registerNodes) {
      const seen = res.nodes.find((n) => n.id === target.id);
      if (!seen) continue;
      for (const key of registerKeys) {
        values.set(registerId(target.id, key), seen.labels.get(key) ?? null);
      }
    }
    op.ok(values);
    this.reads++;
  }

  private nameOf(id: string): string | undefined {
    return this.opts.curators.find((c) => c.id === id)?.name;
  }
}
