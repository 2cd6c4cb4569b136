/**
 * What the partition-fault and clock tests share (partition-faults.test.ts,
 * clock-jump.test.ts): the owner probing every curator of a cluster at once
 * (direct-curator.ts: each call's invocation and return on the monotonic
 * clock), a register of sequential label writes made through whichever
 * curator leads, the checks over what the probes saw, the leader's view of
 * every node's health, and the nodes' etcd raft leader (each member's
 * status over its unix socket; MoveLeader to put it elsewhere).
 *
 * The checks conclude only what the times prove: an answer was made after
 * its call was invoked and before it returned.
 *   - A stale read: a read invoked after a write was acknowledged that shows
 *     an older value.
 *   - Two leaders at once: curator X served as the leader (named itself, or
 *     answered a read: followers refuse reads "not the leader") in a call
 *     that returned before a call in which Y served was invoked, and served
 *     again in a call invoked after that one returned — while X held one
 *     leadership all along (it did not begin a new one during the scenario:
 *     no `curator.leading` progress event of it, besides the one of the
 *     leadership it started with). A leadership is one stretch of time: the
 *     way back to leading is a new campaign, which logs that event
 *     (curator-machine.ts). Where X did begin another, the pattern proves
 *     nothing and is only reported.
 */
import { join } from "node:path";
import { performance } from "node:perf_hooks";
import { Metadata, type ServiceError } from "@grpc/grpc-js";
import { api, common } from "@metropolis/proto";
import { eventually } from "@metropolis/supervisor/testing";
import { Etcd3 } from "etcd3";
import { localNodeConfig, type ClusterNode } from "../local-cluster/src/cluster-launcher";
import { ownerTowardsNode } from "../local-cluster/src/cluster-view";
import { DirectCurator, startProbing, type Probe } from "./direct-curator";
import { curatorPort, type E2eCluster } from "./e2e-cluster";

/** One curator under observation: its node, the owner's direct client, what it answered. */
export interface ProbedCurator {
  node: ClusterNode;
  client: DirectCurator;
  probes: Probe[];
}

/** Whether `probe` shows the curator of node `nodeId` acting as the leader. */
export function servedAsLeader(probe: Probe, nodeId: string): boolean {
  return probe.kind === "GetCurrentLeader" ? probe.answer === nodeId : probe.failed === undefined;
}

/** One write of the register: a label value, when it was first asked for, when acknowledged. */
export interface RegisterWrite {
  value: string;
  invokedAt: number;
  ackedAt: number;
  /** The node whose curator acknowledged it. */
  through: string;
}

/** A proven or possible case of two curators leading at once; see the module comment. */
export interface DoubleLeader {
  /** The curator that served before and after. */
  twice: string;
  /** The curator that served in between. */
  between: string;
  /** Monotonic times: X's earlier call returned, Y's call invoked and returned, X's later call invoked. */
  times: [number, number, number, number];
}

/**
 * A scenario's observation of every curator of `nodes` (all probed from
 * `start()` to `stop()`), with the register (label `key` of node `subject`).
 */
export class CuratorObservation {
  readonly curators: ProbedCurator[];
  readonly writes: RegisterWrite[] = [];
  /** The leader when the observation began. */
  leaderAtStart = "";
  private cursors = new Map<string, number>();
  private probing: AbortController | undefined;
  private done: Promise<void>[] = [];

  private constructor(
    readonly e2e: E2eCluster,
    readonly subject: ClusterNode,
    readonly key: string,
    curators: ProbedCurator[],
  ) {
    this.curators = curators;
  }

  /** Direct clients of the curators of `nodes`; closed by `close()`. */
  static async create(
    e2e: E2eCluster,
    nodes: readonly ClusterNode[],
    subject: ClusterNode,
    key: string,
  ): Promise<CuratorObservation> {
    const owner = await e2e.owner();
    const curators = nodes.map((node) => ({
      node,
      client: new DirectCurator(node, ownerTowardsNode(owner, node.id)),
      probes: [],
    }));
    return new CuratorObservation(e2e, subject, key, curators);
  }

