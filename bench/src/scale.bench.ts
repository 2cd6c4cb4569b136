/**
 * The scale simulator: `npm run bench:scale -- --nodes 5000` (also 1000,
 * 2500, 10000). What the control plane costs as the node count grows, and
 * whether it recovers from losing its leader with thousands of nodes
 * attached.
 *
 *   node hosts (--hosts K processes)              separate processes
 *   ┌─────────────────────────────┐   mTLS    ┌──────────────┐  unix  ┌──────┐
 *   │ N/K simulated nodes each:   │──gRPC────▶│ curator ×3   │───────▶│ etcd │×3
 *   │ heartbeat worker (roleserve)│           │ (one leads)  │        │ raft │
 *   │ + CuratorConnection each    │     ┌────▶└──────────────┘        └──────┘
 *   └──────────────▲──────────────┘     │
 *                  │ IPC                │
 *   this process ──┘ enrols the nodes,  │
 *     owner: GetNodes, labels ──────────┘
 *     10 watchers; 10 owner lists (owner host process)
 *
 * One cluster grows through the sizes of the ladder up to `--nodes` (see
 * scale/scale-config.ts); at each size:
 *
 * 1. enrolment: the new nodes go through RegisterNode (ticket) → the owner's
 *    ApproveNode → CommitNode, 20 at a time; nodes UP per second;
 * 2. attach: each new node starts the node's own heartbeat worker
 *    (production interval) on its own connection; time until the leader
 *    reports every node HEALTHY;
 * 3. steady state (once the standby connections of the last wave are open):
 *    heartbeat answer latency p50/p99, the leader process's
 *    CPU (ms per second) and RSS, both per node too, etcd's database size and
 *    its write rate (revisions per second);
 *    3b. with `--observer`: `metroctl observe`'s cluster view in Chromium
 *    (scale/observer-view.ts);
 * 4. Watch(all) backlog time, and the latency of one label change reaching
 *    10 watchers (p99);
 * 5. failover: SIGKILL of the leader's process (the lease is the production
 *    10 s) until the new leader reports every node HEALTHY again; the killed
 *    curator is restarted (same node, same address) afterwards. With
 *    `--freeze`, SIGSTOP instead (a hung leader, its connections open),
 *    and SIGKILL once every node is back;
 * 6. the same with 10 owner clients listing every node once a second (in
 *    a process of their own, scale/owner-host.ts); for both failovers, who
 *    had the CPUs meanwhile (scale/cpu-shares.ts).
 *
 * Targets (issue 16) apply at 5,000 nodes. Prints a table per size, writes
 * reports/bench-scale.json and a log-log plot of each cost against the node
 * count, reports/bench-scale.png. Every process is stopped by PID at the end;
 * a watchdog ends the run if it takes far longer than expected.
 */
