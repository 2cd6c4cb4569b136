/**
 * TEMPORARY STAND-IN for the real checker (checker.ts, timeline-svg.ts,
 * written on another branch): the same names and shapes the run codes
 * against, with only crude checks, so that the run builds and can be tried
 * before the checker is merged. When merging, import `checkHistory` from
 * "./checker" and `renderTimeline` from "./timeline-svg" instead, and delete
 * this file.
 *
 * The one check: a lost write — an acknowledged write whose value is not in
 * the final read although no other write to its register was invoked after
 * it was invoked. Plus: a value read that no write wrote ("unknown-value").
 */
import type { Anomaly, FinalRead, Operation, WriteOperation } from "./history";

/** What the checker reports (the real one has more counts). */
export interface CheckReport {
  anomalies: Anomaly[];
  counts: Record<string, number>;
}

/** Crude checks of a history; see the module comment. */
export function checkHistory(
  history: readonly Operation[],
  final: FinalRead,
  _opts?: unknown,
): CheckReport {
  const anomalies: Anomaly[] = [];
  const writes = history.filter((op): op is WriteOperation => op.type === "write");
  const byRegister = new Map<string, WriteOperation[]>();
  for (const w of writes) byRegister.set(w.register, [...(byRegister.get(w.register) ?? []), w]);
  for (const w of writes) {
    if (w.outcome !== "ok") continue;
    // Another write may have taken effect after `w` unless it completed before `w` began.
    const later = (byRegister.get(w.register) ?? []).some(
      (o) =>
        o !== w &&
        o.outcome !== "failed" &&
        (o.outcome === "unknown" || o.completedAt > w.invokedAt),
    );
    if (!later && final.values.get(w.register) !== w.value) {
      anomalies.push({
        kind: "lost-write",
        register: w.register,
        message: `write ${w.id} of ${w.value} was acknowledged and nothing was written after it, but the final read is ${final.values.get(w.register) ?? "absent"}`,
        operations: [w.id],
      });
    }
  }
  const written = new Set(writes.filter((w) => w.outcome !== "failed").map((w) => w.value));
  for (const op of history) {
    if (op.type !== "read" || op.outcome !== "ok") continue;
    for (const [register, value] of op.values) {
      if (value !== null && value.startsWith("c") && !written.has(value)) {
        anomalies.push({
          kind: "unknown-value",
          register,
          message: `read ${op.id} saw ${value}, which no write that may have happened wrote`,
          operations: [op.id],
        });
      }
    }
  }
  return {
    anomalies,
    counts: {
      writes: writes.length,
      lostWrites: anomalies.filter((a) => a.kind === "lost-write").length,
    },
  };
}

/** What the timeline shows. */
export interface TimelineInput {
  faults: { kind: string; node: string; start: number; end: number }[];
  okPerSecond: number[];
  leaderChanges: { at: number; leader: string }[];
  phases: { name: string; start: number; end: number }[];
  lastFaultAt: number;
  allHealthyAt: number;
}

/** A bare SVG: ok ops per second as bars, faults as lines (the real one is richer). */
export function renderTimeline(input: TimelineInput): string {
  const w = Math.max(input.okPerSecond.length, 1) * 4;
  const max = Math.max(1, ...input.okPerSecond);
  const bars = input.okPerSecond
    .map(
      (n, i) =>
        `<rect x="${i * 4}" y="${100 - (n / max) * 100}" width="3" height="${(n / max) * 100}"/>`,
    )
    .join("");
  const faults = input.faults
    .map(
      (f, i) =>
        `<line x1="${(f.start / 1000) * 4}" x2="${(f.end / 1000) * 4}" y1="${110 + (i % 10) * 3}" y2="${110 + (i % 10) * 3}" stroke="red"/>`,
    )
    .join("");
  return `<svg xmlns="http://www.w3.org/2000/svg" width="${w}" height="145">${bars}${faults}</svg>\n`;
}