  curator(node: ClusterNode): ProbedCurator {
    const found = this.curators.find((c) => c.node === node);
    if (!found) throw new Error(`${node.name} is not observed`);
    return found;
  }

  /** Begins probing every curator; `leader` is who leads now (all agree). */
  start(leader: string): void {
    this.leaderAtStart = leader;
    this.probing = new AbortController();
    for (const c of this.curators) {
      this.cursors.set(c.node.id, c.node.process?.cursor() ?? 0);
      c.probes = [];
      const probed = startProbing(c.client, this.subject.id, this.key, this.probing.signal);
      c.probes = probed.probes;
      this.done.push(probed.done);
    }
  }

  /** Ends the probing, once every call in flight returned. */
  async stop(): Promise<void> {
    this.probing?.abort();
    await Promise.all(this.done);
    this.done = [];
  }

  close(): void {
    this.probing?.abort();
    for (const c of this.curators) c.client.close();
  }

  /** Waits until every curator answered `count` rounds of probes invoked after `t` (monotonic). */
  async probedAfter(t: number, what: string, count = 10, timeoutMs = 30_000): Promise<void> {
    await eventually(
      () => this.curators.every((c) => c.probes.filter((p) => p.invokedAt > t).length >= 2 * count),
      `${count} probes of every curator ${what}`,
      { timeoutMs, intervalMs: 100 },
    );
  }

  /**
   * Sets the register to `value` through whichever curator of `among` leads
   * (the one that names itself), retrying until one acknowledges it.
   */
  async write(
    value: string,
    among: readonly ClusterNode[],
    timeoutMs = 30_000,
  ): Promise<RegisterWrite> {
    const invokedAt = performance.now();
    const candidates = this.curators.filter((c) => among.includes(c.node));
    const through = await eventually(
      async () => {
        for (const c of candidates) {
          const leader = await c.client.leader().catch(() => "");
          if (leader !== c.node.id) continue;
          await c.client.setLabel(this.subject.id, this.key, value);
          return c.node;
        }
        return false;
      },
      `a curator of ${among.map((n) => n.name).join(", ")} leading, to acknowledge ${this.key}=${value}`,
      { timeoutMs, intervalMs: 100 },
    );
    const write = { value, invokedAt, ackedAt: performance.now(), through: through.id };
    this.writes.push(write);
    return write;
  }

  /**
   * Reads that show a value older than one acknowledged before they were
   * invoked (a value no write of the register made counts as older than all).
   */
  staleReads(): (Probe & { node: string })[] {
    const index = (value: string | undefined) => this.writes.findIndex((w) => w.value === value);
    return this.curators.flatMap((c) =>
      c.probes
        .filter((p) => p.kind === "GetNodes" && p.failed === undefined)
        .filter((p) => {
          let acked = -1;
          for (const [i, w] of this.writes.entries()) if (w.ackedAt < p.invokedAt) acked = i;
          return acked >= 0 && index(p.answer) < acked;
        })
        .map((p) => ({ ...p, node: c.node.name })),
    );
  }

  /** How many leaderships node `nodeId` held during the observation (see the module comment). */
  leaderships(node: ClusterNode): number {
    const since = this.cursors.get(node.id) ?? 0;
    const started = (node.process?.lines(since) ?? []).filter(
      (l) => l.progress?.event === "curator.leading",
    ).length;
    return (node.id === this.leaderAtStart ? 1 : 0) + started;
  }

