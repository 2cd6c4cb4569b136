/**
 * Exponential backoff with jitter, as Monogon's supervisor uses (cenkalti's
 * ExponentialBackOff with MaxElapsedTime 0: it never gives up).
 */
import type { BackoffOptions } from "./types";

/** Backoff defaults: 500 ms initial, ×1.5, ±50% jitter, 60 s cap. */
export const defaultBackoff: Readonly<Required<BackoffOptions>> = Object.freeze({
  initialMs: 500,
  multiplier: 1.5,
  jitter: 0.5,
  maxMs: 60_000,
});

/**
 * Fills in defaults (`base`, by default {@link defaultBackoff}) and rejects
 * nonsense with a RangeError, so a bad option fails at `run()` and not at the
 * first restart.
 */
export function resolveBackoff(
  opts: BackoffOptions | undefined,
  base: Readonly<Required<BackoffOptions>> = defaultBackoff,
): Readonly<Required<BackoffOptions>> {
  if (!opts) return base;
  const r = { ...base, ...opts };
  const bad = (what: string) => new RangeError(`invalid backoff: ${what}`);
  if (!(r.initialMs >= 0)) throw bad(`initialMs must be >= 0, got ${r.initialMs}`);
  if (!(r.multiplier >= 1)) throw bad(`multiplier must be >= 1, got ${r.multiplier}`);
  if (!(r.jitter >= 0 && r.jitter <= 1)) throw bad(`jitter must be in [0, 1], got ${r.jitter}`);
  if (!(r.maxMs >= r.initialMs)) throw bad(`maxMs must be >= initialMs, got ${r.maxMs}`);
  return Object.freeze(r);
}

/**
 * The backoff state of one runnable (or of anything else that retries, such
 * as a client looking for its server): delays that grow by `multiplier` up to
 * `maxMs`, each spread by ±`jitter`, so that many clients failing together do
 * not retry together.
 *
 *   const backoff = new Backoff(resolveBackoff({ initialMs: 50, multiplier: 2, maxMs: 1000 }));
 *   await abortableSleep(backoff.next(), signal);
 */
export class Backoff {
  private interval: number;
  /** Delays handed out since the last reset: the attempt the next restart is. */
  attempts = 0;

  constructor(
    private readonly opts: Readonly<Required<BackoffOptions>>,
    private readonly random: () => number = Math.random,
  ) {
    this.interval = opts.initialMs;
  }

  /** The delay before the next restart; grows the interval for the one after. */
  next(): number {
    const { jitter, multiplier, maxMs } = this.opts;
    this.attempts++;
    const delay = this.interval * (1 + jitter * (2 * this.random() - 1));
    this.interval = Math.min(this.interval * multiplier, maxMs);
    return Math.max(0, Math.round(delay));
  }

  /** Back to the initial delay: the runnable proved itself healthy. */
  reset(): void {
    this.interval = this.opts.initialMs;
    this.attempts = 0;
  }
}
