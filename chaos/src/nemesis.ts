/**
 * The nemesis: faults injected into a running local cluster, drawn from a
 * seeded PRNG so that a run can be replayed with its seed.
 *
 * Process faults (every run): `kill` (SIGKILL of a node's process group: a
 * power cut), `term` (SIGTERM: a graceful stop), `freeze` (SIGSTOP of the
 * node's process group, its etcd included: a hung machine), `kill-etcd`
 * (SIGKILL of a consensus member's etcd child alone; the node's supervisor
 * restarts it), and `kill-leader` (SIGKILL of whichever node's curator
 * leads). Each lasts 2–10 s and is healed by starting the node again or
 * SIGCONT; a killed etcd heals itself and the fault ends when a new etcd
 * child runs.
 *
 * On the testbed (`network` given) also:
 * - network faults (network-faults.ts): isolate a host, majority/minority
 *   split, majorities ring, bridge, isolate the curator leader, isolate the
 *   etcd raft leader, one port blocked, packet loss; 3–15 s each, one at a
 *   time (`Network.heal()` heals them all), never together with a process
 *   fault on a consensus member, so that a majority of members stays
 *   connected and running in phase A (a ring and a bridge leave every
 *   member a majority, a split leaves one);
 * - clock faults (clock-faults.ts, `clock` given): `clock-jump` (one node's
 *   wall clock ±30–60 s for 5–20 s, then back) and `clock-strobe` (flipped
 *   between the real time and ±1–60 s every 100–500 ms for 5–15 s), one at
 *   a time, on any node, with anything else;
 * - `member-change` (`spare` given): the spare node gets the consensus role
 *   (it joins etcd as a learner, is promoted, runs a curator), keeps it for
 *   10–30 s, and gives it up again (member-change.ts) — never while a
 *   network fault is in place, and no network fault while the role changes;
 *   no process fault on the spare ever.
 *
 * Phase A (until `phaseAEndsAt`) keeps a majority of the consensus members
 * serving: at most 2 process faults at once, at most ⌊(m−1)/2⌋ of them on
 * the m consensus members. Phase B (until `faultsEndAt`, when enabled) first
 * heals, then takes a majority of the members down at once (SIGKILLs) for a
 * while — unavailability is expected there, loss of data is not — then goes
 * on as in phase A. When `run()` returns every fault is healed (the network
 * too, every clock back at offset 0) and every fault is recorded with its
 * start and end (run clock, ms).
 */
import type { ClusterNode, ClusterView, LocalCluster, Network } from "@metropolis/local-cluster";
import { abortableSleep } from "@metropolis/supervisor";
import type { ClockControl } from "./clock-faults";
import { NemesisError } from "./errors";
import { changeConsensusRole } from "./member-change";
import {
  applyNetworkChange,
  networkFaultKinds,
  planNetworkFault,
  type NetworkFaultKind,
} from "./network-faults";
import { etcdChild, sendSignal } from "./process-tree";
import type { Prng } from "./prng";

/** A fault that stops or kills processes. */
export type ProcessFaultKind =
  "kill" | "term" | "freeze" | "kill-etcd" | "kill-leader" | "majority-kill";
/** A fault of a node's wall clock. */
export type ClockFaultKind = "clock-jump" | "clock-strobe";

/** What a fault does; see the module comment. */
export type FaultKind = ProcessFaultKind | NetworkFaultKind | ClockFaultKind | "member-change";

/** Which kind of fault it is: what the timeline draws it with. */
export type FaultCategory = "process" | "network" | "clock" | "membership";

/** One fault as it happened: on which node, from when to when (run clock, ms). */
export interface FaultRecord {
  kind: FaultKind;
  category: FaultCategory;
  /** The node it hit; for a fault of the network, the host it is about, or "network". */
  node: string;
  start: number;
  end: number;
  /** What it was, in words (e.g. "ring 1-3-5-2-4"), where the kind and node do not say it all. */
  label?: string;
  /** Why it could not be made or healed, if it could not. */
  error?: string;
}