  /**
   * Every X, Y, X pattern of serving (see the module comment): `proven`
   * where X held one leadership through it, `unconcluded` where it began another.
   */
  doubleLeaders(): { proven: DoubleLeader[]; unconcluded: DoubleLeader[] } {
    const proven: DoubleLeader[] = [];
    const unconcluded: DoubleLeader[] = [];
    for (const x of this.curators) {
      const served = x.probes.filter((p) => servedAsLeader(p, x.node.id));
      if (served.length === 0) continue;
      for (const y of this.curators) {
        if (y === x) continue;
        for (const between of y.probes.filter((p) => servedAsLeader(p, y.node.id))) {
          const before = served.find((p) => p.returnedAt < between.invokedAt);
          const after = served.find((p) => p.invokedAt > between.returnedAt);
          if (!before || !after) continue;
          const found: DoubleLeader = {
            twice: x.node.name,
            between: y.node.name,
            times: [before.returnedAt, between.invokedAt, between.returnedAt, after.invokedAt],
          };
          (this.leaderships(x.node) <= 1 ? proven : unconcluded).push(found);
          break;
        }
      }
    }
    return { proven, unconcluded };
  }

  /** Calls in which `node`'s curator served as the leader. */
  served(node: ClusterNode): Probe[] {
    return this.curator(node).probes.filter((p) => servedAsLeader(p, node.id));
  }

  /** GetCurrentLeader answers of `node`'s curator naming someone other than `leader`. */
  named(node: ClusterNode, leader: string): Probe[] {
    return this.curator(node).probes.filter(
      (p) => p.kind === "GetCurrentLeader" && p.answer !== undefined && p.answer !== leader,
    );
  }

  /** One line on what the curators answered, for the test's output. */
  summary(): string {
    return this.curators
      .map((c) => {
        const counts = new Map<string, number>();
        for (const p of c.probes) {
          const what = `${p.kind} ${p.failed === undefined ? `→ ${nameOf(this.curators, p)}` : `failed ${p.failed.slice(0, 40)}`}`;
          counts.set(what, (counts.get(what) ?? 0) + 1);
        }
        return `${c.node.name}: ${[...counts].map(([w, n]) => `${n}× ${w}`).join(", ")}`;
      })
      .join("; ");
  }
}

/** A probe's answer in words: a node's name for a leader, the label's value for a read. */
function nameOf(curators: readonly ProbedCurator[], p: Probe): string {
  if (p.kind === "GetNodes") return JSON.stringify(p.answer);
  return curators.find((c) => c.node.id === p.answer)?.node.name ?? `${p.answer}`;
}

/** One answer of the leader's GetNodes: every node's health as it saw it. */
export interface HealthReading {
  invokedAt: number;
  returnedAt: number;
  /** Node ID → health name, and the time since its last heartbeat. */
  nodes?: Map<string, { health: string; sinceHeartbeatMs: number | undefined }>;
  failed?: string;
}

/**
 * Asks the curator on `node` for every node's health every `intervalMs`
 * until `signal` aborts.
 */
export async function pollHealth(
  e2e: E2eCluster,
  node: ClusterNode,
  signal: AbortSignal,
  intervalMs = 100,
): Promise<{ readings: HealthReading[]; done: Promise<void> }> {
  const client = new api.ManagementClient(
    `${node.address}:${curatorPort}`,
    ownerTowardsNode(await e2e.owner(), node.id),
  );
  const readings: HealthReading[] = [];
  const read = () =>
    new Promise<api.GetNodesResponse>((resolve, reject) =>
      client.getNodes(
        { states: [], roles: [], labels: new Map() },
        new Metadata(),
        { deadline: Date.now() + 1000 },
        (e: ServiceError | null, res?: api.GetNodesResponse) =>
          e || !res ? reject(e ?? new Error("no answer")) : resolve(res),
      ),
    );
  const done = (async () => {
    try {
      while (!signal.aborted) {
        const invokedAt = performance.now();
        const next = new Promise<void>((resolve) => {
          const timer = setTimeout(resolve, intervalMs);
          signal.addEventListener("abort", () => (clearTimeout(timer), resolve()), {
            once: true,
          });
        });
        try {
          const res = await read();
          readings.push({
            invokedAt,
            returnedAt: performance.now(),
            nodes: new Map(
              res.nodes.map((n) => [
                n.id,
                {
                  health: common.NodeHealth[n.health],
                  sinceHeartbeatMs: n.timeSinceHeartbeatMs,
                },
              ]),
            ),
          });
        } catch (e) {
          readings.push({ invokedAt, returnedAt: performance.now(), failed: String(e) });
        }
        await next;
      }
    } finally {
      client.close();
    }
  })();
  return { readings, done };
}

