/**
 * The leadership machine on a MockContext with steps the test plays: the
 * lease deadline is a delayed transition of leading.serving (renewals keep
 * it serving; none, and it goes to steppingDown.leaseUnconfirmed, stops leading and
 * steps down before the run fails), a lost candidacy steps down, and the
 * state shows as the runnable's status. The deadline runs on the real
 * monotonic clock with a short TTL; every wait is on an event of the steps.
 */
import { performance } from "node:perf_hooks";
import { MockContext } from "@metropolis/supervisor/testing";
import { machineRunnable } from "@metropolis/supervisor/xstate";
import { leadershipMachine, type LeadershipSteps } from "../src/curator-machine";
import { CandidacyLostError, LostLeadershipError } from "../src/errors";
import { LeaseDeadline } from "../src/lease-deadline";

/** A promise with its resolvers, for the steps a test completes by hand. */
function deferred<T = void>() {
  let resolve: (v: T) => void = () => undefined;
  let reject: (e: unknown) => void = () => undefined;
  const promise = new Promise<T>((res, rej) => ((resolve = res), (reject = rej)));
  return { promise, resolve, reject };
}

/** Steps a test drives: each records itself, and follow/lead end as the test says. */
function playedSteps(deadline: LeaseDeadline) {
  const followed = deferred();
  const led = deferred();
  const leadSignal = deferred<AbortSignal>();
  const steppedDown = deferred();
  const calls: string[] = [];
  const steps: LeadershipSteps = {
    campaign: async () => (calls.push("campaign"), deadline),
    follow: async () => (calls.push("follow"), followed.promise),
    lead: (signal) => {
      calls.push("lead");
      leadSignal.resolve(signal);
      return Promise.race([
        led.promise,
        new Promise<void>((resolve) => signal.addEventListener("abort", () => resolve())),
      ]);
    },
    standBy: (signal) =>
      new Promise<void>((resolve) => {
        calls.push("standBy");
        signal.addEventListener("abort", () => resolve());
      }),
    stepDown: async () => {
      calls.push("stepDown");
      steppedDown.resolve();
    },
  };
  return { steps, calls, followed, led, leadSignal, steppedDown };
}

describe("the leadership machine", () => {
  it("stops leading when the lease deadline passes unrenewed, steps down, and fails the run", async () => {
    const deadline = new LeaseDeadline(performance.now(), { ttlMs: 400, safetyMarginMs: 100 });
    const played = playedSteps(deadline);
    const ctx = new MockContext("root.curator");
    const run = machineRunnable(leadershipMachine, { input: { steps: played.steps } })(ctx);
    played.followed.resolve();
    const leadSignal = await played.leadSignal.promise;
    expect(ctx.currentStatus).toBe("leading.serving");
    // No renewal: at the deadline the leader's serving is aborted, and it steps down.
    await new Promise<void>((resolve) => leadSignal.addEventListener("abort", () => resolve()));
    expect(deadline.valid()).toBe(false);
    await played.steppedDown.promise;
    const error = await run.then(
      () => undefined,
      (e: unknown) => e,
    );
    expect(error).toBeInstanceOf(CandidacyLostError);
    expect(String(error)).toMatch(/no renewal of the election lease confirmed for \d+ ms/);
    expect(ctx.statuses).toEqual([
      "campaigning",
      "following",
      "leading.serving",
      "steppingDown.leaseUnconfirmed",
    ]);
    expect(played.calls).toEqual(["campaign", "follow", "lead", "standBy", "stepDown"]);
    expect(ctx.healthyCalls).toBe(1);
  });

  it("keeps serving past the first deadline while renewals are confirmed", async () => {
    const deadline = new LeaseDeadline(performance.now(), { ttlMs: 300, safetyMarginMs: 60 });
    const played = playedSteps(deadline);
    const ctx = new MockContext("root.curator");
    const run = machineRunnable(leadershipMachine, { input: { steps: played.steps } })(ctx);
    played.followed.resolve();
    const leadSignal = await played.leadSignal.promise;
    const firstDeadline = deadline.validUntil;
    // Renew every 50 ms until well past the first deadline.
    await new Promise<void>((resolve) => {
      const timer = setInterval(() => {
        deadline.renewalSent();
        deadline.renewalConfirmed(300);
        if (performance.now() > firstDeadline + 300) {
          clearInterval(timer);
          resolve();
        }
      }, 50);
    });
    expect(leadSignal.aborted).toBe(false);
    expect(ctx.currentStatus).toBe("leading.serving");
    // A lost candidacy (a guarded write found the key gone) steps down too.
    played.led.reject(new LostLeadershipError());
    await played.steppedDown.promise;
    await expect(run).rejects.toBeInstanceOf(CandidacyLostError);
    expect(ctx.statuses.at(-1)).toBe("steppingDown.candidacyLost");
  });
});
