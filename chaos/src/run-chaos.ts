/**
 * One chaos run, start to end: a fresh local cluster of real
 * `metropolis-node` processes on a random loopback /24 (node1…node3
 * consensus members, the others not), the workload for the whole run, the
 * nemesis in phase A (a majority of members always serving), phase B (a
 * majority down for a while) and a final healing period; then the recovery
 * and the final invariants are measured, every register is read a last
 * time, and the history is checked.
 *
 * With `hosts`, the cluster runs on a testbed instead (local-cluster's
 * hosts mode: every node in a network namespace of its own on a bridge):
 * 6 nodes, node1…node5 consensus members (a majorities ring needs 5), node6
 * the spare whose consensus role the nemesis changes; every node started
 * with libfaketime preloaded (LocalCluster's `nodeEnv`, clock-faults.ts);
 * and the nemesis also breaks the network, the clocks and the membership.
 * Throughout, the leader probe (leader-probe.ts) asks every curator
 * directly who leads and reads through it, and the checker also proves that
 * no two curators acted as the leader at once (leader-check.ts).
 *
 * Guarantees: however it ends (also on an error), every process it started
 * is stopped by PID (SIGTERM, SIGKILL after the launcher's timeout), every
 * node's in-memory `ephemeral/` is released, and the state dir is removed
 * unless `keep`; `leftoverPids` of the report lists any PID that was still
 * alive afterwards. It resolves with the report (also when the checks
 * failed: see `passed`); it rejects only when the cluster could not be
 * brought up or the run could not be carried out.
 */
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { silenceIpServerNameWarning } from "@metropolis/curator";
import {
  ClusterView,
  curatorPort,
  LocalCluster,
  Network,
  processGroupMembers,
  randomLoopbackNet,
  type ClusterNode,
  type NodeProcess,
} from "@metropolis/local-cluster";
import { placeNodeRoot } from "@metropolis/localstorage";
import type { api } from "@metropolis/proto";
import { abortableSleep } from "@metropolis/supervisor";
import { checkHistory } from "./checker";
import { ClockControl, faketimeAvailable, removeFaketimeLeftovers } from "./clock-faults";
import { renderTimeline } from "./timeline-svg";
import { ChaosRunError } from "./errors";
import type { FinalRead, Operation, RegisterId } from "./history";
import { HistoryRecorder } from "./history-recorder";
import { checkAnswers, checkInvariants, etcdDataMarkers, waitAllHealthy } from "./invariants";
import { checkLeaders, servesInHistory } from "./leader-check";
import { LeaderProbe } from "./leader-probe";
import { LeaderWatch } from "./leader-watch";
import { Nemesis } from "./nemesis";
import { OwnerClient } from "./owner-client";
import { Prng } from "./prng";
import {
  countErrors,
  formatReport,
  longestWriteGap,
  okPerSecond,
  writeReport,
  type ChaosReport,
  type Phase,
} from "./report";
import { registerId, registerKeys, Workload } from "./workload";

/** What a run does. */
export interface ChaosOptions {
  /** How long faults and the workload run, in minutes (default 5). */
  minutes?: number;
  /** The PRNG's seed: the same seed, the same faults at the same times. */
  seed: number;
  /**
   * How many nodes (default 5, at least 4: 3 consensus members and register
   * nodes; on the testbed default 6, at least 6: 5 members and a spare).
   */
  nodes?: number;
  /**
   * Run on a testbed (local-cluster's hosts mode) with network, clock and
   * membership faults; needs root (see `Testbed.available()`).
   */
  hosts?: boolean;
  /** Whether phase B takes a majority of consensus members down (default true). */
  phaseB?: boolean;
  /** The JSON report's path (default reports/chaos-<seed>.json); the SVG goes next to it. */
  out?: string;
  /** Keep the state dir (node logs in `<dir>/logs/`). */
  keep?: boolean;
  /** Progress lines (default: stdout). */
  log?: (line: string) => void;
}

/** How many nodes are consensus members: 3 on loopback, 5 on the testbed (a ring needs 5). */
const memberCount = (hosts: boolean): number => (hosts ? 5 : 3);

/** What the testbed adds to a run: the network, the clocks, the spare node. */
interface HostsRun {
  network: Network;
  /** Undefined where libfaketime is not installed (no clock faults then). */
  clock: ClockControl | undefined;
  spare: ClusterNode;
}

