/**
 * The leader's own deadline: until when its election lease is provably held,
 * on this process's monotonic clock, so that it stops serving as the leader
 * before etcd can let another curator lead.
 *
 * etcd renews a lease when its raft leader receives the renewal, and lets
 * it expire TTL seconds after the last one received: never before
 * `sent + TTL` of a renewal it answered, on etcd's clock. So a renewal sent
 * at `s` (this process's monotonic time) and confirmed by etcd proves the
 * lease is held until `s + TTL` — less a safety margin for what the proof
 * does not cover:
 *
 *   - clock rate: this clock and etcd's may run at slightly different speeds
 *     (parts per million; nothing to matter within seconds);
 *   - a stale etcd raft leader: etcd 3.4 (Debian's 3.4.23) lets a raft leader
 *     cut off from its peers go on renewing leases until check-quorum makes
 *     it step down, up to about two election timeouts after the cut, while
 *     the majority may have elected a new raft leader (whose lessor restarts
 *     every lease's TTL when it takes over) one election timeout after it;
 *     a renewal answered by the stale leader may then be up to about one
 *     election timeout younger than the new leader's view of the lease;
 *   - scheduling: the timer that ends the leadership runs late when the
 *     event loop is busy (every call checks {@link LeaseDeadline.valid}
 *     itself, so a late timer only delays the ending of open streams).
 *
 *   grant sent ──▶ valid until sent + TTL − margin
 *   renewal sent (s) … confirmed ──▶ valid until max(previous, s + TTL − margin)
 *   no confirmation ──▶ at the deadline: not the leader any more
 *
 * The default margin is a fifth of the TTL (2 s of the default 10 s, 0.6 s of
 * local clusters' 3 s): more than etcd's default election timeout of 1 s
 * (100 ms with the local clusters' timings). The wall clock is never read: a
 * jump of the system time neither extends nor shortens a lease.
 *
 * Renewals are matched with their answers in order (etcd answers a
 * keepalive stream's requests in the order they were sent); a keepalive
 * stream that fails forgets its unanswered renewals, since their answers
 * will not come.
 */
import { performance } from "node:perf_hooks";

/** A monotonic clock in milliseconds: `performance.now()` unless a test gives its own. */
export type MonotonicClock = () => number;

/** The safety margin of a lease of `ttlMs`: a fifth of it (see the module comment). */
export function defaultLeaseSafetyMarginMs(ttlMs: number): number {
  return ttlMs / 5;
}

/** Options of a {@link LeaseDeadline}. */
export interface LeaseDeadlineOptions {
  /** The lease's TTL as granted. */
  ttlMs: number;
  /**
   * Subtracted from every proven expiry (see the module comment).
   * @default a fifth of `ttlMs` ({@link defaultLeaseSafetyMarginMs})
   */
  safetyMarginMs?: number;
  /**
   * The monotonic clock.
   * @default performance.now
   */
  now?: MonotonicClock;
}

/** Until when a lease is provably held; see the module comment. */
export class LeaseDeadline {
  readonly ttlMs: number;
  readonly safetyMarginMs: number;
  private readonly now: MonotonicClock;
  #validUntil: number;
  /** Send times of the renewals not answered yet, oldest first. */
  private readonly unanswered: number[] = [];

  /**
   * @param grantSentAt when the grant request of the lease was sent, on
   *   `options.now`'s clock: the lease is held at least until then + TTL.
   */
  constructor(grantSentAt: number, options: LeaseDeadlineOptions) {
    this.ttlMs = options.ttlMs;
    this.safetyMarginMs = options.safetyMarginMs ?? defaultLeaseSafetyMarginMs(options.ttlMs);
    if (!(this.safetyMarginMs >= 0 && this.safetyMarginMs < this.ttlMs)) {
      throw new RangeError(
        `lease safety margin ${this.safetyMarginMs} ms must be at least 0 and less than the TTL (${this.ttlMs} ms)`,
      );
    }
    this.now = options.now ?? (() => performance.now());
    this.#validUntil = grantSentAt + this.ttlMs - this.safetyMarginMs;
  }

  /** A renewal is being sent now. */
  renewalSent(): void {
    this.unanswered.push(this.now());
  }

  /**
   * etcd answered the oldest unanswered renewal and renewed the lease for
   * `ttlMs` (its answer's TTL). An answer that matches no renewal sent
   * proves nothing and is ignored.
   */
  renewalConfirmed(ttlMs: number = this.ttlMs): void {
    const sentAt = this.unanswered.shift();
    if (sentAt === undefined) return;
    const until = sentAt + Math.min(ttlMs, this.ttlMs) - this.safetyMarginMs;
    if (until > this.#validUntil) this.#validUntil = until;
  }

  /** The renewals sent will not be answered (their stream failed). */
  renewalsLost(): void {
    this.unanswered.length = 0;
  }

  /** Monotonic time until which the lease is provably held. */
  get validUntil(): number {
    return this.#validUntil;
  }

  /** Whether the lease is provably held now. */
  valid(): boolean {
    return this.now() < this.#validUntil;
  }

  /** Milliseconds left until the deadline (negative once past). */
  remainingMs(): number {
    return this.#validUntil - this.now();
  }

  /** Milliseconds since the last renewal proven (or the grant), i.e. the TTL less the time left. */
  sinceProvenMs(): number {
    return this.ttlMs - this.safetyMarginMs - this.remainingMs();
  }
}
