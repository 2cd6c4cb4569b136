/**
 * The curator's leadership as an XState v5 machine, run by the supervisor's
 * `machineRunnable` for one run of a curator (curator.ts), so that its
 * state is on the curator's node of the supervision tree (`metroctl tree`:
 * "state: leading.serving", "state: leaseUnconfirmed").
 *
 *   campaigning ──▶ following ──(now leads)──▶ leading.serving ──(lease deadline passed)──▶ leaseUnconfirmed
 *        │              │                          │   ▲ └─(deadline moved on: renewed)─┘          │
 *        │              └──(candidacy lost)──┐      └──(candidacy lost)──┐                          │
 *        ▼                                   ▼                           ▼                          ▼
 *   (error: the run fails)             steppingDown ──────────────────────────────────▶ the run fails with CandidacyLostError
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
import type { Candidacy } from "./leadership";

/** What the states of the leadership machine do; implemented by one run of a Curator. */
export interface LeadershipSteps {
  /** Enters the election. */
  campaign(): Promise<Candidacy>;
  /**
   * Follows until `candidacy` leads (resolves) or is lost (rejects with
   * CandidacyLostError); serves CuratorLocal meanwhile. Ends when `signal` aborts.
   */
  follow(candidacy: Candidacy, signal: AbortSignal): Promise<void>;
  /**
   * Serves the cluster's APIs as the leader until `signal` aborts (resolves)
   * or the candidacy is lost (rejects with CandidacyLostError).
   */
  lead(candidacy: Candidacy, signal: AbortSignal): Promise<void>;
  /**
   * Serves CuratorLocal only, answering every leader-only call "not the
   * leader", until `signal` aborts: what a curator stepping down answers.
   */
  standBy(signal: AbortSignal): Promise<void>;
  /** No longer names itself leader, and gives `candidacy` up (bounded in time). */
  stepDown(candidacy: Candidacy): Promise<void>;
}

/** The machine's input: the run's context and its steps. */
export interface LeadershipInput extends SupervisedInput {
  steps: LeadershipSteps;
}

interface LeadershipContext extends LeadershipInput {
  candidacy: Candidacy | undefined;
  /** Why the candidacy ended, once it did. */
  lost: Error | undefined;
}

/** The error the run fails with when its candidacy ended as `role`, for `why`. */
function candidacyLost(role: "leader" | "follower", why: unknown): Error {
  if (why instanceof CandidacyLostError) return why;
  return new CandidacyLostError(role, why instanceof Error ? why : new Error(String(why)));
}

/** The candidacy of a state that has one (every state after campaigning). */
function held(context: LeadershipContext): Candidacy {
  if (!context.candidacy)
    throw new Error("leadership machine: no candidacy in a state that needs one");
  return context.candidacy;
}

/** The leadership of one curator run; see the module comment. */
export const leadershipMachine = setup({
  types: {
    input: {} as LeadershipInput,
    context: {} as LeadershipContext,
  },
  actors: {
    campaign: fromPromise<Candidacy, LeadershipSteps>(({ input }) => input.campaign()),
    follow: fromPromise<void, { steps: LeadershipSteps; candidacy: Candidacy }>(
      ({ input, signal }) => input.steps.follow(input.candidacy, signal),
    ),
    lead: fromPromise<void, { steps: LeadershipSteps; candidacy: Candidacy }>(({ input, signal }) =>
      input.steps.lead(input.candidacy, signal),
    ),
    standBy: fromPromise<void, LeadershipSteps>(({ input, signal }) => input.standBy(signal)),
    // Fails with why the candidacy ended once it is given up: the run ends with that.
    stepDown: fromPromise<never, { steps: LeadershipSteps; candidacy: Candidacy; why: Error }>(
      async ({ input }) => {
        await input.steps.stepDown(input.candidacy);
        throw input.why;
      },
    ),
  },
  delays: {
    /** Until the lease deadline, as it is now. */
    leaseDeadline: ({ context }) => Math.max(0, Math.ceil(held(context).deadline.remainingMs())),
  },
  guards: {
    leaseHeld: ({ context }) => held(context).deadline.valid(),
  },
}).createMachine({
  id: "curator",
  context: ({ input }) => ({ ...input, candidacy: undefined, lost: undefined }),
  initial: "campaigning",
  states: {
    campaigning: {
      invoke: {
        src: "campaign",
        input: ({ context }) => context.steps,
        onDone: {
          target: "following",
          actions: assign({ candidacy: ({ event }) => event.output }),
        },
        // No onError: a campaign that fails fails the run, and the restart campaigns again.
      },
    },
    following: {
      tags: ["healthy"],
      invoke: {
        src: "follow",
        input: ({ context }) => ({ steps: context.steps, candidacy: held(context) }),
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
        input: ({ context }) => ({ steps: context.steps, candidacy: held(context) }),
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
              { target: "#curator.leaseUnconfirmed" },
            ],
          },
        },
      },
    },
    leaseUnconfirmed: {
      entry: assign({
        lost: ({ context }) => {
          const { deadline } = held(context);
          return candidacyLost(
            "leader",
            new Error(
              `no renewal of the election lease confirmed for ${Math.round(deadline.sinceProvenMs())} ms (TTL ${deadline.ttlMs / 1000} s, less a ${deadline.safetyMarginMs} ms margin)`,
            ),
          );
        },
      }),
      invoke: [
        { src: "standBy", input: ({ context }) => context.steps },
        {
          src: "stepDown",
          input: ({ context }) => ({
            steps: context.steps,
            candidacy: held(context),
            why: context.lost ?? new Error("lease unconfirmed"),
          }),
        },
      ],
    },
    steppingDown: {
      invoke: [
        { src: "standBy", input: ({ context }) => context.steps },
        {
          src: "stepDown",
          input: ({ context }) => ({
            steps: context.steps,
            candidacy: held(context),
            why: context.lost ?? new Error("stepping down"),
          }),
        },
      ],
    },
  },
});