/** Runs one chaos run; see the module comment. */
export async function runChaos(options: ChaosOptions): Promise<ChaosReport> {
  const minutes = options.minutes ?? 5;
  const hosts = options.hosts ?? false;
  const members = memberCount(hosts);
  const nodeCount = options.nodes ?? (hosts ? members + 1 : 5);
  const phaseB = options.phaseB ?? true;
  const log = options.log ?? ((line: string) => process.stdout.write(line + "\n"));
  // Register nodes 4 and 5 beyond 3 members; on the testbed, a spare beyond 5.
  const least = members + 1;
  if (nodeCount < least) {
    throw new ChaosRunError(
      `a chaos run${hosts ? " on the testbed" : ""} needs at least ${least} nodes, got ${nodeCount}`,
    );
  }
  silenceIpServerNameWarning();
  const dir = await mkdtemp(join(tmpdir(), `metropolis-chaos-${options.seed}-`));
  const stateDir = join(dir, "cluster");
  // On the testbed every node reads its wall clock's offset from a file of its own, from its
  // first start on (no file: no offset).
  const clock = hosts && faketimeAvailable() ? new ClockControl(join(dir, "faketime")) : undefined;
  const cluster = new LocalCluster({
    stateDir,
    nodes: nodeCount,
    ...(hosts ? { hosts: true } : { address: randomLoopbackNet() }),
    consensusOnEveryNode: false,
    log,
    stepTimeoutMs: 90_000,
    ...(clock && { nodeEnv: (node: ClusterNode) => clock.environment(node) }),
  });
  try {
    log(
      `chaos: seed ${options.seed}, ${minutes} min, ${nodeCount} nodes` +
        `${hosts ? " on a testbed" : ""}, state in ${dir}`,
    );
    await cluster.up();
    const memberNodes = cluster.nodes.slice(0, members);
    for (const m of memberNodes.slice(1)) await cluster.setConsensus(m, true);
    const testbed = hosts ? await prepareHosts(cluster, memberNodes, clock, log) : undefined;
    const { report, svg, history } = await runOnCluster(cluster, memberNodes, testbed, {
      ...options,
      minutes,
      nodeCount,
      phaseB,
      log,
    });
    return await finish(report, svg, history, cluster, log);
  } catch (e) {
    log(`chaos: the run failed; the nodes' last warnings and errors:`);
    for (const line of cluster.recentTrouble()) log(`  ${line}`);
    throw e;
  } finally {
    await stopAll(cluster);
    // Removes the testbed the cluster owns (hosts mode); the nodes are down already.
    await cluster.stop().catch((e: unknown) => log(`chaos: stopping the cluster: ${String(e)}`));
    if (clock) await removeFaketimeLeftovers(cluster.started.map((p) => p.pid));
    cluster.release();
    if (options.keep) log(`chaos: state and node logs kept in ${dir}`);
    else await rm(dir, { recursive: true, force: true });
  }
}

/** The testbed's part before the run: the network's fault chains; the clocks, if any. */
async function prepareHosts(
  cluster: LocalCluster,
  members: readonly ClusterNode[],
  clock: ClockControl | undefined,
  log: (line: string) => void,
): Promise<HostsRun> {
  const testbed = cluster.testbed;
  if (!testbed) throw new ChaosRunError("hosts mode without a testbed");
  const network = await Network.create(testbed);
  if (!clock) log("chaos: libfaketime is not installed (Debian's libfaketime): no clock faults");
  return { network, clock, spare: cluster.nodes[members.length] };
}

