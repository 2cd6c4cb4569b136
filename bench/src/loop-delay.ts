/**
 * How late a process's event loop ran over a window: what a request waiting
 * in that process waits before its turn. The scale simulator records it in
 * the leader and in every node host over the same window as the heartbeat
 * latencies, so that a heartbeat's p99 (measured in the hosts) can be split
 * into the hosts' own pauses (their GC above all) and the leader's; and in
 * every node host through the first failover, how far behind the nodes'
 * own reaction to the kill put them.
 */
import { monitorEventLoopDelay, type IntervalHistogram } from "node:perf_hooks";

/** A window's event loop delay, in milliseconds. */
export interface LoopDelay {
  p50Ms: number;
  p99Ms: number;
  maxMs: number;
}

/** Records the loop's delay between {@link start} and {@link stop}. */
export class LoopDelayRecorder {
  private histogram: IntervalHistogram | undefined;

  /** Starts a window (dropping one under way). */
  start(): void {
    this.histogram?.disable();
    // Sampled every 10 ms: fine enough for the pauses of interest (tens of
    // ms), and at no cost worth counting.
    this.histogram = monitorEventLoopDelay({ resolution: 10 });
    this.histogram.enable();
  }

  /** Ends the window; undefined if none was started. */
  stop(): LoopDelay | undefined {
    const h = this.histogram;
    if (!h) return undefined;
    h.disable();
    this.histogram = undefined;
    return { p50Ms: h.percentile(50) / 1e6, p99Ms: h.percentile(99) / 1e6, maxMs: h.max / 1e6 };
  }
}

/** The window of `delays` with the highest p99 (the worst process's), if any. */
export function worstLoopDelay(delays: readonly LoopDelay[]): LoopDelay | undefined {
  return delays.reduce<LoopDelay | undefined>(
    (worst, d) => (worst && worst.p99Ms >= d.p99Ms ? worst : d),
    undefined,
  );
}
