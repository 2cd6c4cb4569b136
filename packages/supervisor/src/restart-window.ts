/**
 * `Supervisor.topRestarts()`, as recon's `proc_window`: which runnables
 * were restarted most after failures within the last `windowMs` (the tree
 * records a restart when it schedules one for a runnable that died). Per DN that ever restarted, a
 * small ring of its last restart times ({@link restartWindowCapacity}); the
 * DNs are capped ({@link maxRestartWindowDns}: past it, the least recently
 * restarted is forgotten), so memory is bounded however the tree churns.
 */
import { restartWindowCapacity, type RestartCount } from "./report-types";

/** Most DNs whose restart times are kept; the least recently restarted goes first. */
export const maxRestartWindowDns = 10_000;

class TimeRing {
  readonly times: number[] = [];
  private head = 0;
  /** The newest time. */
  last = 0;

  push(t: number): void {
    this.last = t;
    if (this.times.length < restartWindowCapacity) this.times.push(t);
    else {
      this.times[this.head] = t;
      this.head = (this.head + 1) % restartWindowCapacity;
    }
  }

  countSince(since: number): number {
    let n = 0;
    for (const t of this.times) if (t > since) n++;
    return n;
  }
}

export class RestartWindow {
  private readonly byDn = new Map<string, TimeRing>();

  constructor(private readonly maxDns: number = maxRestartWindowDns) {}

  /** `dn` was restarted at `time`. */
  record(dn: string, time: number): void {
    const ring = this.byDn.get(dn);
    if (ring) return ring.push(time);
    if (this.byDn.size >= this.maxDns) this.forgetLeastRecent();
    const fresh = new TimeRing();
    fresh.push(time);
    this.byDn.set(dn, fresh);
  }

  /** Forgets the DN whose last restart is the oldest (only when a new DN comes past the cap). */
  private forgetLeastRecent(): void {
    let oldest: string | undefined;
    let oldestTime = Infinity;
    for (const [dn, ring] of this.byDn) {
      if (ring.last < oldestTime) {
        oldestTime = ring.last;
        oldest = dn;
      }
    }
    if (oldest !== undefined) this.byDn.delete(oldest);
  }

  /** DNs with restarts in the last `windowMs` before `now`, most first (then by DN); at most `limit`. */
  top(opts: { windowMs: number; limit?: number }, now: number = Date.now()): RestartCount[] {
    const { windowMs, limit = 10 } = opts;
    if (!(windowMs > 0)) throw new RangeError(`windowMs must be > 0, got ${windowMs}`);
    if (!(Number.isInteger(limit) && limit >= 0)) {
      throw new RangeError(`limit must be an integer >= 0, got ${limit}`);
    }
    const since = now - windowMs;
    const out: RestartCount[] = [];
    for (const [dn, ring] of this.byDn) {
      const restarts = ring.countSince(since);
      if (restarts > 0) out.push({ dn, restarts });
    }
    out.sort((a, b) => b.restarts - a.restarts || (a.dn < b.dn ? -1 : a.dn > b.dn ? 1 : 0));
    return out.slice(0, limit);
  }
}
