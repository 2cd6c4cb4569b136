/**
 * The report of a chaos run: every figure in one JSON file
 * (`reports/chaos-<seed>.json` unless `--out` says otherwise), the timeline
 * as SVG next to it, and a short table on the terminal.
 *
 * Figures: operations ok / failed / unknown by type, the checker's anomalies
 * (lost writes among them), the longest time in phase A without any
 * acknowledged write, the time from the last fault until every node was UP
 * and HEALTHY, leader changes, every fault, and the final invariants.
 */
import { mkdir, writeFile } from "node:fs/promises";
import { dirname } from "node:path";
import type { OutcomeCounts } from "./checker";
import type { Anomaly, Operation } from "./history";
import type { InvariantResult } from "./invariants";
import type { LeaderAnomaly } from "./leader-check";
import type { LeaderChange } from "./leader-watch";
import type { FaultRecord } from "./nemesis";

/** A phase of the run (run clock, ms). */
export interface Phase {
  name: string;
  start: number;
  end: number;
}

/** Everything a run measured and found; see the module comment. */
export interface ChaosReport {
  seed: number;
  minutes: number;
  nodes: number;
  phaseB: boolean;
  /** Whether it ran on a testbed (hosts mode) with network, clock and membership faults. */
  hosts: boolean;
  /** The testbed's tag (its namespaces are `<tag>h1`, …), on a testbed. */
  testbed: string | null;
  /**
   * Whether the run passed: no anomaly, every register decided (no search
   * out of budget), and every invariant held.
   */
  passed: boolean;
  phases: Phase[];
  ops: { write: OutcomeCounts; read: OutcomeCounts; other: OutcomeCounts };
  /** GetNodes calls that did not answer (not in the history). */
  readsWithoutAnswer: number;
  lostWrites: number;
  /** Stale reads among the anomalies (stale-reads.ts). */
  staleReads: number;
  anomalies: Anomaly[];
  /** At most one curator serving as the leader at any instant (leader-check.ts). */
  leaders: {
    /** Two curators acting as the leader at once, each with its proof. */
    anomalies: LeaderAnomaly[];
    /** Separate stretches of time (run clock, ms) with two leaders. */
    moments: Array<{ from: number; to: number }>;
    /** Observations checked: serves (with or without a term) and GetCurrentLeader claims. */
    serves: number;
    claims: number;
    /** Leaderships (curator, term) seen serving. */
    terms: number;
    /** The probe's GetNodes answers and GetClusterConsensus answers. */
    probeReads: number;
    probeConsensusAnswers: number;
  };
  /** Each register's linearizability verdict and the search steps it took. */
  linearizability: Array<{
    register: string;
    verdict: "ok" | "anomaly" | "budget-exceeded";
    steps: number;
  }>;
  /** The longest time in phase A without any acknowledged write, ms. */
  longestUnavailabilityPhaseAMs: number;
  /** The same in phase B (a majority of members down for a while), ms; null without phase B. */
  longestUnavailabilityPhaseBMs: number | null;
  /** When the last fault was healed (run clock, ms). */
  lastFaultAt: number;
  /** When every node was UP and HEALTHY again (run clock, ms), if it was within 60 s. */
  allHealthyAt: number | null;
  /** allHealthyAt − lastFaultAt, ms. */
  recoveryMs: number | null;
  /** Whether every node was UP and HEALTHY within 15 s of the last fault (the issue's goal). */
  healthyWithin15s: boolean;
  leaderChanges: LeaderChange[];
  faults: FaultRecord[];
  invariants: InvariantResult[];
  okPerSecond: number[];
  /** The PID of every node process the run started. */
  startedPids: number[];
  /** PIDs of the run's process groups still alive at its end (must be none). */
  leftoverPids: number[];
  /** The most frequent errors of operations that were not ok: message → count. */
  errors: Record<string, number>;
  /** Where the JSON, the SVG and the history (one operation per line) were written. */
  files: { json: string; svg: string; history: string };
}

/** The `limit` most frequent errors (digits and IDs blurred, so that alike ones add up). */
export function countErrors(history: readonly Operation[], limit = 12): Record<string, number> {
  const counts = new Map<string, number>();
  for (const op of history) {
    if (op.error === undefined) continue;
    const key = `${op.type}: ${op.error
      .replace(/metropolis-[0-9a-f]{32}/g, "<node>")
      .replace(/\d+/g, "N")
      .slice(0, 160)}`;
    counts.set(key, (counts.get(key) ?? 0) + 1);
  }
  return Object.fromEntries([...counts].sort((a, b) => b[1] - a[1]).slice(0, limit));
}

