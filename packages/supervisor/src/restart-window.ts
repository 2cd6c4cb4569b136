/**
 * `Supervisor.topRestarts()`, as recon's `proc_window`: which runnables
 * restarted most within the last `windowMs`. Per DN that ever restarted, a
 * small ring of its last restart times ({@link restartWindowCapacity}); the
 * DNs are kept least recently restarted first and capped
 * ({@link maxRestartWindowDns}), so memory is bounded however the tree churns.
 */
import { restartWindowCapacity, type RestartCount } from "./report-types";

/** Most DNs whose restart times are kept; the least recently restarted goes first. */
export const maxRestartWindowDns = 10_000;

class TimeRing {
  readonly times: number[] = [];
  private head = 0;

  push(t: number): void {
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
    let ring = this.byDn.get(dn);
    if (ring)
      this.byDn.delete(dn); // re-inserted last: the map stays in restart order
    else ring = new TimeRing();
    ring.push(time);
    this.byDn.set(dn, ring);
    if (this.byDn.size > this.maxDns) {
      const oldest = this.byDn.keys().next().value;
      if (oldest !== undefined) this.byDn.delete(oldest);
    }
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
