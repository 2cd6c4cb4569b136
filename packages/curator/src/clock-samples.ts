/**
 * Samples of the nodes' wall clocks against the leader's, from heartbeats,
 * for the health check of clocks (cluster-health.ts) and nothing else.
 *
 * A heartbeat carries the node's wall clock at send (`sent_at`) and the
 * round trip of its previous heartbeat, measured on the node's monotonic
 * clock. The node's clock at the leader's receipt is then about
 * `sent_at + round trip / 2`; its offset from the leader's is that minus the
 * leader's wall clock at receipt, give or take half the round trip.
 *
 * Wall clocks jump (an operator, NTP stepping, the e2e clock-jump test's
 * libfaketime): that is what this measures, so it must never feed a
 * decision that needs time to pass evenly. The heartbeat tracker's health,
 * the leadership lease and every deadline of the control plane stay on the
 * monotonic clock; this class only reads the wall clock to compare it, and
 * is read only by the health check.
 */
import { performance } from "node:perf_hooks";

/** One node's clock as the latest heartbeat showed it. */
export interface ClockSample {
  /** The node's wall clock minus the leader's, in milliseconds (positive: the node is ahead). */
  offsetMs: number;
  /**
   * How far off `offsetMs` may be: half the round trip it was corrected by;
   * undefined for a first heartbeat, whose round trip is not known yet.
   */
  uncertaintyMs: number | undefined;
  /** When the leader received it, on its monotonic clock (ms), to age it. */
  receivedAt: number;
}

/** The longest round trip a sample is corrected by: beyond it, the node's figure is nonsense. */
const maxRoundTripMs = 60_000;

/** Whole milliseconds of the monotonic clock. */
const monotonicMs = (): number => Math.floor(performance.now());

/** The latest clock sample of each node; see the module comment. */
export class ClockSamples {
  private readonly samples = new Map<string, ClockSample>();

  constructor(
    /** The leader's wall clock, ms since the epoch; a test passes its own. */
    private readonly wallClock: () => number = Date.now,
    /** A monotonic clock in ms, to age samples. */
    private readonly monotonic: () => number = monotonicMs,
  ) {}

  /**
   * Records a heartbeat of `nodeId` sent at `sentAt` (its wall clock; a
   * heartbeat without one records nothing) after a previous round trip of
   * `previousRoundTripMs` (0: unknown).
   */
  record(nodeId: string, sentAt: Date | undefined, previousRoundTripMs: number): void {
    if (sentAt === undefined || !Number.isFinite(sentAt.getTime())) return;
    const receivedWall = this.wallClock();
    const known = previousRoundTripMs > 0 && previousRoundTripMs <= maxRoundTripMs;
    const half = known ? previousRoundTripMs / 2 : 0;
    this.samples.set(nodeId, {
      offsetMs: Math.round(sentAt.getTime() + half - receivedWall),
      uncertaintyMs: known ? Math.ceil(half) : undefined,
      receivedAt: this.monotonic(),
    });
  }

  /** The latest sample of `nodeId`, if any. */
  sample(nodeId: string): ClockSample | undefined {
    return this.samples.get(nodeId);
  }

  /** Milliseconds since `sample` was received (monotonic). */
  age(sample: ClockSample): number {
    return this.monotonic() - sample.receivedAt;
  }

  /** Forgets a deleted node. */
  forget(nodeId: string): void {
    this.samples.delete(nodeId);
  }
}