/** The etcd client of `node`'s own member, over its unix socket. */
function memberClient(node: ClusterNode): Etcd3 {
  const socket = join(node.root, "ephemeral", "consensus", "client.sock:0");
  return new Etcd3({ hosts: `unix://${socket}`, dialTimeout: 3000 });
}

/** The raft leader as `node`'s member sees it (its node ID; "" while it knows none). */
async function raftLeaderSeenBy(node: ClusterNode): Promise<string> {
  const client = memberClient(node);
  try {
    const status = await client.maintenance.status({ deadline: Date.now() + 3000 });
    if (status.leader === "0") return "";
    const { members } = await client.cluster.memberList({}, { deadline: Date.now() + 3000 });
    return members.find((m) => m.ID === status.leader)?.name ?? "";
  } finally {
    client.close();
  }
}

/** Who leads raft as each member of `nodes` sees it now, in words ("node1: node2, …"). */
export async function raftLeaderViews(nodes: readonly ClusterNode[]): Promise<string> {
  const seen = await Promise.all(
    nodes.map((n) =>
      raftLeaderSeenBy(n).then(
        (id) => nodes.find((m) => m.id === id)?.name ?? "none",
        (e: unknown) => `no answer (${String(e).slice(0, 60)})`,
      ),
    ),
  );
  return nodes.map((n, i) => `${n.name}: ${seen[i]}`).join(", ");
}

/** The node whose etcd member leads raft, once every member of `nodes` names the same one. */
export async function raftLeader(nodes: readonly ClusterNode[]): Promise<ClusterNode> {
  return eventually(
    async () => {
      const seen = await Promise.all(nodes.map((n) => raftLeaderSeenBy(n)));
      return seen.every((id) => id !== "" && id === seen[0]) && nodes.find((n) => n.id === seen[0]);
    },
    `${nodes.map((n) => n.name).join(", ")} to name one etcd raft leader`,
    { timeoutMs: 30_000, intervalMs: 200 },
  );
}

/**
 * Moves raft leadership from `from`'s member (the raft leader) to `to`'s
 * (etcd's MoveLeader), and waits until every member of `nodes` names `to`.
 */
export async function moveRaftLeader(
  nodes: readonly ClusterNode[],
  from: ClusterNode,
  to: ClusterNode,
): Promise<void> {
  const client = memberClient(from);
  try {
    const { members } = await client.cluster.memberList({}, { deadline: Date.now() + 3000 });
    const target = members.find((m) => m.name === to.id);
    if (!target) throw new Error(`${to.name} is no etcd member`);
    await client.maintenance.moveLeader({ targetID: target.ID }, { deadline: Date.now() + 10_000 });
  } finally {
    client.close();
  }
  await eventually(
    async () => (await raftLeader(nodes)) === to,
    `raft leadership to move to ${to.name}`,
    { timeoutMs: 30_000, intervalMs: 200 },
  );
}

/** The nodes' election lease TTL (the local clusters' configuration). */
export const leaseTtlMs = (localNodeConfig.leaderTtlSeconds ?? 10) * 1000;

/** What {@link fencedFailover} measured, on the monotonic clock, from the cut. */
export interface Failover {
  successor: ClusterNode;
  successorSeenMs: number;
  lastServedMs: number;
  observation: CuratorObservation;
}

