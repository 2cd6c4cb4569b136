/**
 * machineRunnable: an XState v5 machine as a supervised runnable. Every
 * subsystem state machine of the node (cluster manager, consensus, curator,
 * roleserver launchers) runs through this adapter.
 *
 * - The RunContext reaches the machine as `input.ctx`, so its actions and
 *   invoked actors can start children, log and watch the abort signal.
 * - A state tagged `healthy` (or the `healthy` predicate) → `ctx.healthy()`.
 * - The machine reaching a final state → `done()`, and the runnable returns.
 * - The machine erroring → the runnable fails; the restart creates a fresh actor.
 * - Abort → `actor.stop()`, and the runnable ends as cancelled.
 * - Every change of state value is logged at debug level at the DN, and
 *   published as the runnable's status (`ctx.status`, the value as a dotted
 *   path: state-value-text.ts), so that `metroctl tree` and the observer show
 *   an operator what the machine is doing ("leading.leaseUnconfirmed"), not
 *   only that its runnable is healthy.
 */
import {
  createActor,
  type AnyMachineSnapshot,
  type AnyStateMachine,
  type InputFrom,
  type SnapshotFrom,
} from "xstate";
import { stateValueText } from "./state-value-text";
import type { RunContext, Runnable } from "./types";

/** What every supervised machine gets as (part of) its input. */
export interface SupervisedInput {
  /** The RunContext of the run the machine's actor belongs to. */
  ctx: RunContext;
}

/** How {@link machineRunnable} runs a machine. */
export interface MachineRunnableOptions<TMachine extends AnyStateMachine> {
  /**
   * The machine's input, apart from `ctx`, which the adapter adds.
   * @default just `{ ctx }`
   */
  input?: Omit<InputFrom<TMachine>, "ctx">;
  /**
   * When the machine counts as healthy (it is healthy for good from the first
   * snapshot that matches).
   * @default its state has the tag `healthy`
   */
  healthy?: (snapshot: SnapshotFrom<TMachine>) => boolean;
}

/**
 * Runs `machine` (XState v5) as a supervised runnable: a fresh actor per run,
 * with the RunContext in `input.ctx`; healthy once a state is tagged
 * `healthy` (or `opts.healthy` says so), done at a final state, failed when
 * the actor errors, stopped when the run is aborted. Its state value is the
 * runnable's status in the tree (`ctx.status`), as a dotted path
 * (`leading.leaseUnconfirmed`; parallel regions joined by ", "), updated on
 * every change and cleared by the tree when the run ends.
 */
export function machineRunnable<TMachine extends AnyStateMachine>(
  machine: TMachine,
  opts: MachineRunnableOptions<TMachine> = {},
): Runnable {
  // XState's snapshot types do not resolve for a generic machine; inside, every
  // snapshot is an AnyMachineSnapshot, and the caller's predicate sees its own type.
  const isHealthy = opts.healthy
    ? (s: AnyMachineSnapshot) => opts.healthy!(s as SnapshotFrom<TMachine>)
    : (s: AnyMachineSnapshot) => s.hasTag("healthy");
  return (ctx: RunContext) =>
    new Promise<void>((resolve, reject) => {
      const actor = createActor(machine as AnyStateMachine, { input: { ...opts.input, ctx } });
      let healthy = false;
      let lastValue: string | undefined;
      let lastStatus: string | undefined;
      const finish = () => {
        ctx.signal.removeEventListener("abort", onAbort);
        subscription.unsubscribe();
      };
      const onAbort = () => {
        finish();
        actor.stop();
        resolve();
      };
      const subscription = actor.subscribe({
        next: (snapshot: AnyMachineSnapshot) => {
          if (ctx.logger.isLevelEnabled?.("debug") ?? true) {
            const value = JSON.stringify(snapshot.value);
            if (value !== lastValue) ctx.logger.debug(`state ${value}`);
            lastValue = value;
          }
          const status = stateValueText(snapshot.value);
          if (status !== lastStatus) ctx.status(status);
          lastStatus = status;
          const isDone = snapshot.status === "done";
          if (!healthy && (isDone || isHealthy(snapshot))) {
            healthy = true;
            ctx.healthy();
          }
          if (isDone) {
            finish();
            ctx.done();
            resolve();
          }
        },
        error: (err: unknown) => {
          finish();
          reject(err);
        },
      });
      if (ctx.signal.aborted) return onAbort();
      ctx.signal.addEventListener("abort", onAbort, { once: true });
      actor.start();
    });
}
