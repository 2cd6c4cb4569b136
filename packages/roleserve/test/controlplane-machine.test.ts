/**
 * The control plane machine on a MockContext with steps the test plays: the
 * order of the states (as the runnable's statuses, which `metroctl tree`
 * shows) for a bootstrap, a member that joins as a learner and becomes a
 * voter, and a node standing down (with its member's data, and without);
 * healthy only once the children are started; every run ends by failing
 * with the error of the step that ended it (the supervisor's restart is the
 * retry). No timers: each check follows the steps the test settled.
 */
import { MockContext } from "@metropolis/supervisor/testing";
import { machineRunnable } from "@metropolis/supervisor/xstate";
import {
  controlPlaneMachine,
  type ControlPlaneDecision,
  type ControlPlaneSteps,
  type MemberRole,
} from "../src/controlplane-machine";
import { ConsensusStoppedError, RolesChangedError } from "../src/errors";

/** A promise with its resolvers, for the steps a test completes by hand. */
function deferred<T = void>() {
  let resolve: (v: T) => void = () => undefined;
  let reject: (e: unknown) => void = () => undefined;
  const promise = new Promise<T>((res, rej) => ((resolve = res), (reject = rej)));
  return { promise, resolve, reject };
}

type Deferred<T = void> = ReturnType<typeof deferred<T>>;

/**
 * The status once every step the test settled has been handed to the
 * machine: a step's outcome reaches it through promise callbacks alone, so
 * they have all run by the next turn of the event loop.
 */
async function settled(ctx: MockContext): Promise<string | undefined> {
  await new Promise((resolve) => setImmediate(resolve));
  return ctx.currentStatus;
}

/** A wait the test ends: its deferred, and the signal the machine gave it. */
interface PlayedWait<T> extends Deferred<T> {
  signal: AbortSignal;
}

/**
 * Steps a test plays: each records its call and settles when the test says
 * (the waits also record their signals); `untilRolesChange` keeps one wait
 * per call, in order.
 */
function playedSteps() {
  const calls: string[] = [];
  const decided = deferred<ControlPlaneDecision>();
  const consensusStarted = deferred();
  const bootstrapped = deferred();
  const curatorStarted = deferred<MemberRole>();
  const stoodDown = deferred<boolean>();
  const dataRemoved = deferred();
  const waits: {
    untilVoter: PlayedWait<void>[];
    untilConsensusStops: PlayedWait<never>[];
    untilRolesChange: PlayedWait<never>[];
    untilRemoved: PlayedWait<void>[];
  } = { untilVoter: [], untilConsensusStops: [], untilRolesChange: [], untilRemoved: [] };
  const wait = <T>(list: PlayedWait<T>[], signal: AbortSignal): Promise<T> => {
    const played = { ...deferred<T>(), signal };
    list.push(played);
    return played.promise;
  };
  const steps: ControlPlaneSteps = {
    decide: async () => (calls.push("decide"), decided.promise),
    startConsensus: async () => (calls.push("startConsensus"), consensusStarted.promise),
    bootstrap: async () => (calls.push("bootstrap"), bootstrapped.promise),
    startCurator: async () => (calls.push("startCurator"), curatorStarted.promise),
    untilVoter: (signal) => (calls.push("untilVoter"), wait(waits.untilVoter, signal)),
    untilConsensusStops: (signal) => (
      calls.push("untilConsensusStops"),
      wait(waits.untilConsensusStops, signal)
    ),
    untilRolesChange: (running, signal) => (
      calls.push(`untilRolesChange(${running})`),
      wait(waits.untilRolesChange, signal)
    ),
    standDown: async () => (calls.push("standDown"), stoodDown.promise),
    untilRemoved: (signal) => (calls.push("untilRemoved"), wait(waits.untilRemoved, signal)),
    removeMemberData: async () => (calls.push("removeMemberData"), dataRemoved.promise),
  };
  return {
    steps,
    calls,
    decided,
    consensusStarted,
    bootstrapped,
    curatorStarted,
    stoodDown,
    dataRemoved,
    waits,
  };
}

/** The `index`th wait of a kind, once the machine has started it. */
function nth<T>(list: PlayedWait<T>[], index: number): PlayedWait<T> {
  const played = list[index];
  if (!played) throw new Error(`wait ${index} not started (${list.length} started)`);
  return played;
}

/** Starts the machine on a fresh context, as the launcher does. */
function start() {
  const played = playedSteps();
  const ctx = new MockContext("root.roleserver.controlplane");
  const run = machineRunnable(controlPlaneMachine, { input: { steps: played.steps } })(ctx);
  // Looked at by each test; a run that fails before is not reported unhandled.
  run.catch(() => undefined);
  return { played, ctx, run };
}

/** What the run ended with. */
function outcome(run: Promise<void>): Promise<unknown> {
  return run.then(
    () => "returned",
    (e: unknown) => e,
  );
}