/**
 * The checks of partition.test.ts, for a fault `cut` that separates the
 * curator leader `old` from the etcd majority (its host isolated, or its
 * etcd peer port blocked): the two other curators elect a successor that
 * acknowledges a write; no read invoked after that acknowledgement shows an
 * older value (from any curator); once the successor was seen leading, the
 * old one never names itself; no call invoked later than the TTL after the
 * cut is answered by it as the leader (its lease deadline); no two leaders
 * proven at once. `during` runs once the successor's write is acknowledged,
 * with the fault still in force. The caller heals.
 */
export async function fencedFailover(
  e2e: E2eCluster,
  nodes: readonly ClusterNode[],
  old: ClusterNode,
  what: string,
  cut: () => Promise<void>,
  during: (observation: CuratorObservation) => Promise<void> = async () => undefined,
): Promise<Failover> {
  const others = nodes.filter((n) => n !== old);
  const observation = await CuratorObservation.create(
    e2e,
    nodes,
    others[0],
    `fence-${what.replace(/\W+/g, "-")}`,
  );
  try {
    // A write the old leader acknowledged before the cut.
    await observation.write("before", [old]);
    observation.start(old.id);
    await cut();
    const cutAt = performance.now();
    const successorId = await e2e.measure(
      `${what}: a new curator leader among the two others`,
      () =>
        eventually(
          async () => {
            const id = await e2e.agreedLeader(others);
            return id !== old.id && id;
          },
          `a successor of ${old.name}`,
          { timeoutMs: 60_000, intervalMs: 100 },
        ),
    );
    const successorSeenAt = performance.now();
    const successor = others.find((n) => n.id === successorId);
    if (!successor) throw new Error(`the successor ${successorId} is not a node`);
    const after = await observation.write("after", [successor]);
    // Read from the old leader for a while after the acknowledgement.
    await eventually(
      () =>
        observation
          .curator(old)
          .probes.filter((p) => p.kind === "GetNodes" && p.invokedAt > after.ackedAt).length >= 10,
      `ten reads of ${old.name} after the acknowledged write`,
      { timeoutMs: 30_000, intervalMs: 100 },
    );
    await during(observation);
    await observation.stop();

    expect(
      observation
        .staleReads()
        .map(
          (p) =>
            `${p.node}: GetNodes invoked ${((p.invokedAt - after.ackedAt) / 1000).toFixed(2)} s after "after" was acknowledged, answered ${JSON.stringify(p.answer)}`,
        ),
    ).toEqual([]);
    const claims = observation
      .curator(old)
      .probes.filter(
        (p) =>
          p.kind === "GetCurrentLeader" && p.answer === old.id && p.invokedAt > successorSeenAt,
      );
    // In words: each call's invocation after the successor was seen (or after the cut).
    const since = (t: number) => (p: Probe) =>
      `${p.kind} invoked ${((p.invokedAt - t) / 1000).toFixed(2)} s after, answered ${p.answer ?? p.failed}`;
    expect(claims.map(since(successorSeenAt))).toEqual([]);
    const servedLate = observation.served(old).filter((p) => p.invokedAt > cutAt + leaseTtlMs);
    expect(servedLate.map(since(cutAt))).toEqual([]);
    expect(observation.doubleLeaders().proven).toEqual([]);
    const lastServed = Math.max(...observation.served(old).map((p) => p.returnedAt)) - cutAt;
    e2e.note(
      `${what}: the successor (${successor.name}) seen leading, after the cut`,
      successorSeenAt - cutAt,
    );
    e2e.note(`${what}: ${old.name}'s last answer as the leader, after the cut`, lastServed);
    process.stdout.write(`e2e ${e2e.name} ${what}: ${observation.summary()}\n`);
    return {
      successor,
      successorSeenMs: successorSeenAt - cutAt,
      lastServedMs: lastServed,
      observation,
    };
  } finally {
    await observation.stop();
    observation.close();
  }
}