/** Acknowledged operations completed in each second of the run. */
export function okPerSecond(history: readonly Operation[], endMs: number): number[] {
  const buckets = new Array<number>(Math.ceil(endMs / 1000)).fill(0);
  for (const op of history) {
    const i = Math.floor(op.completedAt / 1000);
    if (op.outcome === "ok" && i >= 0 && i < buckets.length) buckets[i]++;
  }
  return buckets;
}

/** The longest time within [from, to] without an acknowledged write completing, ms. */
export function longestWriteGap(history: readonly Operation[], from: number, to: number): number {
  const acks = history
    .filter((op) => op.type === "write" && op.outcome === "ok")
    .map((op) => op.completedAt)
    .filter((t) => t >= from && t <= to)
    .sort((a, b) => a - b);
  let longest = 0;
  let last = from;
  for (const t of [...acks, to]) {
    longest = Math.max(longest, t - last);
    last = t;
  }
  return Math.round(longest);
}

/** Writes the JSON report, the SVG timeline and the history (JSON lines; maps as objects). */
export async function writeReport(
  report: ChaosReport,
  svg: string,
  history: readonly Operation[],
): Promise<void> {
  await mkdir(dirname(report.files.json), { recursive: true });
  await writeFile(report.files.json, JSON.stringify(report, null, 2) + "\n");
  await writeFile(report.files.svg, svg);
  const lines = history.map((op) =>
    JSON.stringify(op.type === "read" ? { ...op, values: Object.fromEntries(op.values) } : op),
  );
  await writeFile(report.files.history, lines.join("\n") + "\n");
}

const s = (ms: number | null) => (ms === null ? "—" : `${(ms / 1000).toFixed(1)} s`);

/** The short table printed at the end of a run. */
export function formatReport(r: ChaosReport): string {
  const row = (name: string, c: OutcomeCounts) =>
    `  ${name.padEnd(8)} ${String(c.ok).padStart(7)} ${String(c.failed).padStart(7)} ${String(c.unknown).padStart(8)}`;
  const faultKinds = new Map<string, number>();
  for (const f of r.faults) faultKinds.set(f.kind, (faultKinds.get(f.kind) ?? 0) + 1);
  return [
    `chaos run, seed ${r.seed}: ${r.minutes} min, ${r.nodes} nodes${r.hosts ? " on a testbed" : ""}, phase B ${r.phaseB ? "on" : "off"}: ${r.passed ? "PASSED" : "FAILED"}`,
    `  ops           ok  failed  unknown`,
    row("write", r.ops.write),
    row("read", r.ops.read),
    row("other", r.ops.other),
    `  most frequent errors:`,
    ...Object.entries(r.errors)
      .slice(0, 5)
      .map(([e, n]) => `    ${String(n).padStart(6)} × ${e}`),
    `  faults: ${r.faults.length} (${[...faultKinds].map(([k, n]) => `${k} ${n}`).join(", ")})`,
    `  leader changes: ${Math.max(0, r.leaderChanges.length - 1)}`,
    `  longest unavailability in phase A: ${s(r.longestUnavailabilityPhaseAMs)}` +
      (r.phaseB ? `, in phase B: ${s(r.longestUnavailabilityPhaseBMs)}` : ""),
    `  last fault → all HEALTHY: ${s(r.recoveryMs)}${r.healthyWithin15s ? "" : " (not within 15 s)"}`,
    `  lost writes: ${r.lostWrites}, anomalies: ${r.anomalies.length}, stale reads: ${r.staleReads}`,
    ...r.anomalies.slice(0, 10).map((a) => `    ${a.kind} ${a.register}: ${a.message}`),
    `  two serving leaders: ${r.leaders.moments.length} moments, ${r.leaders.anomalies.length} pairs ` +
      `(of ${r.leaders.serves} serves, ${r.leaders.claims} claims, ${r.leaders.terms} terms)`,
    ...r.leaders.anomalies.slice(0, 10).map((a) => `    ${a.rule} ×${a.count}: ${a.message}`),
    ...r.invariants.map(
      (i) => `  ${i.ok ? "ok  " : "FAIL"} ${i.name}${i.ok ? "" : `: ${i.detail}`}`,
    ),
    ...(r.leftoverPids.length > 0
      ? [`  FAIL processes left behind: ${r.leftoverPids.join(", ")}`]
      : []),
    `  report: ${r.files.json}, timeline: ${r.files.svg}`,
  ].join("\n");
}
