/**
 * e2e chaos: two short chaos runs (see ../chaos) through its exported
 * `runChaos`, not the CLI.
 *
 * - On loopback (about 1.5 minutes of faults and workload, seed 7): five
 *   real nodes, three of them consensus members, SIGKILL / SIGTERM / SIGSTOP
 *   of nodes, SIGKILL of a member's etcd alone and of the curator leader,
 *   and a majority of members down in phase B, under a workload of owner
 *   writes, reads and role changes.
 * - On a testbed (2 minutes, seed 3; needs root, skipped elsewhere saying
 *   why): six nodes in network namespaces of their own, five consensus
 *   members, and the network broken as well — partitions (split, majorities
 *   ring, bridge), isolated hosts and leaders, a blocked port, packet loss —
 *   clocks jumped and strobed (libfaketime), the spare node's consensus role
 *   changed.
 *
 * Each proves that no acknowledged write was lost, the history checker
 * found no anomaly (no stale read among them), no two curators served as
 * the leader at once, every final invariant held (every node back UP and
 * HEALTHY, voters, etcd membership, etcd data kept, no node exited on its
 * own), and that no process the run started is left — on the testbed, no
 * namespace either, nor libfaketime's shared memory of its node processes.
 */
import { execFileSync } from "node:child_process";
import { existsSync } from "node:fs";
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { processGroupMembers } from "../local-cluster/src/node-process";
import { testbedSuite } from "../local-cluster/src/testing";
import { runChaos, type ChaosOptions } from "../chaos/src/run-chaos";
import type { ChaosReport } from "../chaos/src/report";

// Bring-up (~1 min on a loaded machine; on the testbed also 5 members and every node restarted
// with libfaketime, ~1.5 min), the run, recovery and checks.
jest.setTimeout(600_000);

/** Runs chaos with `options` in a temp dir of its own; prints its last lines. */
async function run(
  name: string,
  options: Omit<ChaosOptions, "out" | "log" | "keep">,
): Promise<{ report: ChaosReport; dir: string }> {
  const dir = await mkdtemp(join(tmpdir(), `metropolis-e2e-${name}-`));
  const lines: string[] = [];
  try {
    const report = await runChaos({
      ...options,
      out: join(dir, `chaos-${options.seed}.json`),
      keep: Boolean(process.env.METROPOLIS_E2E_KEEP),
      log: (line) => lines.push(line),
    });
    process.stdout.write(`\ne2e ${name}:\n${lines.slice(-30).join("\n")}\n`);
    return { report, dir };
  } catch (e) {
    // A failed run's state dir is gone: its progress and the nodes' last warnings are all there is.
    process.stdout.write(`\ne2e ${name} (failed):\n${lines.slice(-200).join("\n")}\n`);
    throw e;
  }
}

/** No process of the run alive, nothing of its process groups left. */
function expectNothingLeft(report: ChaosReport): void {
  expect(report.startedPids.length).toBeGreaterThanOrEqual(5);
  expect(report.leftoverPids).toEqual([]);
  for (const pid of report.startedPids) {
    expect(existsSync(`/proc/${pid}`)).toBe(false);
    expect(processGroupMembers(pid) ?? []).toEqual([]);
  }
}

describe("chaos: a short run with seed 7", () => {
  let dir: string | undefined;
  let report: ChaosReport;

  beforeAll(async () => {
    ({ report, dir } = await run("chaos", { minutes: 1.5, seed: 7 }));
  });

  afterAll(async () => {
    if (dir) await rm(dir, { recursive: true, force: true });
  });

  it("injected faults, a majority outage among them, and the workload got writes through", () => {
    expect(report.faults.length).toBeGreaterThan(5);
    expect(report.faults.some((f) => f.kind === "majority-kill")).toBe(true);
    expect(report.ops.write.ok).toBeGreaterThan(100);
    expect(report.ops.read.ok).toBeGreaterThan(50);
  });

  it("lost no acknowledged write, and the checker found no anomaly", () => {
    expect(report.lostWrites).toBe(0);
    expect(report.anomalies).toEqual([]);
  });

  it("holds every final invariant", () => {
    expect(report.invariants.filter((i) => !i.ok)).toEqual([]);
    expect(report.recoveryMs).not.toBeNull();
    expect(report.passed).toBe(true);
  });

  it("leaves no process behind", () => {
    expectNothingLeft(report);
  });
});

const onTestbed = testbedSuite(
  "chaos on a testbed: a 2-minute run with seed 3, partitions, clocks and role changes",
);

(onTestbed.runs ? describe : describe.skip)(onTestbed.title, () => {
  let dir: string | undefined;
  let report: ChaosReport;

  beforeAll(async () => {
    ({ report, dir } = await run("chaos-hosts", { minutes: 2, seed: 3, hosts: true }));
  });

  afterAll(async () => {
    if (dir) await rm(dir, { recursive: true, force: true });
  });

  it("broke the network (partitions among the faults) and the workload got writes through", () => {
    // Seed 3 draws 4 in 2 minutes when the run goes as measured; timings drift, so at least 2.
    const network = report.faults.filter((f) => f.category === "network");
    expect(network.length).toBeGreaterThanOrEqual(2);
    expect(network.filter((f) => f.error === undefined).length).toBe(network.length);
    expect(report.faults.some((f) => f.kind === "majority-kill")).toBe(true);
    expect(report.ops.write.ok).toBeGreaterThan(100);
    expect(report.leaders.probeReads).toBeGreaterThan(50);
  });

  it("lost no acknowledged write: no anomaly, no stale read, never two serving leaders", () => {
    expect(report.lostWrites).toBe(0);
    expect(report.anomalies).toEqual([]);
    expect(report.staleReads).toBe(0);
    expect(report.leaders.anomalies).toEqual([]);
    expect(report.leaders.moments).toEqual([]);
    expect(report.leaders.terms).toBeGreaterThanOrEqual(1);
  });

  it("holds every final invariant, every node HEALTHY within 15 s of the last fault", () => {
    expect(report.invariants.filter((i) => !i.ok)).toEqual([]);
    expect(report.recoveryMs).not.toBeNull();
    expect(report.healthyWithin15s).toBe(true);
    expect(report.passed).toBe(true);
  });

  it("leaves no process, no namespace and no libfaketime shared memory behind", () => {
    expectNothingLeft(report);
    for (const pid of report.startedPids) {
      expect(existsSync(`/dev/shm/faketime_shm_${pid}`)).toBe(false);
      expect(existsSync(`/dev/shm/sem.faketime_sem_${pid}`)).toBe(false);
    }
    const tag = report.testbed;
    expect(tag).not.toBeNull();
    const namespaces = execFileSync("ip", ["netns", "list"], { encoding: "utf8" });
    expect(namespaces.split("\n").filter((l) => tag !== null && l.startsWith(`${tag}h`))).toEqual(
      [],
    );
  });
});
