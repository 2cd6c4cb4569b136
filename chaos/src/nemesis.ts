/**
 * The nemesis: faults injected into a running local cluster, drawn from a
 * seeded PRNG so that a run can be replayed with its seed.
 *
 * Faults: `kill` (SIGKILL of a node's process group: a power cut), `term`
 * (SIGTERM: a graceful stop), `freeze` (SIGSTOP of the node's process group,
 * its etcd included: a hung machine), `kill-etcd` (SIGKILL of a consensus
 * member's etcd child alone; the node's supervisor restarts it), and
 * `kill-leader` (SIGKILL of whichever node's curator leads). Each lasts 2–10 s
 * and is healed by starting the node again (`LocalCluster.startNode`) or
 * SIGCONT; a killed etcd heals itself and the fault ends when a new etcd
 * child runs.
 *
 * Phase A (until `phaseAEndsAt`) keeps a majority of the consensus members
 * serving: at most 2 faults at once, at most one of them on a consensus
 * member. Phase B (until `faultsEndAt`, when enabled) first heals, then
 * takes a majority of the consensus members down at once (two SIGKILLs) for
 * a while — unavailability is expected there, loss of data is not — then
 * goes on as in phase A. When `run()` returns every fault is healed and
 * every fault is recorded with its start and end (run clock, ms).
 */
import type { ClusterNode, ClusterView, LocalCluster } from "@metropolis/local-cluster";
import { abortableSleep } from "@metropolis/supervisor";
import { NemesisError } from "./errors";
import { etcdChild, sendSignal } from "./process-tree";
import type { Prng } from "./prng";

/** What a fault does; see the module comment. */
export type FaultKind = "kill" | "term" | "freeze" | "kill-etcd" | "kill-leader" | "majority-kill";

/** One fault as it happened: on which node, from when to when (run clock, ms). */
export interface FaultRecord {
  kind: FaultKind;
  node: string;
  start: number;
  end: number;
}

export interface NemesisOptions {
  cluster: LocalCluster;
  view: ClusterView;
  prng: Prng;
  /** The run's clock (ms since the run started). */
  now: () => number;
  /** The consensus members (3 of them). */
  members: readonly ClusterNode[];
  /** Every node. */
  nodes: readonly ClusterNode[];
  /** When phase A ends (run clock). */
  phaseAEndsAt: number;
  /** When the last fault is injected (run clock); every fault is healed soon after. */
  faultsEndAt: number;
  /** Whether phase B takes a majority of the consensus members down. */
  phaseB: boolean;
  /** Progress lines. */
  log: (line: string) => void;
  /** Stops injecting (faults in place are still healed). */
  signal: AbortSignal;
}

/** A fault in place, and how to heal it. */
interface ActiveFault {
  kind: FaultKind;
  node: ClusterNode;
  start: number;
  /** Resolves when the fault is healed. */
  healed: Promise<void>;
}

const kinds: readonly FaultKind[] = ["kill", "term", "freeze", "kill-etcd", "kill-leader"];
const maxFaultsPhaseA = 2;

/** The nemesis of one run; see the module comment. */
export class Nemesis {
  /** Every fault injected, in order of injection; `end` is set when healed. */
  readonly faults: FaultRecord[] = [];
  private readonly active = new Set<ActiveFault>();
  /** When phase B's majority outage started and ended, if it ran. */
  majorityOutage: { start: number; end: number } | undefined;

  constructor(private readonly opts: NemesisOptions) {}

  /** When the last fault was healed (run clock), or 0 when there was none. */
  get lastFaultAt(): number {
    return this.faults.reduce((last, f) => Math.max(last, f.end), 0);
  }

  /** Injects faults until `faultsEndAt`, then heals every fault; see the module comment. */
  async run(): Promise<void> {
    const { opts } = this;
    try {
      await this.randomFaults(opts.phaseB ? opts.phaseAEndsAt : opts.faultsEndAt);
      if (opts.phaseB && !opts.signal.aborted) {
        await this.settle();
        await this.majorityDown();
        await this.randomFaults(opts.faultsEndAt);
      }
    } finally {
      await this.settle();
    }
  }

  /** Waits until every fault in place is healed. */
  async settle(): Promise<void> {
    while (this.active.size > 0) await Promise.all([...this.active].map((f) => f.healed));
  }

  private async randomFaults(until: number): Promise<void> {
    const { prng, signal } = this.opts;
    while (!signal.aborted && this.opts.now() < until) {
      await this.sleep(prng.int(1000, 4000));
      if (signal.aborted || this.opts.now() >= until) break;
      if (this.active.size >= maxFaultsPhaseA) continue;
      await this.injectOne(prng.pick(kinds));
    }
  }

