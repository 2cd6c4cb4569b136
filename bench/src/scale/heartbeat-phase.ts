/**
 * How evenly the simulated nodes' heartbeats spread over the heartbeat
 * interval. Each node beats at a fixed interval from its first answered
 * beat, so its phase (send time modulo the interval) stays where its stream
 * opened; nodes that opened their streams in the same moment beat in the
 * same moment ever after, and the leader and the node hosts then meet them
 * as bursts rather than as a steady rate — which a heartbeat's p99 would
 * show as queueing.
 */

/** The spread of heartbeats over the interval's phase. */
export interface HeartbeatPhase {
  /** Beats in the busiest phase slot, divided by the mean per slot (1: perfectly even). */
  busiestToMean: number;
  /** Share of all beats sent in the busiest tenth of the slots (0.1: even). */
  busiestTenthShare: number;
  /** Slot width, in ms. */
  slotMs: number;
}

/**
 * Buckets `sentAt` (epoch ms, one per heartbeat) by phase within
 * `intervalMs` into slots of `slotMs`.
 */
export function heartbeatPhase(
  sentAt: readonly number[],
  intervalMs: number,
  slotMs = 100,
): HeartbeatPhase {
  const slots = new Array<number>(Math.max(1, Math.floor(intervalMs / slotMs))).fill(0);
  for (const t of sentAt) slots[Math.floor((t % intervalMs) / slotMs) % slots.length]++;
  const mean = sentAt.length / slots.length;
  const sorted = [...slots].sort((a, b) => b - a);
  const tenth = sorted.slice(0, Math.max(1, Math.round(slots.length / 10)));
  return {
    busiestToMean: mean > 0 ? sorted[0] / mean : NaN,
    busiestTenthShare: sentAt.length > 0 ? tenth.reduce((s, n) => s + n, 0) / sentAt.length : NaN,
    slotMs,
  };
}
