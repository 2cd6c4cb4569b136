/**
 * e2e chaos: a short chaos run (about 1.5 minutes of faults and workload,
 * seed 7; see ../chaos) through its exported `runChaos`, not the CLI: five
 * real nodes, three of them consensus members, SIGKILL / SIGTERM / SIGSTOP
 * of nodes, SIGKILL of a member's etcd alone and of the curator leader, and
 * a majority of members down in phase B, under a workload of owner writes,
 * reads and role changes. It proves that no acknowledged write was lost, the
 * history checker found no anomaly, every final invariant held (every node
 * back UP and HEALTHY, voters, etcd membership, etcd data kept, no node
 * exited on its own), and that no process the run started is left.
 */
import { existsSync } from "node:fs";
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { processGroupMembers } from "../local-cluster/src/node-process";
import { runChaos } from "../chaos/src/run-chaos";
import type { ChaosReport } from "../chaos/src/report";

// Bring-up (~1 min on a loaded machine), 1.5 min of run, recovery and checks.
jest.setTimeout(480_000);

let dir: string;
let report: ChaosReport;

beforeAll(async () => {
  dir = await mkdtemp(join(tmpdir(), "metropolis-e2e-chaos-"));
  const lines: string[] = [];
  try {
    report = await runChaos({
      minutes: 1.5,
      seed: 7,
      out: join(dir, "chaos-7.json"),
      keep: Boolean(process.env.METROPOLIS_E2E_KEEP),
      log: (line) => lines.push(line),
    });
    process.stdout.write(`\ne2e chaos:\n${lines.slice(-24).join("\n")}\n`);
  } catch (e) {
    // A failed run's state dir is gone: its progress and the nodes' last warnings are all there is.
    process.stdout.write(`\ne2e chaos (failed):\n${lines.slice(-200).join("\n")}\n`);
    throw e;
  }
});

afterAll(async () => {
  if (dir) await rm(dir, { recursive: true, force: true });
});

describe("chaos: a short run with seed 7", () => {
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
    expect(report.startedPids.length).toBeGreaterThanOrEqual(5);
    expect(report.leftoverPids).toEqual([]);
    for (const pid of report.startedPids) {
      expect(existsSync(`/proc/${pid}`)).toBe(false);
      expect(processGroupMembers(pid) ?? []).toEqual([]);
    }
  });
});