export interface NemesisOptions {
  cluster: LocalCluster;
  view: ClusterView;
  prng: Prng;
  /** The run's clock (ms since the run started). */
  now: () => number;
  /** The consensus members. */
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
  /** The testbed's network: enables the network faults. */
  network?: Network;
  /** Enables the clock faults. */
  clock?: ClockControl;
  /** A node without the consensus role: enables `member-change`. */
  spare?: ClusterNode;
  /** The node of the etcd raft leader, if one is known (for `isolate-raft-leader`). */
  raftLeader?: () => Promise<ClusterNode | undefined>;
}

/** A fault in place, and how to heal it. */
interface ActiveFault {
  kind: FaultKind;
  category: FaultCategory;
  /** The node it is on (process and clock faults), if one. */
  node?: ClusterNode;
  start: number;
  /** Resolves when the fault is healed. */
  healed: Promise<void>;
}

const processKinds: readonly ProcessFaultKind[] = [
  "kill",
  "term",
  "freeze",
  "kill-etcd",
  "kill-leader",
];
const clockKinds: readonly ClockFaultKind[] = ["clock-jump", "clock-strobe"];
const maxProcessFaults = 2;

/** The nemesis of one run; see the module comment. */
export class Nemesis {
  /** Every fault injected, in order of injection; `end` is set when healed. */
  readonly faults: FaultRecord[] = [];
  private readonly active = new Set<ActiveFault>();
  /** When phase B's majority outage started and ended, if it ran. */
  majorityOutage: { start: number; end: number } | undefined;
  /** Whether the spare's consensus role is being changed (no network fault meanwhile). */
  private roleChanging = false;
  /** Whether the spare is a consensus member now (network faults then count it as one). */
  private spareMember = false;

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
      const category = this.drawCategory();
      switch (category) {
        case "process":
          if (this.count("process") < maxProcessFaults)
            await this.injectOne(prng.pick(processKinds));
          break;
        case "network":
          await this.injectNetwork(prng.pick(networkFaultKinds));
          break;
        case "clock":
          await this.injectClock(prng.pick(clockKinds));
          break;
        case "membership":
          this.injectMemberChange();
          break;
      }
    }
  }

  /** The category of the next fault: process faults only, unless on the testbed. */
  private drawCategory(): FaultCategory {
    const { prng, network, clock, spare } = this.opts;
    if (!network) return "process";
    const r = prng.next();
    if (r < 0.5) return "network";
    if (r < 0.75) return "process";
    if (r < 0.9) return clock ? "clock" : "process";
    return spare ? "membership" : "network";
  }

  private count(category: FaultCategory): number {
    return [...this.active].filter((f) => f.category === category).length;
  }

  /** Whether a process fault on `node` keeps a majority of the members serving, in phase A. */
  private allowed(node: ClusterNode): boolean {
    if (node === this.opts.spare) return false;
    const processFaults = [...this.active].filter((f) => f.category === "process");
    if (processFaults.some((f) => f.node === node)) return false;
    if (!this.isMember(node)) return true;
    // A network fault leaves only a majority connected: no member may be down as well.
    if (this.count("network") > 0) return false;
    const faultyMembers = processFaults.filter((f) => f.node && this.isMember(f.node)).length;
    return faultyMembers < Math.floor((this.opts.members.length - 1) / 2);
  }

  private isMember(node: ClusterNode): boolean {
    return this.opts.members.includes(node);
  }

  /** The consensus members now: the spare among them while it has the role. */
  private currentMembers(): ClusterNode[] {
    const { members, spare } = this.opts;
    return spare && this.spareMember ? [...members, spare] : [...members];
  }

  private async injectOne(kind: ProcessFaultKind): Promise<void> {
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

  /** Starts `node` again (its process is down). */
  private async start(node: ClusterNode): Promise<void> {
    this.opts.cluster.startNode(node);
    await Promise.resolve();
  }

  /** Injects process fault `kind` on `node` now; it heals itself after `durationMs`. */
  private async inject(
    kind: ProcessFaultKind,
    node: ClusterNode,
    durationMs: number,
  ): Promise<void> {
    const proc = node.process;
    if (!proc?.running) return;
    const start = this.opts.now();
    const record: FaultRecord = { kind, category: "process", node: node.name, start, end: start };
    let heal: () => Promise<void>;
    switch (kind) {
      case "kill":
      case "kill-leader":
      case "majority-kill":
        await this.opts.cluster.killNode(node);
        heal = () => this.start(node);
        break;
      case "term": {
        // SIGTERM, and SIGKILL to the group after the launcher's stop timeout.
        const stopped = this.opts.cluster.stopNode(node).catch(() => proc.kill());
        heal = async () => {
          // A graceful stop may take a while; the node is started once it has exited.
          await stopped;
          await this.start(node);
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
    this.track(record, node, durationMs, heal);
  }

  /**
   * Records `record` as in place, and heals it with `heal` after
   * `durationMs`; the record's `end` is when the healing finished.
   */
  private track(
    record: FaultRecord,
    node: ClusterNode | undefined,
    durationMs: number,
    heal: () => Promise<void>,
  ): void {
    const name = record.label ?? `${record.kind} ${record.node}`;
    this.faults.push(record);
    this.opts.log(`fault: ${name} (${(durationMs / 1000).toFixed(1)} s)`);
    const fault: ActiveFault = {
      kind: record.kind,
      category: record.category,
      node,
      start: record.start,
      healed: Promise.resolve(),
    };
    fault.healed = (async () => {
      try {
        await abortableSleep(durationMs);
        await heal();
      } catch (e) {
        record.error = `heal failed: ${e instanceof Error ? e.message : String(e)}`;
        this.opts.log(`heal of ${name} failed: ${String(e)}`);
      } finally {
        record.end = this.opts.now();
        this.active.delete(fault);
        this.opts.log(`healed: ${name}`);
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

  /** The testbed host `node` is on. @throws NemesisError when it is none. */
  private hostOf(node: ClusterNode): number {
    const host = this.opts.network?.testbed.hostOf(node.address);
    if (host === undefined) throw new NemesisError(`${node.name} is on no host of the testbed`);
    return host;
  }

  /** A network fault of `kind` now, unless one is in place or a member is down or changing. */
  private async injectNetwork(kind: NetworkFaultKind): Promise<void> {
    const { network, prng } = this.opts;
    if (!network || this.count("network") > 0 || this.roleChanging) return;
    const memberDown = [...this.active].some(
      (f) => f.category === "process" && f.node !== undefined && this.isMember(f.node),
    );
    if (memberDown) return;
    const memberNodes = this.currentMembers();
    const members = memberNodes.map((m) => this.hostOf(m));
    const others = this.opts.nodes
      .filter((n) => !memberNodes.includes(n))
      .map((n) => this.hostOf(n));
    const toHost = (node: ClusterNode | undefined) =>
      node === undefined ? undefined : this.hostOf(node);
    const plan = await planNetworkFault(kind, {
      prng,
      members,
      others,
      curatorLeader: async () => toHost(await this.leader()),
      raftLeader: async () => toHost(await this.opts.raftLeader?.()),
    });
    // The lookups took a while: check again that nothing else took the slot.
    if (!plan || this.count("network") > 0 || this.roleChanging) return;
    const durationMs = prng.int(3000, 15_000);
    const start = this.opts.now();
    const hostNode = plan.host === undefined ? undefined : this.opts.nodes[plan.host - 1];
    const record: FaultRecord = {
      kind,
      category: "network",
      node: hostNode?.name ?? "network",
      start,
      end: start,
      label: plan.label,
    };
    try {
      await applyNetworkChange(network, plan.change);
    } catch (e) {
      // Whatever part of it was made is removed again.
      record.error = `could not be made: ${e instanceof Error ? e.message : String(e)}`;
      await network.heal().catch(() => undefined);
      record.end = this.opts.now();
      this.faults.push(record);
      this.opts.log(`fault ${plan.label} failed: ${record.error}`);
      return;
    }
    this.track(record, undefined, durationMs, () => network.heal());
  }

  /** A clock fault of `kind` on a running node, unless one is in place. */
  private async injectClock(kind: ClockFaultKind): Promise<void> {
    const { clock, prng } = this.opts;
    if (!clock || this.count("clock") > 0) return;
    // Half of the time the curator leader: the node whose clock matters most.
    const leader = prng.chance(0.5) ? await this.leader() : undefined;
    const running = (n: ClusterNode) => n.process?.running ?? false;
    const candidates = this.opts.nodes.filter(running);
    const node = leader && running(leader) ? leader : undefined;
    const target = node ?? (candidates.length > 0 ? prng.pick(candidates) : undefined);
    if (!target) return;
    const start = this.opts.now();
    const sign = prng.chance(0.5) ? 1 : -1;
    if (kind === "clock-jump") {
      const offset = sign * prng.int(30, 60);
      const durationMs = prng.int(5000, 20_000);
      await clock.set(target, offset);
      const record: FaultRecord = {
        kind,
        category: "clock",
        node: target.name,
        start,
        end: start,
        label: `clock ${offset > 0 ? "+" : ""}${offset} s ${target.name}`,
      };
      this.track(record, target, durationMs, () => clock.set(target, 0));
      return;
    }
    const offset = sign * prng.int(1, 60);
    const periodMs = prng.int(100, 500);
    const durationMs = prng.int(5000, 15_000);
    const record: FaultRecord = {
      kind,
      category: "clock",
      node: target.name,
      start,
      end: start,
      label: `clock strobe 0/${offset > 0 ? "+" : ""}${offset} s every ${periodMs} ms ${target.name}`,
    };
    const stop = new AbortController();
    const strobing = (async () => {
      let off = false;
      while (!stop.signal.aborted) {
        off = !off;
        await clock.set(target, off ? offset : 0);
        await abortableSleep(periodMs, stop.signal).catch(() => undefined);
      }
    })();
    this.track(record, target, durationMs, async () => {
      stop.abort();
      await strobing;
      await clock.set(target, 0);
    });
  }

  /**
   * The spare node gets the consensus role, keeps it for a while (10–30 s,
   * never past `faultsEndAt`), and gives it up — in the background, the
   * fault lasting from the first change to the end of the second. Its
   * failures are recorded, not thrown: the final invariants say whether the
   * membership came back.
   */
  private injectMemberChange(): void {
    const { spare, prng } = this.opts;
    if (!spare || this.count("network") > 0 || this.count("membership") > 0) return;
    if (!spare.process?.running) return;
    const start = this.opts.now();
    const record: FaultRecord = {
      kind: "member-change",
      category: "membership",
      node: spare.name,
      start,
      end: start,
      label: `consensus role on ${spare.name}`,
    };
    const holdMs = prng.int(10_000, 30_000);
    const change = async (on: boolean): Promise<void> => {
      this.roleChanging = true;
      // A member from the first change on (it may be one even when the change failed).
      this.spareMember = true;
      try {
        const began = this.opts.now();
        await changeConsensusRole(this.opts.cluster, this.opts.view, spare, on);
        this.spareMember = on;
        const took = ((this.opts.now() - began) / 1000).toFixed(1);
        this.opts.log(`${spare.name} ${on ? "is a voting member" : "left consensus"} (${took} s)`);
      } finally {
        this.roleChanging = false;
      }
    };
    // No network fault from now on until the role has changed.
    this.roleChanging = true;
    this.track(record, undefined, 0, async () => {
      try {
        await change(true);
      } catch (e) {
        // It may have become a member all the same: take the role away in any case.
        record.error = `could not add: ${e instanceof Error ? e.message : String(e)}`;
        this.opts.log(`${spare.name} did not become a member: ${record.error}`);
      }
      const left = this.opts.faultsEndAt - this.opts.now();
      await abortableSleep(Math.max(0, Math.min(holdMs, left)));
      await change(false);
    });
  }

  /** Phase B: a majority of the consensus members killed at once, for 8–15 s. */
  private async majorityDown(): Promise<void> {
    const { prng, members } = this.opts;
    const majority = Math.floor(members.length / 2) + 1;
    const victims = shuffledPick(members, majority, prng);
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

/**
 * `count` of `items` drawn by `prng`. For 3 members and a majority of 2 it
 * draws exactly as earlier runs did (one spared member), so seeds replay.
 */
function shuffledPick<T>(items: readonly T[], count: number, prng: Prng): T[] {
  if (count === items.length - 1) {
    const spared = prng.pick(items);
    return items.filter((i) => i !== spared);
  }
  const pool = [...items];
  const out: T[] = [];
  while (out.length < count && pool.length > 0)
    out.push(pool.splice(prng.int(0, pool.length - 1), 1)[0]);
  return out;
}
