/**
 * `wait ID --state S | --health H [--timeout S]`: blocks until a node is in
 * a state (and/or health), for scripts that drive a cluster ("boot a node,
 * wait until it is NEW, approve it, wait until it is UP"). It polls GetNodes
 * until a deadline; a node that does not exist yet is waited for too, since
 * a node's ID is known (from its key) before it registers.
 */
import type { api, common } from "@metropolis/proto";
import { abortableSleep } from "@metropolis/supervisor";
import { withOwnerSession } from "./cluster-session";
import type { CommandContext } from "./command-context";
import { describeError, UsageError, WaitTimeoutError } from "./errors";
import { defaultPollIntervalMs, defaultWaitTimeoutMs } from "./flag-defaults";
import {
  nodeHealthName,
  nodeStateName,
  parseNodeHealth,
  parseNodeId,
  parseNodeState,
  parseSeconds,
} from "./flag-values";
import { writeLine } from "./io";
import { withProgress } from "./spinner";

export { defaultPollIntervalMs, defaultWaitTimeoutMs } from "./flag-defaults";
/** Time a poll gets at least, even when the deadline is closer. */
const minPollTimeoutMs = 2000;

/** Flags of `wait`, as given. */
export interface WaitOptions {
  state?: string;
  health?: string;
  timeout?: string;
  interval?: string;
}

interface Goal {
  state?: common.NodeState;
  health?: common.NodeHealth;
}

const reached = (node: api.Node | undefined, goal: Goal) =>
  node !== undefined &&
  (goal.state === undefined || node.state === goal.state) &&
  (goal.health === undefined || node.health === goal.health);

const describeGoal = (goal: Goal) =>
  [
    goal.state === undefined ? "" : nodeStateName(goal.state),
    goal.health === undefined ? "" : nodeHealthName(goal.health),
  ]
    .filter((s) => s !== "")
    .join(" and ");

const describeNode = (node: api.Node | undefined) =>
  node === undefined
    ? "does not exist"
    : `is ${nodeStateName(node.state)}, ${nodeHealthName(node.health)}`;

const errorMessage = (e: unknown) =>
  (e as { details?: string } | null)?.details ?? describeError(e);

/** `wait ID --state S | --health H [--timeout S] [--interval S]` */
export async function waitForNode(
  ctx: CommandContext,
  id: string,
  opts: WaitOptions,
): Promise<void> {
  parseNodeId(id);
  if (opts.state === undefined && opts.health === undefined) {
    throw new UsageError("give --state and/or --health to wait for");
  }
  const goal: Goal = {
    state: opts.state === undefined ? undefined : parseNodeState(opts.state),
    health: opts.health === undefined ? undefined : parseNodeHealth(opts.health),
  };
  const timeoutMs =
    opts.timeout === undefined ? defaultWaitTimeoutMs : parseSeconds(opts.timeout, "--timeout");
  const intervalMs =
    opts.interval === undefined ? defaultPollIntervalMs : parseSeconds(opts.interval, "--interval");
  const wanted = describeGoal(goal);
  const started = Date.now();
  const deadline = started + timeoutMs;
  const elapsed = () => `${Math.round((Date.now() - started) / 100) / 10}s`;

  await withOwnerSession(ctx, (session) =>
    withProgress(ctx.io.stderr, `waiting for node ${id} to be ${wanted}`, async (progress) => {
      for (;;) {
        // The last poll may start just before the deadline: it still gets time to be answered.
        const pollTimeoutMs = Math.min(
          ctx.dialTimeoutMs,
          Math.max(deadline - Date.now(), minPollTimeoutMs),
        );
        let node: api.Node | undefined;
        try {
          node = (await session.getNodes({}, pollTimeoutMs)).find((n) => n.id === id);
        } catch (e) {
          if (Date.now() < deadline || ctx.signal?.aborted) throw e;
          throw new WaitTimeoutError(
            `node ${id} not ${wanted} after ${elapsed()}: the cluster did not answer in time (${errorMessage(e)})`,
          );
        }
        if (reached(node, goal)) return;
        const remaining = deadline - Date.now();
        if (remaining <= 0) {
          throw new WaitTimeoutError(
            `node ${id} not ${wanted} after ${elapsed()}: it ${describeNode(node)}`,
          );
        }
        progress.update(
          `waiting for node ${id} to be ${wanted} (it ${describeNode(node)}; ${elapsed()})`,
        );
        await abortableSleep(Math.min(intervalMs, remaining), ctx.signal);
      }
    }),
  );
  writeLine(ctx.io.stdout, `node ${id} is ${wanted}`);
}