describe("the control plane machine", () => {
  it("bootstraps: consensus, the cluster, the curator, then runs as the voter until the roles flip", async () => {
    const { played, ctx, run } = start();
    expect(await settled(ctx)).toBe("waitingForRoles");
    played.decided.resolve("bootstrap");
    expect(await settled(ctx)).toBe("startingConsensus");
    played.consensusStarted.resolve();
    expect(await settled(ctx)).toBe("bootstrapping");
    played.bootstrapped.resolve();
    expect(await settled(ctx)).toBe("startingCurator");
    expect(ctx.healthyCalls).toBe(0);
    played.curatorStarted.resolve("voter");
    expect(await settled(ctx)).toBe("running.voter");
    expect(ctx.healthyCalls).toBe(1);
    const flip = new RolesChangedError("control plane", false);
    nth(played.waits.untilRolesChange, 0).reject(flip);
    expect(await outcome(run)).toBe(flip);
    // The run's other wait ends with it.
    expect(nth(played.waits.untilConsensusStops, 0).signal.aborted).toBe(true);
    expect(ctx.statuses).toEqual([
      "waitingForRoles",
      "startingConsensus",
      "bootstrapping",
      "startingCurator",
      "running.voter",
    ]);
    expect(played.calls).toEqual([
      "decide",
      "startConsensus",
      "bootstrap",
      "startCurator",
      "untilRolesChange(true)",
      "untilConsensusStops",
    ]);
    expect(ctx.failures).toEqual([]);
  });

  it("joins as a learner, becomes a voter, and fails when its member stops", async () => {
    const { played, ctx, run } = start();
    played.decided.resolve("member");
    expect(await settled(ctx)).toBe("startingConsensus");
    played.consensusStarted.resolve();
    // A member does not bootstrap: straight to the curator.
    expect(await settled(ctx)).toBe("startingCurator");
    // Its member is a learner when the curator has started: it joined.
    played.curatorStarted.resolve("learner");
    expect(await settled(ctx)).toBe("running.learner");
    expect(ctx.healthyCalls).toBe(1);
    const rolesWait = nth(played.waits.untilRolesChange, 0);
    nth(played.waits.untilVoter, 0).resolve();
    expect(await settled(ctx)).toBe("running.voter");
    // Still the same run of the control plane: its waits go on.
    expect(rolesWait.signal.aborted).toBe(false);
    expect(played.waits.untilRolesChange).toHaveLength(1);
    const stopped = new ConsensusStoppedError();
    nth(played.waits.untilConsensusStops, 0).reject(stopped);
    expect(await outcome(run)).toBe(stopped);
    expect(ctx.statuses).toEqual([
      "waitingForRoles",
      "startingConsensus",
      "startingCurator",
      "running.learner",
      "running.voter",
    ]);
    expect(played.calls).toEqual([
      "decide",
      "startConsensus",
      "startCurator",
      "untilRolesChange(true)",
      "untilConsensusStops",
      "untilVoter",
    ]);
    expect(ctx.healthyCalls).toBe(1);
  });

  it("stands down with its member's data: lingers until etcd removed it, then removes the data", async () => {
    const { played, ctx, run } = start();
    played.decided.resolve("notMember");
    expect(await settled(ctx)).toBe("standingDown.checking");
    expect(ctx.healthyCalls).toBe(0);
    played.stoodDown.resolve(true);
    expect(await settled(ctx)).toBe("standingDown.lingering");
    // Healthy while it lingers: the member was started in checking, before.
    expect(ctx.healthyCalls).toBe(1);
    const lingeringRoles = nth(played.waits.untilRolesChange, 0);
    nth(played.waits.untilRemoved, 0).resolve();
    expect(await settled(ctx)).toBe("standingDown.removingData");
    // Following the roles ended with lingering: notMember follows them anew.
    expect(lingeringRoles.signal.aborted).toBe(true);
    played.dataRemoved.resolve();
    expect(await settled(ctx)).toBe("notMember");
    const flip = new RolesChangedError("control plane", true);
    nth(played.waits.untilRolesChange, 1).reject(flip);
    expect(await outcome(run)).toBe(flip);
    expect(ctx.statuses).toEqual([
      "waitingForRoles",
      "standingDown.checking",
      "standingDown.lingering",
      "standingDown.removingData",
      "notMember",
    ]);
    expect(played.calls).toEqual([
      "decide",
      "standDown",
      "untilRolesChange(false)",
      "untilRemoved",
      "removeMemberData",
      "untilRolesChange(false)",
    ]);
    expect(ctx.healthyCalls).toBe(1);
  });

  it("stands down without member data: removes what is left, healthy only once it did", async () => {
    const { played, ctx, run } = start();
    played.decided.resolve("notMember");
    played.stoodDown.resolve(false);
    expect(await settled(ctx)).toBe("standingDown.removingData");
    expect(ctx.healthyCalls).toBe(0);
    played.dataRemoved.resolve();
    expect(await settled(ctx)).toBe("notMember");
    expect(ctx.healthyCalls).toBe(1);
    expect(played.waits.untilRemoved).toHaveLength(0);
    // The run is cancelled: it returns, and its wait is aborted.
    ctx.abort();
    expect(await outcome(run)).toBe("returned");
    expect(nth(played.waits.untilRolesChange, 0).signal.aborted).toBe(true);
    expect(ctx.statuses).toEqual([
      "waitingForRoles",
      "standingDown.checking",
      "standingDown.removingData",
      "notMember",
    ]);
  });

  it("fails with the error of a step that fails, in any state", async () => {
    const { played, ctx, run } = start();
    played.decided.resolve("member");
    expect(await settled(ctx)).toBe("startingConsensus");
    const removed = new Error("etcd reported this member removed");
    played.consensusStarted.reject(removed);
    expect(await outcome(run)).toBe(removed);
    expect(ctx.statuses).toEqual(["waitingForRoles", "startingConsensus"]);
    expect(ctx.healthyCalls).toBe(0);
  });
});
