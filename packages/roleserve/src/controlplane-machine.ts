/**
 * The control plane launcher's order as an XState v5 machine, run by the
 * supervisor's `machineRunnable` for one run of the launcher
 * (controlplane.ts), so that what the launcher is doing is on its node of
 * the supervision tree (`metroctl tree`: "state: running.learner",
 * "state: standingDown.lingering").
 *
 *   waitingForRoles ─┬─(bootstrap)──▶ startingConsensus ──▶ bootstrapping ──▶ startingCurator ──▶ running.voter
 *                    ├─(member)─────▶ startingConsensus ──────────────────────▶ startingCurator ──▶ running.learner
 *                    │                                                                                 └─(promoted)─▶ running.voter
 *                    └─(not member)─▶ standingDown.checking ─(member data)─▶ standingDown.lingering
 *                                             │                                  └─(etcd removed it)─┐
 *                                             └─(none)────────────────────────────────────────────▶ standingDown.removingData ──▶ notMember
 *
 *   running.*, standingDown.lingering, notMember: healthy; they end (and the
 *   run fails, and the supervisor starts it again) when "should run a
 *   control plane" flips (RolesChangedError), and running.* also when the
 *   member stops under the curator (ConsensusStoppedError, ConsensusRemovedError).
 *
 * The machine never goes back: a run decides once, and the way to a new
 * decision is the supervisor's restart of the run (seed 004's launcher, where
 * the restart is the retry), which cancels what the run started (etcd, the
 * curator). A step that fails fails the run the same way (no state has an
 * onError). `running.learner` and `running.voter` only show whether this
 * node's etcd member votes yet (a joining member is a learner until the
 * cluster's autopromoter promotes it); the control plane runs the same in
 * both.
 *
 * What each state does is in {@link ControlPlaneSteps}, implemented by one
 * run of the launcher, which holds what the steps produce (the startup, the
 * member, the credentials); this file is only the order.
 */
import { assign, fromPromise, setup } from "xstate";
import type { SupervisedInput } from "@metropolis/supervisor/xstate";

/**
 * What the values first decided for this run: bootstrap the cluster, run the
 * control plane of a consensus member, or none (stand down).
 */
export type ControlPlaneDecision = "bootstrap" | "member" | "notMember";

/**
 * This node's etcd member: a learner (not voting yet, or not yet known to
 * vote) or a voter.
 */
export type MemberRole = "learner" | "voter";

/**
 * What the states of the control plane machine do; implemented by one run
 * of the launcher (controlplane.ts). Every wait ends when its `signal`
 * aborts (the machine left the state, or the run ended).
 */
export interface ControlPlaneSteps {
  /**
   * Waits until the values decide the run: at once on a bootstrapping node,
   * else once the node knows its roles and has credentials.
   */
  decide(signal: AbortSignal): Promise<ControlPlaneDecision>;
  /**
   * Starts this node's member (the child "consensus") and resolves once it
   * serves; rejects with ConsensusRemovedError when etcd reports it removed
   * instead.
   */
  startConsensus(signal: AbortSignal): Promise<void>;
  /** Creates the cluster (CA, first records) and keeps the node's credentials and roles. */
  bootstrap(): Promise<void>;
  /**
   * Reseals the configuration with the CA and cluster unlock key, starts the
   * curator (the child "curator") and publishes the local control plane;
   * resolves with the role of this node's member (asked meanwhile, so that
   * the question delays nothing the node serves).
   */
  startCurator(signal: AbortSignal): Promise<MemberRole>;
  /** Resolves once this node's member votes. */
  untilVoter(signal: AbortSignal): Promise<void>;
  /** Rejects with ConsensusStoppedError or ConsensusRemovedError when the member stops. */
  untilConsensusStops(signal: AbortSignal): Promise<never>;
  /** Rejects with RolesChangedError once "should run a control plane" differs from `running`. */
  untilRolesChange(running: boolean, signal: AbortSignal): Promise<never>;
  /**
   * Withdraws the local control plane; with etcd data on disk, starts the
   * member from it (the child "consensus") and resolves true, else false.
   */
  standDown(): Promise<boolean>;
  /** Resolves once etcd reports this node's member removed from its cluster. */
  untilRemoved(signal: AbortSignal): Promise<void>;
  /** Removes the member's etcd data and the cluster unlock key from the sealed configuration. */
  removeMemberData(): Promise<void>;
}

