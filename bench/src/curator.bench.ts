/**
 * Curator benchmark: `npm run bench:curator` (`METROPOLIS_BENCH_NODES=100`
 * for a reduced run).
 *
 * What the cluster's control plane costs and how fast it recovers, against
 * one real etcd member (local raft timings) and real gRPC with mutual TLS on
 * loopback. One scenario a file under curator/:
 *
 * 1. Failover (failover.ts): SIGKILL of the leader's process until a follower
 *    leads, with a 2 s election lease. Target: lease TTL + 1 s.
 * 2. Registration (registration.ts): 1,000 simulated nodes, 20 at a time,
 *    RegisterNode → ApproveNode → CommitNode → UP.
 * 3. Watch backlog (watch-backlog.ts): Watch(NodesInCluster) until
 *    LAST_BACKLOGGED with those 1,001 records. Target: 250 ms.
 * 4. Heartbeats (heartbeats.ts): the 1,000 nodes beat once a second for
 *    10 s; rate, latency and the leader's CPU share.
 *
 * The two targets are absolute (bench/README.md says why). The leader of
 * 2–4 runs in its own process, so that its CPU time is its own. Every
 * process is stopped by PID at the end; a watchdog ends the benchmark if it
 * runs far longer than expected. Prints a table and writes
 * reports/bench-curator.json.
 */
import { printTable, writeReport, type Row } from "./report";
import { loopbackHosts, progressReporter, type BenchContext } from "./curator/bench-context";
import { startCluster } from "./curator/cluster";
import { benchConfig } from "./curator/config";
import { CuratorProcess, CuratorProcesses } from "./curator/curator-processes";
import { failoverRows, measureFailover } from "./curator/failover";
import { heartbeatRows, measureHeartbeats } from "./curator/heartbeats";
import { measureRegistration, registrationRows } from "./curator/registration";
import { measureWatchBacklog, watchBacklogRows } from "./curator/watch-backlog";

/** Scenarios 2–4, against one leader in a process of its own. */
async function underOneLeader(ctx: BenchContext): Promise<Row[]> {
  const rows: Row[] = [];
  const leader = await CuratorProcess.start(ctx);
  try {
    await leader.leading();

    ctx.progress(`(2) registering ${ctx.config.nodes} nodes`);
    const registration = await measureRegistration(ctx, leader);
    rows.push(...registrationRows(ctx, registration));

    ctx.progress("(3) watch backlog");
    const expected = ctx.config.nodes + 1; // and the bootstrap node
    // The leader does nothing else meanwhile: its CPU is the watches'.
    const backlog = await measureWatchBacklog(
      ctx,
      leader.address,
      registration.nodes[0],
      expected,
      () => leader.cpuMs(),
    );
    rows.push(...watchBacklogRows(ctx, expected, backlog));

    ctx.progress(`(4) heartbeats of ${ctx.config.nodes} nodes`);
    const heartbeats = await measureHeartbeats(ctx, leader, registration.nodes);
    rows.push(...heartbeatRows(ctx, heartbeats));
  } finally {
    await leader.stop();
  }
  return rows;
}

async function run(processes: CuratorProcesses): Promise<void> {
  const config = benchConfig();
  const progress = progressReporter();
  const watchdog = setTimeout(() => {
    console.error(
      `curator benchmark: still running after ${config.watchdogMs / 1000} s, giving up`,
    );
    processes.killAll();
    process.exit(1);
  }, config.watchdogMs);
  watchdog.unref();

  progress("starting etcd and bootstrapping the cluster");
  const cluster = await startCluster(config.leaderTtlSeconds);
  // Interrupted: stop the curators and etcd rather than leave them behind.
  const interrupted = () => {
    processes.killAll();
    void cluster.stop().finally(() => process.exit(130));
  };
  process.once("SIGINT", interrupted).once("SIGTERM", interrupted);
  const ctx: BenchContext = { config, cluster, processes, nextHost: loopbackHosts(), progress };
  const rows: Row[] = [];
  try {
    progress(`(1) failover, ${config.failoverRounds} rounds`);
    rows.push(...failoverRows(ctx, await measureFailover(ctx)));
    rows.push(...(await underOneLeader(ctx)));
  } finally {
    await processes.stopAll();
    await cluster.stop();
  }
  printTable("curator", rows);
  await writeReport("bench-curator.json", rows);
  clearTimeout(watchdog);
}

/** Runs the benchmark; the exit code. No curator process is left running, whatever happens. */
async function main(): Promise<number> {
  const processes = new CuratorProcesses();
  try {
    await run(processes);
    return 0;
  } catch (e) {
    console.error(e);
    processes.killAll();
    return 1;
  }
}

// Lingering gRPC channels or etcd watchers must not keep the benchmark alive.
void main().then((code) => process.exit(code));
