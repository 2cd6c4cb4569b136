/**
 * How late a process's event loop ran over a window: what a request waiting
 * in that process waits before its turn. The scale simulator records it in
 * the leader and in every node host over the same window as the heartbeat
 * latencies, so that a heartbeat's p99 (measured in the hosts) can be split
 * into the hosts' own pauses (their GC above all) and the leader's; and in
 * every node host through the first failover, how far behind the nodes'
 * own reaction to the kill put them.
 */
import {
  constants,
  monitorEventLoopDelay,
  performance,
  PerformanceObserver,
  type IntervalHistogram,
  type PerformanceEntry,
} from "node:perf_hooks";
import type { Row } from "./report";

/**
 * A window's event loop delay, in milliseconds, and the garbage collector's
 * pauses in it: which part of a stall was the collector's.
 */
export interface LoopDelay {
  p50Ms: number;
  p99Ms: number;
  maxMs: number;
  /** The window's length. */
  windowMs: number;
  gc: GcPauses;
  /** The process's memory at the window's end: what the collector had to walk. */
  memory: NodeJS.MemoryUsage;
}

/** The collector's pauses in a window (V8's, as perf_hooks reports them). */
export interface GcPauses {
  /** Pauses of the whole heap's collection (mark-compact). */
  major: PauseTally;
  /** Pauses of the young generation's (scavenges). */
  minor: PauseTally;
  /** Steps of incremental marking, and weak callbacks. */
  other: PauseTally;
}

export interface PauseTally {
  count: number;
  totalMs: number;
  maxMs: number;
}

/** Tallies the collector's pauses while observing. */
class GcRecorder {
  readonly pauses: GcPauses = { major: tally(), minor: tally(), other: tally() };
  private readonly observer = new PerformanceObserver((list) => this.add(list.getEntries()));

  constructor() {
    this.observer.observe({ entryTypes: ["gc"] });
  }

  stop(): GcPauses {
    // Entries are handed to the callback in batches, later: take those not handed yet.
    this.add(this.observer.takeRecords());
    this.observer.disconnect();
    return this.pauses;
  }

  private add(entries: readonly PerformanceEntry[]): void {
    for (const entry of entries) {
      // A gc entry's detail (its kind) is not in @types/node's PerformanceEntry.
      const json: { detail?: { kind?: number } } = entry.toJSON();
      const kind = json.detail?.kind;
      const t =
        kind === constants.NODE_PERFORMANCE_GC_MAJOR
          ? this.pauses.major
          : kind === constants.NODE_PERFORMANCE_GC_MINOR
            ? this.pauses.minor
            : this.pauses.other;
      t.count++;
      t.totalMs += entry.duration;
      t.maxMs = Math.max(t.maxMs, entry.duration);
    }
  }
}

function tally(): PauseTally {
  return { count: 0, totalMs: 0, maxMs: 0 };
}

/** Records the loop's delay between {@link start} and {@link stop}. */
export class LoopDelayRecorder {
  private histogram: IntervalHistogram | undefined;
  private gc: GcRecorder | undefined;
  private startedAt = 0;

  /** Starts a window (dropping one under way). */
  start(): void {
    this.histogram?.disable();
    this.gc?.stop();
    this.gc = new GcRecorder();
    this.startedAt = performance.now();
    // Sampled every 10 ms: fine enough for the pauses of interest (tens of
    // ms), and at no cost worth counting.
    this.histogram = monitorEventLoopDelay({ resolution: 10 });
    this.histogram.enable();
  }

  /** Ends the window; undefined if none was started. */
  stop(): LoopDelay | undefined {
    const h = this.histogram;
    const gc = this.gc;
    if (!h || !gc) return undefined;
    h.disable();
    this.histogram = undefined;
    this.gc = undefined;
    return {
      p50Ms: h.percentile(50) / 1e6,
      p99Ms: h.percentile(99) / 1e6,
      maxMs: h.max / 1e6,
      windowMs: performance.now() - this.startedAt,
      gc: gc.stop(),
      memory: process.memoryUsage(),
    };
  }
}

/** The window of `delays` with the highest p99 (the worst process's), if any. */
export function worstLoopDelay(delays: readonly LoopDelay[]): LoopDelay | undefined {
  return delays.reduce<LoopDelay | undefined>(
    (worst, d) => (worst && worst.p99Ms >= d.p99Ms ? worst : d),
    undefined,
  );
}

/**
 * Rows of a report on the collector's pauses in `delay`'s window: the
 * longest pause of each kind, how many whole-heap collections ran, the heap
 * they walked, and the time paused per second of window.
 */
export function gcRows(who: string, delay: LoopDelay | undefined): Row[] {
  const gc = delay?.gc;
  const all = gc ? gc.major.totalMs + gc.minor.totalMs + gc.other.totalMs : NaN;
  return [
    { measure: `${who} longest GC pause, whole heap`, value: gc?.major.maxMs ?? NaN, unit: "ms" },
    {
      measure: `${who} longest GC pause, young generation`,
      value: gc?.minor.maxMs ?? NaN,
      unit: "ms",
    },
    { measure: `${who} longest GC pause, other steps`, value: gc?.other.maxMs ?? NaN, unit: "ms" },
    { measure: `${who} whole-heap collections`, value: gc?.major.count ?? NaN, unit: "" },
    {
      measure: `${who} V8 heap in use`,
      value: delay ? delay.memory.heapUsed / 2 ** 20 : NaN,
      unit: "MiB",
    },
    {
      measure: `${who} memory outside V8's heap (native: TLS, buffers, code)`,
      value: delay ? (delay.memory.rss - delay.memory.heapTotal) / 2 ** 20 : NaN,
      unit: "MiB",
    },
    {
      measure: `${who} time in GC pauses`,
      value: delay ? (all * 1000) / delay.windowMs : NaN,
      unit: "ms/s",
    },
  ];
}
