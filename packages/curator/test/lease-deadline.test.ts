/**
 * The leader's lease deadline on a clock the test turns: a renewal proves
 * the lease from the time it was sent (not answered), answers are matched
 * with renewals in order, a failed keepalive stream's renewals prove
 * nothing, and the margin comes off every proof.
 */
import { LeaseDeadline } from "../src/lease-deadline";

/** A monotonic clock the test sets. */
function clock(start = 1000) {
  let now = start;
  return { now: () => now, set: (t: number) => void (now = t) };
}

describe("LeaseDeadline", () => {
  it("holds from the grant's sending for the TTL less the margin, and not a moment longer", () => {
    const c = clock();
    const d = new LeaseDeadline(1000, { ttlMs: 10_000, safetyMarginMs: 2000, now: c.now });
    expect(d.validUntil).toBe(9000);
    c.set(8999);
    expect(d.valid()).toBe(true);
    c.set(9000);
    expect(d.valid()).toBe(false);
    expect(d.remainingMs()).toBe(0);
  });

  it("takes a fifth of the TTL as its margin by default", () => {
    const d = new LeaseDeadline(0, { ttlMs: 3000, now: () => 0 });
    expect(d.safetyMarginMs).toBe(600);
    expect(d.validUntil).toBe(2400);
  });

  it("moves on from the renewal's sending, however late its answer came", () => {
    const c = clock(0);
    const d = new LeaseDeadline(0, { ttlMs: 10_000, safetyMarginMs: 2000, now: c.now });
    c.set(3000);
    d.renewalSent();
    c.set(7000); // answered 4 s later
    d.renewalConfirmed(10_000);
    expect(d.validUntil).toBe(11_000); // 3000 + 10000 - 2000, not 7000 + …
  });

  it("matches answers with renewals in the order they were sent", () => {
    const c = clock(0);
    const d = new LeaseDeadline(0, { ttlMs: 10_000, safetyMarginMs: 2000, now: c.now });
    c.set(1000);
    d.renewalSent();
    c.set(4000);
    d.renewalSent();
    d.renewalConfirmed(10_000);
    expect(d.validUntil).toBe(9000); // the first renewal's proof
    d.renewalConfirmed(10_000);
    expect(d.validUntil).toBe(12_000);
  });

  it("ignores an answer that matches no renewal, and a TTL above the granted one", () => {
    const c = clock(0);
    const d = new LeaseDeadline(0, { ttlMs: 10_000, safetyMarginMs: 2000, now: c.now });
    c.set(5000);
    d.renewalConfirmed(10_000);
    expect(d.validUntil).toBe(8000);
    d.renewalSent();
    d.renewalConfirmed(60_000);
    expect(d.validUntil).toBe(13_000);
  });

  it("forgets the renewals of a keepalive stream that failed", () => {
    const c = clock(0);
    const d = new LeaseDeadline(0, { ttlMs: 10_000, safetyMarginMs: 2000, now: c.now });
    c.set(1000);
    d.renewalSent();
    d.renewalsLost();
    c.set(2000);
    d.renewalConfirmed(10_000); // an answer of the new stream, to nothing sent on it
    expect(d.validUntil).toBe(8000);
  });

  it("never moves back", () => {
    const c = clock(0);
    const d = new LeaseDeadline(0, { ttlMs: 10_000, safetyMarginMs: 2000, now: c.now });
    d.renewalSent();
    d.renewalConfirmed(1000); // etcd renewed for less than the grant (a shorter TTL)
    expect(d.validUntil).toBe(8000);
  });

  it("refuses a margin that leaves no lease", () => {
    expect(() => new LeaseDeadline(0, { ttlMs: 1000, safetyMarginMs: 1000 })).toThrow(
      "lease safety margin 1000 ms must be at least 0 and less than the TTL (1000 ms)",
    );
  });
});