import { mkdtemp, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { performance } from "node:perf_hooks";
import type { Etcd3 } from "etcd3";
import {
  defaultAutopromoteIntervalMs,
  etcdDefaultTimings,
  memberClient,
} from "@metropolis/consensus";
import type { TestMemberMode } from "@metropolis/consensus/testing";
import {
  silenceIpServerNameWarning,
  type CuratorAddress,
  type CuratorConnection,
} from "@metropolis/curator";
import { logLogPlot, type Rgb } from "./png";
import { median, percentile, printTable, writeReport, type Row } from "./report";
import { loopbackHosts, progressReporter, type BenchContext } from "./curator/bench-context";
import { startCluster } from "./curator/cluster";
import { benchConfig } from "./curator/config";
import { CuratorProcess, CuratorProcesses } from "./curator/curator-processes";
import { measureRegistration, type RegisteredNode } from "./curator/registration";
import { gcRows, worstLoopDelay, type LoopDelay } from "./loop-delay";
import { measureWatchBacklog } from "./curator/watch-backlog";
import { measureChangeFanout } from "./scale/change-fanout";
import { addMembers } from "./scale/more-members";
import {
  instrumentKeepalive,
  ownerConnection,
  untilAllHealthy,
  type Recovery,
} from "./scale/owner-view";
import { OwnerHost, type OwnerHostResult } from "./scale/owner-host";
import { scaleConfig, type ScaleConfig } from "./scale/scale-config";
import { NodeHosts } from "./scale/node-hosts";
import { heartbeatPhase, type HeartbeatPhase } from "./scale/heartbeat-phase";
import { measureObserver, type ObserverFigures } from "./scale/observer-view";
import { childPids } from "./process-cpu";
import { CpuShares, type CpuShare } from "./scale/cpu-shares";
import { standbySpreadMs } from "@metropolis/roleserve";

/**
 * Who had the CPUs from a leader's SIGKILL until every node was HEALTHY
 * again (scale/cpu-shares.ts): the new leader, the node hosts together, and
 * the benchmark's own process (the poll of the owner's view), the owners'
 * process (in the failover with owners), each by its main thread; the
 * whole processes (every thread) of the new leader, the other follower, the
 * etcd members and the node hosts; and how busy the whole machine was, of
 * which in the kernel.
 */
interface FailoverCpu {
  leader: CpuShare;
  hosts: CpuShare;
  bench: CpuShare;
  owners?: CpuShare;
  /** Whole processes' CPU time, every thread, ms per second. */
  processes: { leader: number; follower: number; etcd: number; hosts: number };
  /** Every CPU's busy time summed, of which in the kernel, and the time the hypervisor took from them; ms per second (2,000: two cores). */
  machine: { busyMsPerSecond: number; kernelMsPerSecond: number; stolenMsPerSecond: number };
}

/**
 * The etcd members run as a production member does, not as a test member:
 * etcd's own raft timings, and the autopromoter's own interval. With a test
 * member's (10 ms heartbeats, 100 ms elections, a promotion pass every 100
 * ms) the three members took 216 ms/s of this machine idle, and 232 ms/s
 * through a 5,000-node failover (96 ms/s with these), and a member starved of
 * CPU for 100 ms started an election.
 */
const productionMember: TestMemberMode = {
  timings: etcdDefaultTimings,
  autopromoteIntervalMs: defaultAutopromoteIntervalMs,
};

/** What was measured at one size. */
interface SizeResult {
  nodes: number;
  enrolmentPerSecond: number;
  attachMs: number;
  /** The owner's view (see Recovery) during the attach and the two failovers. */
  timelines: Record<"attach" | "failover" | "failoverWithOwners", Recovery["timeline"]>;
  heartbeatP50Ms: number;
  heartbeatP99Ms: number;
  heartbeatsPerSecond: number;
  /** How evenly those heartbeats spread over the interval (scale/heartbeat-phase.ts). */
  heartbeatPhase: HeartbeatPhase;
  /**
   * The event loops' delay over the heartbeat window: the leader's (missing
   * if it did not answer), and the node hosts' worst by p99 — a heartbeat's
   * latency, measured in a host, waits in both.
   */
  loopDelay: { leader: LoopDelay | undefined; hosts: LoopDelay | undefined };
  /** The worst node host's event loop delay from the first failover's SIGKILL until every node was HEALTHY. */
  failoverHostLoopDelay: LoopDelay | undefined;
  leaderCpuMsPerSecond: number;
  /**
   * The node hosts and the machine during the steady state, and the whole
   * processes (every thread) of the leader, both followers together, the
   * etcd members, the node hosts and the benchmark: where a machine busy at
   * rest goes.
   */
  steadyCpu: Pick<FailoverCpu, "hosts" | "machine"> & {
    processes: { leader: number; followers: number; etcd: number; hosts: number; bench: number };
  };
  /** The steady state's leader's RSS at the end of that window. */
  leaderRssBytes: number;
  etcdDbBytes: number;
  etcdRevisionsPerSecond: number;
  watchBacklogMs: number;
  /** Watch(all) resumed from the revision a full one reached: ms to LAST_BACKLOGGED, and its nodes. */
  watchResumedMs: number;
  watchResumedNodes: number;
  fanoutP99Ms: number;
  failoverMs: number;
  failoverWithOwnersMs: number;
  failoverCpu: FailoverCpu;
  failoverWithOwnersCpu: FailoverCpu;
  /** Measurements that failed (their value is NaN), with why: the run goes on without them. */
  failed: Partial<Record<"watchBacklog" | "fanout" | "observer", string>>;
  /** Waits that gave up before every node was HEALTHY: nodes HEALTHY by then. */
  incomplete: Partial<Record<"attach" | "failover" | "failoverWithOwners", number>>;
  ownerListingP99Ms: number;
  ownerListingFailures: number;
  /** The observer's cluster view (with `--observer`; undefined without, or when it failed). */
  observer?: ObserverFigures;
}

/** The curators, which of them leads, and how the nodes find them. */
class Curators {
  constructor(
    private readonly ctx: BenchContext,
    public all: CuratorProcess[],
  ) {}

  get addresses(): CuratorAddress[] {
    return this.all.map((c) => ({ host: c.host, port: c.port, nodeId: c.nodeId }));
  }

  /** Who each curator says leads, e.g. "a1b2c3@40123 → d4e5f6": for progress lines. */
  views(): string {
    const short = (id: string | undefined) =>
      (id ?? "nobody").replace("metropolis-", "").slice(0, 6);
    return this.all
      .map((c) => `${short(c.nodeId)}@${c.port} → ${short(c.lastLeader?.nodeId)}`)
      .join(", ");
  }

  /** The curator that leads (waiting for one to), other than `except` (one just killed, which led). */
  leader(timeoutMs = 60_000, except?: CuratorProcess): Promise<CuratorProcess> {
    const candidates = this.all.filter((c) => c !== except);
    return Promise.any(candidates.map((c) => c.leading(timeoutMs).then(() => c)));
  }

  /**
   * SIGKILLs `victim` (or, `freeze`, SIGSTOPs it, and SIGKILLs it once
   * `recovered` resolves); once `recovered` resolves, restarts it on the same
   * address (so that every node's and owner's list of curators stays true)
   * and waits until it follows the leader, so that three curators serve again.
   */
  async killAndRespawn<T>(
    fault: ScaleConfig["leaderFault"],
    victim: CuratorProcess,
    recovered: () => Promise<T>,
    hostPids: readonly number[],
    ownersPid?: number,
  ): Promise<{ result: T; cpu: FailoverCpu }> {
    if (process.env.METROPOLIS_BENCH_PROFILE_DIR) {
      // Its profile first (see fixtures/curator-process.ts), then its end.
      this.ctx.progress(
        `    ${victim.nodeId.slice(0, 20)}…'s CPU profile: ${await victim.profile()}`,
      );
    }
    const survivors = this.all.filter((c) => c !== victim);
    const owners = ownersPid === undefined ? [] : [ownersPid];
    // The etcd members are this process's children (the consensus service runs them).
    const etcd = childPids(process.pid, "etcd");
    const shares = new CpuShares([
      ...survivors.map((c) => c.pid),
      ...hostPids,
      process.pid,
      ...owners,
      ...etcd,
    ]);
    if (fault === "kill") {
      victim.kill("SIGKILL");
      await victim.exited;
    } else victim.kill("SIGSTOP");
    const result = await recovered();
    const successor = await this.leader(60_000, victim);
    const followers = survivors.filter((c) => c !== successor).map((c) => c.pid);
    const cpu: FailoverCpu = {
      leader: shares.share([successor.pid]),
      hosts: shares.share(hostPids),
      bench: shares.share([process.pid]),
      ...(ownersPid === undefined ? {} : { owners: shares.share(owners) }),
      processes: {
        leader: shares.processMsPerSecond([successor.pid]),
        follower: shares.processMsPerSecond(followers),
        etcd: shares.processMsPerSecond(etcd),
        hosts: shares.processMsPerSecond(hostPids),
      },
      machine: shares.machine(),
    };
    if (process.env.METROPOLIS_BENCH_PROFILE_DIR) {
      // And the new leader's, which covers its failover: what it spent the recovery on.
      this.ctx.progress(
        `    new leader ${successor.nodeId.slice(0, 20)}…'s CPU profile: ${await successor.profile()}`,
      );
    }
    if (fault === "freeze") {
      victim.kill("SIGKILL");
      await victim.exited;
    }
    const respawned = victim.respawn(this.ctx);
    this.all = this.all.map((c) => (c === victim ? respawned : c));
    await respawned.following();
    return { result, cpu };
  }
}

/** The signal that ends the leader in the failovers. */
const faultName = (scale: ScaleConfig) => (scale.leaderFault === "kill" ? "SIGKILL" : "SIGSTOP");

/** How a wait for every node HEALTHY ended, for progress lines. */
function outcome(r: Recovery): string {
  const s = (r.ms / 1000).toFixed(1);
  return r.complete ? `all HEALTHY after ${s} s` : `gave up after ${s} s, ${r.healthy} HEALTHY`;
}

/** Says where the node hosts' CPU profiles of `window` were written, if they profiled. */
async function reportProfiles(
  progress: (line: string) => void,
  window: string,
  written: Promise<string[]>,
): Promise<void> {
  const paths = await written;
  if (paths.length > 0) progress(`    node hosts' CPU profiles of ${window}: ${paths.join(" ")}`);
}

/** A FailoverCpu for progress lines: ran / waited for a CPU, ms per second, of each. */
function describeCpu(cpu: FailoverCpu): string {
  const one = (name: string, s: CpuShare) =>
    `${name} ran ${s.runMsPerSecond.toFixed(0)}, waited ${s.waitMsPerSecond.toFixed(0)}`;
  const owners = cpu.owners ? `; ${one("owners", cpu.owners)}` : "";
  const p = cpu.processes;
  const whole = `whole processes: new leader ${p.leader.toFixed(0)}, other follower ${p.follower.toFixed(0)}, etcd ${p.etcd.toFixed(0)}, node hosts ${p.hosts.toFixed(0)}`;
  return `${one("new leader", cpu.leader)}; ${one("node hosts", cpu.hosts)}; ${one("bench", cpu.bench)}${owners}; ${whole}; machine busy ${cpu.machine.busyMsPerSecond.toFixed(0)}, in the kernel ${cpu.machine.kernelMsPerSecond.toFixed(0)}, stolen ${cpu.machine.stolenMsPerSecond.toFixed(0)} (ms/s)`;
}

const targetAt = 5000;

/** How the new nodes are attached, for progress lines and rows. */
function waveText(scale: ScaleConfig): string {
  return scale.attachWave > 0 ? ` in waves of ${scale.attachWave}` : ", all at once";
}

/**
 * Starts `nodes`' workers `scale.attachWave` at a time (all at once for 0),
 * each wave once every node so far is HEALTHY (`until`, given the IDs so
 * far); adds each wave's IDs to `ids`. One Recovery for the whole: the sum
 * of the waves' times, their timelines joined, incomplete if a wave gave up
 * (the next waves still start, so that the run goes on).
 */
async function attachInWaves(
  nodes: readonly RegisteredNode[],
  scale: ScaleConfig,
  ids: Set<string>,
  sims: NodeHosts,
  until: (attached: ReadonlySet<string>) => Promise<Recovery>,
): Promise<Recovery> {
  const wave = scale.attachWave > 0 ? scale.attachWave : Math.max(1, nodes.length);
  const total: Recovery = { ms: 0, complete: true, healthy: ids.size, timeline: [] };
  for (let i = 0; i < nodes.length; i += wave) {
    const part = nodes.slice(i, i + wave);
    for (const n of part) ids.add(n.nodeId);
    await sims.add(part);
    const r = await until(ids);
    total.timeline.push(...r.timeline.map(([ms, h]): [number, number] => [total.ms + ms, h]));
    total.ms += r.ms;
    total.complete &&= r.complete;
    total.healthy = r.healthy;
  }
  return total;
}

/**
 * What `measure` gives, or undefined when it fails: the failure is noted
 * in `failed` (and printed), and the run goes on to its other figures.
 */
async function orFailed<T>(
  failed: SizeResult["failed"],
  name: keyof SizeResult["failed"],
  progress: (line: string) => void,
  measure: () => Promise<T>,
): Promise<T | undefined> {
  try {
    return await measure();
  } catch (e) {
    const why = (e instanceof Error ? e.message : String(e)).slice(0, 200);
    failed[name] = why;
    progress(`    ${name} failed: ${why}`);
    return undefined;
  }
}

async function measureSize(
  ctx: BenchContext,
  scale: ScaleConfig,
  size: number,
  curators: Curators,
  owner: CuratorConnection,
  sims: NodeHosts,
  registered: RegisteredNode[],
  ids: Set<string>,
  etcd: Etcd3,
): Promise<SizeResult> {
  const { progress } = ctx;
  let leader = await curators.leader();

  progress(`(1) enrolling ${size - registered.length} nodes (to ${size})`);
  const reg = await measureRegistration(ctx, leader, size - registered.length);
  registered.push(...reg.nodes);

  progress(
    `(2) attaching them${waveText(scale)}: heartbeat workers, every ${scale.heartbeatIntervalMs} ms`,
  );
  // Progress lines while a wait drags on: who leads, and what the nodes' workers failed with.
  const describe = async () =>
    [curators.views(), ...(await sims.errorKinds()).map((k) => `      ${k}`)].join("\n");
  const attach = await attachInWaves(reg.nodes, scale, ids, sims, (attached) =>
    untilAllHealthy(owner, attached, scale.healthyTimeoutMs, progress, describe),
  );
  progress(`    ${outcome(attach)}; ${await sims.describeLog()}`);

  // Steady once the last wave's nodes have opened their standby connections
  // to the other curators (within roleserve's standbySpreadMs of finding the
  // leader): until then 2,000 TLS handshakes of the simulated nodes share the
  // two cores with the heartbeats measured (one run's p99 was 591 ms so).
  progress(
    `(3) steady state for ${scale.steadySeconds} s, after ${standbySpreadMs / 1000} s to settle`,
  );
  await new Promise((r) => setTimeout(r, standbySpreadMs));
  const before = await etcd.maintenance.status();
  const cpuBefore = leader.cpuMs();
  // What the simulated nodes' own work costs at rest, and what the machine
  // gave (a heartbeat's latency includes both hosts' and leader's loops).
  const steadyFollowers = curators.all.filter((c) => c !== leader).map((c) => c.pid);
  const steadyEtcd = childPids(process.pid, "etcd");
  const steadyShares = new CpuShares([
    ...sims.pids,
    leader.pid,
    ...steadyFollowers,
    ...steadyEtcd,
    process.pid,
  ]);
  const started = performance.now();
  await sims.startRecording();
  await sims.startProfile();
  leader.startLoopDelay();
  await new Promise((r) => setTimeout(r, scale.steadySeconds * 1000));
  const { latencies, sentAt, loopDelays } = await sims.stopRecording();
  await reportProfiles(progress, "the steady state", sims.stopProfile("heartbeats"));
  const leaderLoopDelay = await leader.stopLoopDelay();
  // Read now, of the steady state's leader: by the end of this size two
  // failovers have put another leader in its place.
  const leaderRssBytes = leader.rssBytes();
  const seconds = (performance.now() - started) / 1000;
  const leaderCpuMsPerSecond = (leader.cpuMs() - cpuBefore) / seconds;
  const steadyCpu: SizeResult["steadyCpu"] = {
    hosts: steadyShares.share(sims.pids),
    machine: steadyShares.machine(),
    processes: {
      leader: steadyShares.processMsPerSecond([leader.pid]),
      followers: steadyShares.processMsPerSecond(steadyFollowers),
      etcd: steadyShares.processMsPerSecond(steadyEtcd),
      hosts: steadyShares.processMsPerSecond(sims.pids),
      bench: steadyShares.processMsPerSecond([process.pid]),
    },
  };
  const after = await etcd.maintenance.status();

  const failed: SizeResult["failed"] = {};
  // With every node attached and the cluster at rest, before the failovers
  // (what a view "with the simulator's nodes attached" means); closed again
  // before the next measure.
  let observer: ObserverFigures | undefined;
  if (scale.observer) {
    progress("(3b) the observer's cluster view in Chromium (metroctl observe)");
    const target = {
      caPem: ctx.cluster.caPem,
      owner: ctx.cluster.owner,
      ownerConnection: owner,
      curators: curators.addresses,
      nodeIds: [...ids],
      progress,
    };
    try {
      observer = await measureObserver(target);
    } catch (e) {
      failed.observer = (e instanceof Error ? e.message : String(e)).slice(0, 200);
      progress(`    observer failed: ${failed.observer}`);
    }
  }
  progress("(4) Watch(all) backlog and change fan-out");
  // The leader again: leadership may have moved while the nodes attached.
  leader = await curators.leader();
  const backlog = await orFailed(failed, "watchBacklog", progress, () =>
    measureWatchBacklog(ctx, leader.address, registered[0], size + 1),
  );
  const fanout = await orFailed(failed, "fanout", progress, () =>
    measureChangeFanout(
      leader.address,
      ctx.cluster.caPem,
      registered.slice(0, scale.watchers),
      owner,
      registered[scale.watchers].nodeId,
      scale.changes,
    ),
  );

  progress(`(5) ${faultName(scale)} of the leader ${leader.nodeId.slice(0, 20)}…`);
  await sims.startProfile();
  await sims.startLoopDelay();
  let failoverHostLoopDelay: LoopDelay | undefined;
  const { result: failover, cpu: failoverCpu } = await curators.killAndRespawn(
    scale.leaderFault,
    leader,
    async () => {
      const recovery = await untilAllHealthy(
        owner,
        ids,
        scale.healthyTimeoutMs,
        progress,
        describe,
      );
      failoverHostLoopDelay = await sims.stopLoopDelay();
      await reportProfiles(progress, "the failover", sims.stopProfile("failover"));
      return recovery;
    },
    sims.pids,
  );
  progress(`    ${outcome(failover)}; ${await sims.describeLog()}`);
  progress(`    CPU meanwhile: ${describeCpu(failoverCpu)}`);

  leader = await curators.leader();
  progress(
    `(6) the same with ${scale.owners} owners listing every node each second, after ${standbySpreadMs / 1000} s to settle`,
  );
  // The curator killed in (5) is back, and every node connects to it again
  // (its standby connection) within standbySpreadMs: 5,000 TLS handshakes
  // that the failover measured here would otherwise share the two cores
  // with, and which (5) did not have. This failover differs from that one
  // only by the owners.
  await new Promise((r) => setTimeout(r, standbySpreadMs));
  // In a process of their own, at the node hosts' priority (scale/owner-host.ts).
  const ownerHost = new OwnerHost({
    count: scale.owners,
    caPem: ctx.cluster.caPem,
    owner: ctx.cluster.owner,
    curators: curators.addresses,
  });
  let failoverWithOwners: Recovery;
  let failoverWithOwnersCpu: FailoverCpu;
  let owners: OwnerHostResult;
  try {
    // Let the listings run for a few seconds first: the leader is loaded when it dies.
    await new Promise((r) => setTimeout(r, 3000));
    ({ result: failoverWithOwners, cpu: failoverWithOwnersCpu } = await curators.killAndRespawn(
      scale.leaderFault,
      leader,
      () => untilAllHealthy(owner, ids, scale.healthyTimeoutMs, progress, describe),
      sims.pids,
      ownerHost.pid,
    ));
  } finally {
    owners = await ownerHost.stop().catch((e: unknown) => {
      progress(`    the owners' figures were lost: ${String(e)}`);
      return { latencies: [], failures: NaN };
    });
  }
  progress(`    ${outcome(failoverWithOwners)}; ${await sims.describeLog()}`);
  progress(`    CPU meanwhile: ${describeCpu(failoverWithOwnersCpu)}`);

  return {
    nodes: size,
    enrolmentPerSecond: reg.rate,
    attachMs: attach.ms,
    timelines: {
      attach: attach.timeline,
      failover: failover.timeline,
      failoverWithOwners: failoverWithOwners.timeline,
    },
    heartbeatP50Ms: percentile(latencies, 50),
    heartbeatP99Ms: percentile(latencies, 99),
    heartbeatsPerSecond: latencies.length / seconds,
    heartbeatPhase: heartbeatPhase(sentAt, scale.heartbeatIntervalMs),
    failoverHostLoopDelay,
    loopDelay: {
      leader: leaderLoopDelay,
      hosts: worstLoopDelay(loopDelays),
    },
    leaderCpuMsPerSecond,
    steadyCpu,
    leaderRssBytes,
    etcdDbBytes: Number(after.dbSize),
    etcdRevisionsPerSecond:
      (Number(after.header.revision) - Number(before.header.revision)) / seconds,
    watchBacklogMs: backlog ? median(backlog.full) : NaN,
    watchResumedMs: backlog ? median(backlog.resumed) : NaN,
    watchResumedNodes: backlog ? backlog.resumedNodes : NaN,
    fanoutP99Ms: fanout && fanout.length > 0 ? percentile(fanout, 99) : NaN,
    failed,
    failoverMs: failover.ms,
    failoverWithOwnersMs: failoverWithOwners.ms,
    failoverCpu,
    failoverWithOwnersCpu,
    incomplete: Object.fromEntries(
      (
        [
          ["attach", attach],
          ["failover", failover],
          ["failoverWithOwners", failoverWithOwners],
        ] as const
      ).flatMap(([name, r]) => (r.complete ? [] : [[name, r.healthy]])),
    ),
    ownerListingP99Ms: percentile(owners.latencies, 99),
    ownerListingFailures: owners.failures,
    observer,
  };
}

function rowsOf(r: SizeResult, scale: ScaleConfig): Row[] {
  const t = r.nodes === targetAt;
  const target = (text: string, met: boolean) => (t ? { target: text, met } : {});
  const n = r.nodes;
  // A wait that gave up says so, with the nodes HEALTHY by then; its value is the time it waited.
  const gaveUp = (wait: keyof SizeResult["incomplete"]) => {
    const healthy = r.incomplete[wait];
    return healthy === undefined ? "" : ` — gave up, ${healthy} of ${n} HEALTHY`;
  };
  const failed = (name: keyof SizeResult["failed"]) => {
    const why = r.failed[name];
    return why === undefined ? "" : ` — failed: ${why}`;
  };
  return [
    {
      measure: `[${n}] enrolment (register → approve → commit), 20 in flight`,
      value: r.enrolmentPerSecond,
      unit: "nodes/s",
    },
    {
      measure: `[${n}] new nodes' workers started${waveText(scale)} → all HEALTHY${gaveUp("attach")}`,
      value: r.attachMs / 1000,
      unit: "s",
    },
    {
      measure: `[${n}] heartbeats answered (interval ${scale.heartbeatIntervalMs} ms)`,
      value: r.heartbeatsPerSecond,
      unit: "beats/s",
    },
    {
      measure: `[${n}] heartbeats in the interval's busiest ${r.heartbeatPhase.slotMs} ms, to the mean`,
      value: r.heartbeatPhase.busiestToMean,
      unit: "×",
    },
    {
      measure: `[${n}] share of heartbeats in the interval's busiest tenth`,
      value: r.heartbeatPhase.busiestTenthShare * 100,
      unit: "%",
    },
    { measure: `[${n}] heartbeat answer p50`, value: r.heartbeatP50Ms, unit: "ms" },
    {
      measure: `[${n}] heartbeat answer p99`,
      value: r.heartbeatP99Ms,
      unit: "ms",
      ...target("< 100", r.heartbeatP99Ms < 100),
    },
    {
      measure: `[${n}] leader CPU, steady state`,
      value: r.leaderCpuMsPerSecond,
      unit: "ms/s",
      ...target("< 500", r.leaderCpuMsPerSecond < 500),
    },
    {
      measure: `[${n}] steady state: the node hosts on a CPU`,
      value: r.steadyCpu.hosts.runMsPerSecond,
      unit: "ms/s",
    },
    {
      measure: `[${n}] steady state: the node hosts waiting for a CPU`,
      value: r.steadyCpu.hosts.waitMsPerSecond,
      unit: "ms/s",
    },
    {
      measure: `[${n}] steady state: the leader's event loop delay, p99`,
      value: r.loopDelay.leader?.p99Ms ?? NaN,
      unit: "ms",
    },
    {
      measure: `[${n}] steady state: the leader's event loop delay, max`,
      value: r.loopDelay.leader?.maxMs ?? NaN,
      unit: "ms",
    },
    ...gcRows(`[${n}] steady state: the leader's`, r.loopDelay.leader),
    {
      measure: `[${n}] steady state: the node hosts' event loop delay, p99 (worst host)`,
      value: r.loopDelay.hosts?.p99Ms ?? NaN,
      unit: "ms",
    },
    {
      measure: `[${n}] steady state: the node hosts' event loop delay, max (that host)`,
      value: r.loopDelay.hosts?.maxMs ?? NaN,
      unit: "ms",
    },
    ...gcRows(`[${n}] steady state: that host's`, r.loopDelay.hosts),
    {
      measure: `[${n}] steady state: the machine busy (all CPUs)`,
      value: r.steadyCpu.machine.busyMsPerSecond,
      unit: "ms/s",
    },
    {
      measure: `[${n}] steady state: of which in the kernel (system, interrupts)`,
      value: r.steadyCpu.machine.kernelMsPerSecond,
      unit: "ms/s",
    },
    ...(
      [
        ["the leader's whole process", r.steadyCpu.processes.leader],
        ["the followers' whole processes", r.steadyCpu.processes.followers],
        ["the etcd members' whole processes", r.steadyCpu.processes.etcd],
        ["the node hosts' whole processes", r.steadyCpu.processes.hosts],
        ["the benchmark's whole process", r.steadyCpu.processes.bench],
      ] as const
    ).map(([who, value]) => ({
      measure: `[${n}] steady state: ${who} (every thread)`,
      value,
      unit: "ms/s",
    })),
    {
      measure: `[${n}] steady state: CPU time the hypervisor took`,
      value: r.steadyCpu.machine.stolenMsPerSecond,
      unit: "ms/s",
    },
    {
      measure: `[${n}] leader CPU per node`,
      value: (r.leaderCpuMsPerSecond * 1000) / n,
      unit: "µs/s",
    },
    { measure: `[${n}] leader RSS`, value: r.leaderRssBytes / 2 ** 20, unit: "MiB" },
    { measure: `[${n}] leader RSS per node`, value: r.leaderRssBytes / n / 1024, unit: "KiB" },
    { measure: `[${n}] etcd database size`, value: r.etcdDbBytes / 2 ** 20, unit: "MiB" },
    { measure: `[${n}] etcd writes, steady state`, value: r.etcdRevisionsPerSecond, unit: "rev/s" },
    {
      measure: `[${n}] Watch(all) backlog${failed("watchBacklog")}`,
      value: r.watchBacklogMs,
      unit: "ms",
      ...target("< 1000", r.watchBacklogMs < 1000),
    },
    {
      measure: `[${n}] Watch(all) resumed (${r.watchResumedNodes} nodes in its backlog)${failed("watchBacklog")}`,
      value: r.watchResumedMs,
      unit: "ms",
    },
    {
      measure: `[${n}] a change reaching ${scale.watchers} watchers, p99${failed("fanout")}`,
      value: r.fanoutP99Ms,
      unit: "ms",
      ...target("< 100", r.fanoutP99Ms < 100),
    },
    {
      measure: `[${n}] leader ${faultName(scale)} → all HEALTHY (lease ${scale.leaderTtlSeconds} s)${gaveUp("failover")}`,
      value: r.failoverMs / 1000,
      unit: "s",
      ...target("< 30", r.failoverMs < 30_000 && r.incomplete.failover === undefined),
    },
    {
      measure: `[${n}] the same, ${scale.owners} owners listing every second${gaveUp("failoverWithOwners")}`,
      value: r.failoverWithOwnersMs / 1000,
      unit: "s",
      ...target(
        "< 30",
        r.failoverWithOwnersMs < 30_000 && r.incomplete.failoverWithOwners === undefined,
      ),
    },
    ...cpuRows(n, "the failover", r.failoverCpu),
    {
      measure: `[${n}] during the failover: the node hosts' event loop delay, p99 (worst host)`,
      value: r.failoverHostLoopDelay?.p99Ms ?? NaN,
      unit: "ms",
    },
    {
      measure: `[${n}] during the failover: the node hosts' event loop delay, max (that host)`,
      value: r.failoverHostLoopDelay?.maxMs ?? NaN,
      unit: "ms",
    },
    ...cpuRows(n, "the failover with owners", r.failoverWithOwnersCpu),
    {
      measure: `[${n}] an owner's listing of every node, p99`,
      value: r.ownerListingP99Ms,
      unit: "ms",
    },
    {
      measure: `[${n}] owners' listings failed (during the failover)`,
      value: r.ownerListingFailures,
      unit: "",
    },
    ...(scale.observer ? observerRows(r) : []),
  ];
}

/** Who had the CPUs during `what` (see FailoverCpu), in ms per second (1000: a whole core). */
function cpuRows(n: number, what: string, cpu: FailoverCpu): Row[] {
  const wholeProcesses: [string, number][] = [
    ["the new leader's whole process", cpu.processes.leader],
    ["the other follower's whole process", cpu.processes.follower],
    ["the etcd members' whole processes", cpu.processes.etcd],
    ["the node hosts' whole processes", cpu.processes.hosts],
  ];
  const rows = (who: string, share: CpuShare): Row[] => [
    {
      measure: `[${n}] during ${what}: ${who} on a CPU`,
      value: share.runMsPerSecond,
      unit: "ms/s",
    },
    {
      measure: `[${n}] during ${what}: ${who} waiting for a CPU`,
      value: share.waitMsPerSecond,
      unit: "ms/s",
    },
  ];
  return [
    ...rows("the new leader", cpu.leader),
    ...rows("the node hosts", cpu.hosts),
    ...(cpu.owners ? rows("the owners' clients", cpu.owners) : []),
    ...wholeProcesses.map(([who, value]) => ({
      measure: `[${n}] during ${what}: ${who} (every thread)`,
      value,
      unit: "ms/s",
    })),
    {
      measure: `[${n}] during ${what}: the machine busy (all CPUs)`,
      value: cpu.machine.busyMsPerSecond,
      unit: "ms/s",
    },
    {
      measure: `[${n}] during ${what}: of which in the kernel (system, interrupts)`,
      value: cpu.machine.kernelMsPerSecond,
      unit: "ms/s",
    },
    {
      measure: `[${n}] during ${what}: CPU time the hypervisor took`,
      value: cpu.machine.stolenMsPerSecond,
      unit: "ms/s",
    },
  ];
}

/** The rows of `--observer` (NaN, with why, when it failed). */
function observerRows(r: SizeResult): Row[] {
  const n = r.nodes;
  const o = r.observer;
  const why = r.failed.observer === undefined ? "" : ` — failed: ${r.failed.observer}`;
  const value = (pick: (o: ObserverFigures) => number) => (o ? pick(o) : NaN);
  return [
    {
      measure: `[${n}] observer: page opened → every node listed${why}`,
      value: value((o) => o.firstRenderMs),
      unit: "ms",
    },
    {
      measure: `[${n}] observer: a label change shown in the node's row, p99`,
      value: value((o) => o.changeP99Ms),
      unit: "ms",
      // The "changes appear within a second", at every size.
      target: "< 1000",
      met: value((o) => o.changeP99Ms) < 1000,
    },
    {
      measure: `[${n}] observer: filter typed → one row shown, p50`,
      value: value((o) => o.filterP50Ms),
      unit: "ms",
    },
    {
      measure: `[${n}] observer: the page's long tasks while the cluster streams`,
      value: value((o) => o.longTaskMsPerSecond),
      unit: "ms/s",
    },
    {
      measure: `[${n}] observer: the page's longest task`,
      value: value((o) => o.longestTaskMs),
      unit: "ms",
    },
  ];
}

const palette: Rgb[] = [
  [31, 119, 180],
  [214, 39, 40],
  [44, 160, 44],
  [148, 103, 189],
];

async function writePlot(results: readonly SizeResult[]): Promise<string> {
  const panel = (title: string, series: [string, (r: SizeResult) => number][]) => ({
    title,
    xLabel: "nodes",
    series: series.map(([label, y], i) => ({
      label,
      color: palette[i],
      points: results.map((r) => [r.nodes, y(r)] as const),
    })),
  });
  const png = logLogPlot([
    panel("leader cost", [
      ["CPU, ms per s", (r) => r.leaderCpuMsPerSecond],
      ["RSS, MiB", (r) => r.leaderRssBytes / 2 ** 20],
      ["etcd DB, MiB", (r) => r.etcdDbBytes / 2 ** 20],
    ]),
    panel("latency, ms", [
      ["heartbeat p99", (r) => r.heartbeatP99Ms],
      ["change to 10 watchers p99", (r) => r.fanoutP99Ms],
      ["Watch(all) backlog", (r) => r.watchBacklogMs],
    ]),
    panel("recovery, s", [
      ["failover to all HEALTHY", (r) => r.failoverMs / 1000],
      ["the same, 10 owners listing", (r) => r.failoverWithOwnersMs / 1000],
      ["new nodes to all HEALTHY", (r) => r.attachMs / 1000],
    ]),
  ]);
  const path = join(__dirname, "..", "..", "reports", "bench-scale.png");
  await writeFile(path, png);
  return path;
}

async function run(processes: CuratorProcesses, scale: ScaleConfig): Promise<void> {
  const largest = scale.sizes[scale.sizes.length - 1];
  const config = {
    ...benchConfig(),
    leaderTtlSeconds: scale.leaderTtlSeconds,
    nodes: largest,
    watchdogMs: (20 + largest / 200) * 60_000,
  };
  const progress = progressReporter();
  const watchdog = setTimeout(() => {
    console.error(`scale simulator: still running after ${config.watchdogMs / 1000} s, giving up`);
    processes.killAll();
    process.exit(1);
  }, config.watchdogMs);
  watchdog.unref();

  progress("starting a 3-member etcd cluster and bootstrapping a cluster in it");
  const cluster = await startCluster(config.leaderTtlSeconds, productionMember);
  const members = await addMembers(cluster, 2, productionMember).catch(async (e: unknown) => {
    await cluster.stop();
    throw e;
  });
  let sims: NodeHosts | undefined;
  const interrupted = () => {
    processes.killAll();
    sims?.killAll();
    void members
      .stop()
      .then(() => cluster.stop())
      .finally(() => process.exit(130));
  };
  process.once("SIGINT", interrupted).once("SIGTERM", interrupted);
  const ctx: BenchContext = { config, cluster, processes, nextHost: loopbackHosts(), progress };
  const etcd = memberClient(cluster.socketPath);
  const results: SizeResult[] = [];
  let owner: CuratorConnection | undefined;
  try {
    progress("starting three curators, one per etcd member");
    const curators = new Curators(
      ctx,
      await Promise.all(members.sockets.map((s) => CuratorProcess.start(ctx, s))),
    );
    await curators.leader();
    owner = ownerConnection(cluster.caPem, cluster.owner, curators.addresses, instrumentKeepalive);
    progress(`starting ${scale.hosts} node host processes`);
    sims = new NodeHosts(
      {
        curators: curators.addresses,
        heartbeatIntervalMs: scale.heartbeatIntervalMs,
      },
      scale.hosts,
      await mkdtemp(join(tmpdir(), "bench-scale-nodes-")),
    );
    const registered: RegisteredNode[] = [];
    const ids = new Set<string>();
    for (const size of scale.sizes) {
      const r = await measureSize(ctx, scale, size, curators, owner, sims, registered, ids, etcd);
      results.push(r);
      printTable(`scale at ${size} nodes`, rowsOf(r, scale));
    }
  } finally {
    progress("stopping");
    await sims?.stop();
    owner?.close();
    etcd.close();
    await processes.stopAll();
    await members.stop();
    await cluster.stop();
  }
  const rows = results.flatMap((r) => rowsOf(r, scale));
  printTable("scale", rows);
  console.log(`\nplot written to ${await writePlot(results)}`);
  await writeReport("bench-scale.json", rows, console.log, {
    settings: scale,
    results,
    simulatedNodeLog: sims?.log,
  });
}

// The benchmark's own owner connection dials curators by IP, as metroctl does.
silenceIpServerNameWarning();
const processes = new CuratorProcesses();
run(processes, scaleConfig(process.argv.slice(2))).then(
  () => process.exit(0),
  (e: unknown) => {
    console.error(e);
    processes.killAll();
    process.exit(1);
  },
);