  /** Whether a fault on `node` keeps a majority of the members serving, in phase A. */
  private allowed(node: ClusterNode): boolean {
    if ([...this.active].some((f) => f.node === node)) return false;
    if (!this.isMember(node)) return true;
    return ![...this.active].some((f) => this.isMember(f.node));
  }

  private isMember(node: ClusterNode): boolean {
    return this.opts.members.includes(node);
  }

  private async injectOne(kind: FaultKind): Promise<void> {
    const { prng } = this.opts;
    let node: ClusterNode | undefined;
    if (kind === "kill-leader") {
      node = await this.leader();
    } else {
      const pool = kind === "kill-etcd" ? this.opts.members : this.opts.nodes;
      const candidates = pool.filter((n) => this.allowed(n));
      node = candidates.length > 0 ? prng.pick(candidates) : undefined;
    }
    if (!node || !this.allowed(node) || !node.process?.running) return;
    const durationMs = prng.int(2000, 10_000);
    await this.inject(kind, node, durationMs);
  }

  /** The node whose curator leads, as the first member that answers says. */
  private async leader(): Promise<ClusterNode | undefined> {
    for (const member of this.opts.members) {
      if (!member.process?.running || [...this.active].some((f) => f.node === member)) continue;
      try {
        const id = (await this.opts.view.currentLeader(member, 1000)).leaderNodeId;
        return this.opts.nodes.find((n) => n.id === id);
      } catch {
        // Try the next member.
      }
    }
    return undefined;
  }

  /** Injects fault `kind` on `node` now; it heals itself after `durationMs`. */
  private async inject(kind: FaultKind, node: ClusterNode, durationMs: number): Promise<void> {
    const proc = node.process;
    if (!proc?.running) return;
    const start = this.opts.now();
    const record: FaultRecord = { kind, node: node.name, start, end: start };
    let heal: () => Promise<void>;
    switch (kind) {
      case "kill":
      case "kill-leader":
      case "majority-kill":
        await this.opts.cluster.killNode(node);
        heal = async () => {
          this.opts.cluster.startNode(node);
          await Promise.resolve();
        };
        break;
      case "term": {
        // SIGTERM, and SIGKILL to the group after the launcher's stop timeout.
        const stopped = this.opts.cluster.stopNode(node).catch(() => proc.kill());
        heal = async () => {
          // A graceful stop may take a while; the node is started once it has exited.
          await stopped;
          this.opts.cluster.startNode(node);
        };
        break;
      }
      case "freeze":
        sendSignal(-proc.pid, "SIGSTOP");
        heal = async () => {
          sendSignal(-proc.pid, "SIGCONT");
          await Promise.resolve();
        };
        break;
      case "kill-etcd": {
        const etcd = etcdChild(proc.pid);
        if (etcd === undefined) return;
        sendSignal(etcd, "SIGKILL");
        // Nothing to heal by hand: the fault lasts until the node's supervisor runs etcd again.
        heal = () => this.etcdBack(node, etcd);
        durationMs = 0;
        break;
      }
    }
    this.faults.push(record);
    this.opts.log(`fault: ${kind} ${node.name} (${(durationMs / 1000).toFixed(1)} s)`);
    const fault: ActiveFault = { kind, node, start, healed: Promise.resolve() };
    fault.healed = (async () => {
      try {
        await abortableSleep(durationMs);
        await heal();
      } catch (e) {
        this.opts.log(`heal of ${kind} ${node.name} failed: ${String(e)}`);
      } finally {
        record.end = this.opts.now();
        this.active.delete(fault);
        this.opts.log(`healed: ${kind} ${node.name}`);
      }
    })();
    this.active.add(fault);
  }

  /** Waits (up to 60 s) until `node` runs an etcd child other than `killed`. */
  private async etcdBack(node: ClusterNode, killed: number): Promise<void> {
    const deadline = Date.now() + 60_000;
    while (Date.now() < deadline) {
      const pid = node.process?.pid;
      const etcd = pid === undefined ? undefined : etcdChild(pid);
      if (etcd !== undefined && etcd !== killed) return;
      await abortableSleep(100);
    }
    throw new NemesisError(`${node.name} did not run etcd again within 60 s of its SIGKILL`);
  }

  /** Phase B: two of the three consensus members killed at once, for 8–15 s. */
  private async majorityDown(): Promise<void> {
    const { prng, members } = this.opts;
    const spared = prng.pick(members);
    const victims = members.filter((m) => m !== spared);
    const left = this.opts.faultsEndAt - this.opts.now();
    const durationMs = Math.max(3000, Math.min(prng.int(8000, 15_000), left / 2));
    const start = this.opts.now();
    await Promise.all(victims.map((v) => this.inject("majority-kill", v, durationMs)));
    await this.settle();
    this.majorityOutage = { start, end: this.opts.now() };
  }

  private async sleep(ms: number): Promise<void> {
    await abortableSleep(ms, this.opts.signal).catch(() => undefined);
  }
}