/** The run proper, on a cluster that is up: workload, nemesis, recovery, checks. */
async function runOnCluster(
  cluster: LocalCluster,
  members: ClusterNode[],
  hosts: HostsRun | undefined,
  opts: ChaosOptions & {
    minutes: number;
    nodeCount: number;
    phaseB: boolean;
    log: (l: string) => void;
  },
): Promise<{ report: ChaosReport; svg: string; history: Operation[] }> {
  const view = new ClusterView(cluster);
  const owner = await view.owner();
  const prng = new Prng(opts.seed);
  const recorder = new HistoryRecorder();
  const now = () => recorder.now();
  const totalMs = opts.minutes * 60_000;
  const phaseAEndsAt = totalMs * 0.7;
  const faultsEndAt = totalMs * 0.9;
  const phases: Phase[] = opts.phaseB
    ? [
        { name: "A", start: 0, end: phaseAEndsAt },
        { name: "B", start: phaseAEndsAt, end: faultsEndAt },
        { name: "healing", start: faultsEndAt, end: totalMs },
      ]
    : [
        { name: "A", start: 0, end: faultsEndAt },
        { name: "healing", start: faultsEndAt, end: totalMs },
      ];
  const markers = await etcdDataMarkers(members);
  // Every node that may run a curator: the members, and the spare while it is one.
  const curators = hosts ? [...members, hosts.spare] : members;
  const endpoints = curators.map((m) => ({ host: m.address, port: curatorPort, nodeId: m.id }));
  // Nodes 4 and 5 (members themselves on the testbed, where there are 5).
  const registerNodes = cluster.nodes.slice(3, 5);
  const nodeName = (id: string) => cluster.nodes.find((n) => n.id === id)?.name ?? id;
  const workload = new Workload({
    endpoints,
    owner,
    registerNodes,
    recorder,
    prng: prng.fork("workload"),
    nodeName,
  });
  const leaders = new LeaderWatch(view, curators, now);
  const probe = new LeaderProbe({ curators, owner, recorder, registerNodes, now });
  const nemesis = new Nemesis({
    cluster,
    view,
    prng: prng.fork("nemesis"),
    now,
    members,
    nodes: cluster.nodes,
    phaseAEndsAt,
    faultsEndAt,
    phaseB: opts.phaseB,
    log: (line) => opts.log(`${(now() / 1000).toFixed(1).padStart(6)} s ${line}`),
    signal: new AbortController().signal,
    ...(hosts && {
      network: hosts.network,
      clock: hosts.clock,
      spare: hosts.spare,
      raftLeader: () => Promise.resolve(probe.raftLeader()),
    }),
  });

  workload.start();
  leaders.start();
  probe.start();
  try {
    await nemesis.run();
  } finally {
    // Whatever happened: the network whole and every clock right before the recovery.
    await hosts?.network.heal();
    await hosts?.clock?.reset(cluster.nodes);
  }
  const lastFaultAt = nemesis.lastFaultAt;
  opts.log(`chaos: last fault healed at ${(lastFaultAt / 1000).toFixed(1)} s; measuring recovery`);
  const healthy = waitAllHealthy(view, cluster.nodes, now, 60_000);
  await abortableSleep(Math.max(0, totalMs - now()));
  await workload.stop();
  const allHealthyAt = await healthy;
  await leaders.stop();
  await probe.stop();

  const clusterInvariants = await checkInvariants({
    view,
    members,
    markers,
    allHealthyAt,
    logsDir: join(cluster.stateDir, "logs"),
  });
  const final = await finalRead(endpoints, owner, workload.registers, registerNodes, now);
  const history = recorder.history();
  const invariants = [...clusterInvariants, ...checkAnswers(history, nemesis.faults)];
  const checked = checkHistory(history, final);
  const leaderCheck = checkLeaders([
    ...probe.observations,
    ...leaders.claims,
    ...servesInHistory(history),
  ]);
  const endMs = now();
  const perSecond = okPerSecond(history, endMs);
  const out = resolve(opts.out ?? join("reports", `chaos-${opts.seed}.json`));
  const lostWrites = checked.anomalies.filter((a) => a.kind === "lost-write").length;
  const report: ChaosReport = {
    seed: opts.seed,
    minutes: opts.minutes,
    nodes: opts.nodeCount,
    phaseB: opts.phaseB,
    hosts: hosts !== undefined,
    testbed: hosts?.network.testbed.tag ?? null,
    // "unknown" (a register's search ran out of budget) is not a pass.
    passed:
      checked.valid === true && leaderCheck.anomalies.length === 0 && invariants.every((i) => i.ok),
    linearizability: checked.registers.map((r) => ({
      register: r.register,
      verdict: r.verdict,
      steps: r.steps,
    })),
    phases,
    ops: checked.counts,
    readsWithoutAnswer: workload.failedReads,
    lostWrites,
    staleReads: checked.anomalies.filter((a) => a.kind === "stale-read").length,
    anomalies: checked.anomalies,
    leaders: {
      anomalies: leaderCheck.anomalies,
      moments: leaderCheck.moments.map((m) => ({ from: Math.round(m.from), to: Math.round(m.to) })),
      serves: leaderCheck.serves,
      claims: leaderCheck.claims,
      terms: leaderCheck.terms.length,
      probeReads: probe.reads,
      probeConsensusAnswers: probe.consensusAnswers,
    },
    longestUnavailabilityPhaseAMs: longestWriteGap(
      history,
      0,
      opts.phaseB ? phaseAEndsAt : faultsEndAt,
    ),
    longestUnavailabilityPhaseBMs: opts.phaseB
      ? longestWriteGap(history, phaseAEndsAt, faultsEndAt)
      : null,
    lastFaultAt: Math.round(lastFaultAt),
    allHealthyAt: allHealthyAt === undefined ? null : Math.round(allHealthyAt),
    recoveryMs:
      allHealthyAt === undefined ? null : Math.round(Math.max(0, allHealthyAt - lastFaultAt)),
    healthyWithin15s: allHealthyAt !== undefined && allHealthyAt - lastFaultAt <= 15_000,
    leaderChanges: leaders.changes.map((c) => ({ ...c, at: Math.round(c.at) })),
    faults: nemesis.faults.map((f) => ({
      ...f,
      start: Math.round(f.start),
      end: Math.round(f.end),
    })),
    invariants,
    okPerSecond: perSecond,
    startedPids: [],
    leftoverPids: [],
    errors: countErrors(history),
    files: {
      json: out,
      svg: out.replace(/\.json$/, "") + ".svg",
      history: out.replace(/\.json$/, "") + ".history.jsonl",
    },
  };
  // The report keeps the run clock's milliseconds; the timeline is drawn in seconds.
  const seconds = (ms: number) => ms / 1000;
  const svg = renderTimeline({
    title: `chaos run, seed ${opts.seed}`,
    faults: report.faults.map((f) => ({ ...f, start: seconds(f.start), end: seconds(f.end) })),
    twoLeaders: leaderCheck.moments.map((m) => ({ from: seconds(m.from), to: seconds(m.to) })),
    okPerSecond: perSecond,
    leaderChanges: report.leaderChanges.map((c) => ({ ...c, at: seconds(c.at) })),
    phases: phases.map((p) => ({ ...p, start: seconds(p.start), end: seconds(p.end) })),
    lastFaultAt: seconds(report.lastFaultAt),
    allHealthyAt: seconds(report.allHealthyAt ?? endMs),
  });
  return { report, svg, history };
}

