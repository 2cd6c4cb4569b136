/**
 * The curator's leadership as an XState v5 machine, run by the supervisor's
 * `machineRunnable` for one run of a curator (curator.ts), so that its
 * state is on the curator's node of the supervision tree (`metroctl tree`:
 * "state: leading.serving", "state: steppingDown.leaseUnconfirmed").
 *
 *   campaigning ──▶ following ──(now leads)──▶ leading.serving ──(lease deadline passed)──▶ steppingDown.leaseUnconfirmed
 *        │              │                          │   ▲ └─(deadline moved on: renewed)─┘                   │
 *        │              └──(candidacy lost)────────┴──(candidacy lost)──▶ steppingDown.candidacyLost ─────┤
 *        ▼                                                                                                 ▼
 *   (error: the run fails)                                          the run fails with CandidacyLostError
 *
 * The lease deadline (lease-deadline.ts) is a delayed transition of
 * `leading.serving`: due when the deadline is, on the monotonic clock, and
 * re-armed when renewals moved the deadline on in the meantime. Past it the
 * leader serves nothing as the leader (calls check the deadline themselves
 * as well: `Leadership.assertServing`, the listener's `admit`), stops
 * naming itself leader, and steps down. The way back to leading is a new
 * campaign, and that is the supervisor's restart of the run (as in
 * Monogon's curator): leaving the machine with an error is how a run ends
 * its candidacy, and every resource of the run is released by the run.
 *
 * What each state does is in {@link LeadershipSteps}, implemented by the
 * curator; this file is only the order.
 */
import { assign, fromPromise, setup } from "xstate";
import type { SupervisedInput } from "@metropolis/supervisor/xstate";
import { CandidacyLostError } from "./errors";
import type { LeaseDeadline } from "./lease-deadline";

/**
 * What the states of the leadership machine do; implemented by one run of a
 * Curator, which holds the candidacy: the machine needs only its lease deadline.
 */
export interface LeadershipSteps {
  /** Enters the election; resolves with the new candidacy's lease deadline. */
  campaign(): Promise<LeaseDeadline>;
  /**
   * Follows until the candidacy leads (resolves) or is lost (rejects with
   * CandidacyLostError); serves CuratorLocal meanwhile. Ends when `signal` aborts.
   */
  follow(signal: AbortSignal): Promise<void>;
  /**
   * Serves the cluster's APIs as the leader until `signal` aborts (resolves)
   * or the candidacy is lost (rejects with CandidacyLostError).
   */
  lead(signal: AbortSignal): Promise<void>;
  /**
   * Serves CuratorLocal only, answering every leader-only call "not the
   * leader", until `signal` aborts: what a curator stepping down answers.
   */
  standBy(signal: AbortSignal): Promise<void>;
  /** No longer names itself leader, and gives the candidacy up (bounded in time). */
  stepDown(): Promise<void>;
}

/** The machine's input: the run's context and its steps. */
export interface LeadershipInput extends SupervisedInput {
  steps: LeadershipSteps;
}

interface LeadershipContext extends LeadershipInput {
  /** The candidacy's lease deadline, once it campaigned. */
  deadline: LeaseDeadline | undefined;
  /** Why the candidacy ended, once it did. */
  lost: Error | undefined;
}

/** The error the run fails with when its candidacy ended as `role`, for `why`. */
function candidacyLost(role: "leader" | "follower", why: unknown): Error {
  if (why instanceof CandidacyLostError) return why;
  return new CandidacyLostError(role, why instanceof Error ? why : new Error(String(why)));
}

/** The lease deadline of a state that has one (every state after campaigning). */
function deadlineOf(context: LeadershipContext): LeaseDeadline {
  if (!context.deadline) {
    throw new Error("leadership machine: no candidacy in a state that needs one");
  }
  return context.deadline;
}

/** The leadership of one curator run; see the module comment. */
export const leadershipMachine = setup({
  types: {
    input: {} as LeadershipInput,
    context: {} as LeadershipContext,
  },
  actors: {
    campaign: fromPromise<LeaseDeadline, LeadershipSteps>(({ input }) => input.campaign()),
    follow: fromPromise<void, LeadershipSteps>(({ input, signal }) => input.follow(signal)),
    lead: fromPromise<void, LeadershipSteps>(({ input, signal }) => input.lead(signal)),
    standBy: fromPromise<void, LeadershipSteps>(({ input, signal }) => input.standBy(signal)),
    // Fails with why the candidacy ended once it is given up: the run ends with that.
    stepDown: fromPromise<never, { steps: LeadershipSteps; why: Error }>(async ({ input }) => {
      await input.steps.stepDown();
      throw input.why;
    }),
  },
  delays: {
    /** Until the lease deadline, as it is now. */
    leaseDeadline: ({ context }) => Math.max(0, Math.ceil(deadlineOf(context).remainingMs())),
  },
  guards: {
    leaseHeld: ({ context }) => deadlineOf(context).valid(),
  },
  actions: {
    leaseUnconfirmed: assign({
      lost: ({ context }) => {
        const deadline = deadlineOf(context);
        return candidacyLost(
          "leader",
          new Error(
            `no renewal of the election lease confirmed for ${Math.round(deadline.sinceProvenMs())} ms (TTL ${deadline.ttlMs / 1000} s, less a ${deadline.safetyMarginMs} ms margin)`,
          ),
        );
      },
    }),
  },
}).createMachine({
  id: "curator",
  context: ({ input }) => ({ ...input, deadline: undefined, lost: undefined }),
  initial: "campaigning",
  states: {
    campaigning: {
      invoke: {
        src: "campaign",
        input: ({ context }) => context.steps,
        onDone: {
          target: "following",
          actions: assign({ deadline: ({ event }) => event.output }),
        },
        // No onError: a campaign that fails fails the run, and the restart campaigns again.
      },
    },
    following: {
      tags: ["healthy"],
      invoke: {
        src: "follow",
        input: ({ context }) => context.steps,
        onDone: "leading",
        onError: {
          target: "steppingDown",
          actions: assign({ lost: ({ event }) => candidacyLost("follower", event.error) }),
        },
      },
    },
    leading: {
      tags: ["healthy"],
      initial: "serving",
      invoke: {
        src: "lead",
        input: ({ context }) => context.steps,
        onDone: {
          target: "steppingDown",
          actions: assign({ lost: () => new Error("stopped serving as the leader") }),
        },
        onError: {
          target: "steppingDown",
          actions: assign({ lost: ({ event }) => candidacyLost("leader", event.error) }),
        },
      },
      states: {
        serving: {
          after: {
            leaseDeadline: [
              // Renewed in the meantime: wait for the new deadline.
              { guard: "leaseHeld", target: "serving", reenter: true },
              { target: "#curator.steppingDown.leaseUnconfirmed", actions: "leaseUnconfirmed" },
            ],
          },
        },
      },
    },
    steppingDown: {
      // Answers "not the leader" while it resigns; the resignation fails the run with `lost`.
      invoke: [
        { src: "standBy", input: ({ context }) => context.steps },
        {
          src: "stepDown",
          input: ({ context }) => ({
            steps: context.steps,
            why: context.lost ?? new Error("stepping down"),
          }),
        },
      ],
      initial: "candidacyLost",
      states: {
        candidacyLost: {},
        leaseUnconfirmed: {},
      },
    },
  },
});