/** The machine's input: the run's context and its steps. */
export interface ControlPlaneInput extends SupervisedInput {
  steps: ControlPlaneSteps;
}

interface ControlPlaneContext extends ControlPlaneInput {
  /** The first decision of the run, once made. */
  decision: ControlPlaneDecision | undefined;
}

type Steps = ControlPlaneSteps;

/** The control plane of one run of the launcher; see the module comment. */
export const controlPlaneMachine = setup({
  types: {
    input: {} as ControlPlaneInput,
    context: {} as ControlPlaneContext,
  },
  actors: {
    decide: fromPromise<ControlPlaneDecision, Steps>(({ input, signal }) => input.decide(signal)),
    startConsensus: fromPromise<void, Steps>(({ input, signal }) => input.startConsensus(signal)),
    bootstrap: fromPromise<void, Steps>(({ input }) => input.bootstrap()),
    startCurator: fromPromise<MemberRole, Steps>(({ input, signal }) => input.startCurator(signal)),
    untilVoter: fromPromise<void, Steps>(({ input, signal }) => input.untilVoter(signal)),
    untilConsensusStops: fromPromise<never, Steps>(({ input, signal }) =>
      input.untilConsensusStops(signal),
    ),
    untilRolesChange: fromPromise<never, { steps: Steps; running: boolean }>(({ input, signal }) =>
      input.steps.untilRolesChange(input.running, signal),
    ),
    standDown: fromPromise<boolean, Steps>(({ input }) => input.standDown()),
    untilRemoved: fromPromise<void, Steps>(({ input, signal }) => input.untilRemoved(signal)),
    removeMemberData: fromPromise<void, Steps>(({ input }) => input.removeMemberData()),
  },
  guards: {
    bootstrapping: ({ context }) => context.decision === "bootstrap",
  },
}).createMachine({
  id: "controlplane",
  context: ({ input }) => ({ ...input, decision: undefined }),
  initial: "waitingForRoles",
  states: {
    waitingForRoles: {
      invoke: {
        src: "decide",
        input: ({ context }) => context.steps,
        onDone: [
          {
            guard: ({ event }) => event.output === "notMember",
            target: "standingDown",
            actions: assign({ decision: ({ event }) => event.output }),
          },
          {
            target: "startingConsensus",
            actions: assign({ decision: ({ event }) => event.output }),
          },
        ],
      },
    },
    startingConsensus: {
      invoke: {
        src: "startConsensus",
        input: ({ context }) => context.steps,
        onDone: [
          { guard: "bootstrapping", target: "bootstrapping" },
          { target: "startingCurator" },
        ],
      },
    },
    bootstrapping: {
      invoke: {
        src: "bootstrap",
        input: ({ context }) => context.steps,
        onDone: "startingCurator",
      },
    },
    startingCurator: {
      invoke: {
        src: "startCurator",
        input: ({ context }) => context.steps,
        onDone: [
          { guard: ({ event }) => event.output === "learner", target: "running.learner" },
          { target: "running.voter" },
        ],
      },
    },
    running: {
      tags: ["healthy"],
      invoke: [
        {
          src: "untilRolesChange",
          input: ({ context }) => ({ steps: context.steps, running: true }),
        },
        { src: "untilConsensusStops", input: ({ context }) => context.steps },
      ],
      initial: "voter",
      states: {
        learner: {
          invoke: {
            src: "untilVoter",
            input: ({ context }) => context.steps,
            onDone: "voter",
          },
        },
        voter: {},
      },
    },
    standingDown: {
      initial: "checking",
      states: {
        checking: {
          invoke: {
            src: "standDown",
            input: ({ context }) => context.steps,
            onDone: [
              { guard: ({ event }) => event.output, target: "lingering" },
              { target: "removingData" },
            ],
          },
        },
        lingering: {
          tags: ["healthy"],
          invoke: [
            {
              src: "untilRolesChange",
              input: ({ context }) => ({ steps: context.steps, running: false }),
            },
            { src: "untilRemoved", input: ({ context }) => context.steps, onDone: "removingData" },
          ],
        },
        removingData: {
          invoke: {
            src: "removeMemberData",
            input: ({ context }) => context.steps,
            onDone: "#controlplane.notMember",
          },
        },
      },
    },
    notMember: {
      tags: ["healthy"],
      invoke: {
        src: "untilRolesChange",
        input: ({ context }) => ({ steps: context.steps, running: false }),
      },
    },
  },
});