/**
 * The registers' final values: GetNodes from the leader, retried (each
 * attempt 2 s) for up to 60 s.
 * @throws ChaosRunError when no leader answered.
 */
async function finalRead(
  endpoints: ConstructorParameters<typeof OwnerClient>[0],
  owner: ConstructorParameters<typeof OwnerClient>[1],
  registers: readonly RegisterId[],
  registerNodes: readonly ClusterNode[],
  now: () => number,
): Promise<FinalRead> {
  const client = new OwnerClient(endpoints, owner);
  const deadline = Date.now() + 60_000;
  try {
    for (;;) {
      try {
        const res = await client.attempt<api.GetNodesResponse>(
          (l, m, o, cb) =>
            l.management.getNodes({ states: [], roles: [], labels: new Map() }, m, o, cb),
          2000,
        );
        const values = new Map<RegisterId, string | null>(registers.map((r) => [r, null]));
        for (const node of registerNodes) {
          const seen = res.nodes.find((n) => n.id === node.id);
          for (const key of registerKeys) {
            values.set(registerId(node.id, key), seen?.labels.get(key) ?? null);
          }
        }
        return { at: now(), values };
      } catch (e) {
        if (Date.now() > deadline)
          throw new ChaosRunError("no final read within 60 s", { cause: e });
        await abortableSleep(500);
      }
    }
  } finally {
    client.close();
  }
}

/**
 * Stops every process, adds the PIDs still alive to the report, writes the
 * report and the timeline, and prints the table.
 */
async function finish(
  report: ChaosReport,
  svg: string,
  history: readonly Operation[],
  cluster: LocalCluster,
  log: (line: string) => void,
): Promise<ChaosReport> {
  await stopAll(cluster);
  const leftoverPids = aliveGroups(cluster.started);
  const final = {
    ...report,
    startedPids: cluster.started.map((p) => p.pid),
    leftoverPids,
    passed: report.passed && leftoverPids.length === 0,
  };
  await writeReport(final, svg, history);
  log(formatReport(final));
  return final;
}

/** Stops every process the cluster started (SIGCONT first: a frozen one cannot stop). */
async function stopAll(cluster: LocalCluster): Promise<void> {
  const procs = [...new Set(cluster.started)];
  for (const p of procs) {
    try {
      process.kill(-p.pid, "SIGCONT");
    } catch {
      // Gone already.
    }
  }
  await Promise.all(procs.map((p) => p.stop().catch(() => p.kill())));
  for (const root of new Set(procs.map((p) => p.root))) {
    await placeNodeRoot(root)
      .ephemeral.release()
      .catch(() => undefined);
  }
}

/** The process groups among `procs` that still have a live member. */
function aliveGroups(procs: readonly NodeProcess[]): number[] {
  return procs.flatMap((p) => {
    const members = processGroupMembers(p.pid);
    return members !== undefined && members.length > 0 ? members : [];
  });
}
