/**
 * `cluster rolling-reboot [--nodes ID,…] [--max-unavailable N] [--timeout S]`:
 * reboots the cluster's UP nodes so that it never loses what it would not
 * survive losing:
 *
 *   workers (N at a time) ──▶ consensus members, one at a time ──▶ the curator leader, last
 *
 * It starts only on a healthy cluster (`cluster health` fails no check).
 * Each node is rebooted through `node reboot` (so the curator leader's
 * quorum check, CheckNodeMaintenance, is asked first and may refuse), and
 * the next only once it is back: a new boot ID, UP and HEALTHY, for a
 * member its etcd member a reachable voter again, and `cluster health`
 * failing no check. The first node that is
 * refused or does not come back within the timeout stops the run, which
 * says where it stopped, what was rebooted and what was not: the operator
 * looks at that node before anything else goes down.
 */
import { api, common } from "@metropolis/proto";
import { abortableSleep } from "@metropolis/supervisor";
import { withOwnerSession, type ClusterSession } from "./cluster-session";
import type { CommandContext } from "./command-context";
import { describeError, MetroctlError, UsageError } from "./errors";
import { defaultPollIntervalMs, defaultRollingRebootTimeoutMs } from "./flag-defaults";
import {
  nodeHealthName,
  nodeStateName,
  parseCount,
  parseNodeId,
  parseSeconds,
} from "./flag-values";
import { checksWith, healthView } from "./health-view";
import { writeLine } from "./io";
import { nodePower } from "./node-management-commands";

/** Flags of `cluster rolling-reboot`, as given. */
export interface RollingRebootOptions {
  /** Comma-separated node IDs; default every UP node. */
  nodes?: string;
  /** How many workers may be down at once (members always go one by one); default 1. */
  maxUnavailable?: string;
  /** Seconds each node (or batch of workers) may take to come back. */
  timeout?: string;
  debugPort?: string;
}

/** One node of the plan. */
export interface RebootTarget {
  id: string;
  /** It holds the consensus role: its etcd member must vote again before the next step. */
  member: boolean;
  /** It runs the curator leader: rebooted last of all. */
  leader: boolean;
  /** Its boot ID before the reboot: a new one proves it rebooted. */
  bootId: string;
}

/** The run stopped: at which step, and why; what was and was not rebooted. */
export class RollingRebootStoppedError extends MetroctlError {}

/**
 * The order of a rolling reboot of `nodes` (only `selected` when given):
 * steps of workers, `maxUnavailable` at a time, then each member alone,
 * the curator leader `leaderId` last.
 * @throws UsageError for a selected node that is not in the cluster or not UP.
 */
export function rollingRebootPlan(
  nodes: readonly api.Node[],
  leaderId: string | undefined,
  selected: readonly string[] | undefined,
  maxUnavailable: number,
): RebootTarget[][] {
  const byId = new Map(nodes.map((n) => [n.id, n]));
  for (const id of selected ?? []) {
    const node = byId.get(id);
    if (!node) throw new UsageError(`--nodes: node ${id} is not in the cluster`);
    if (node.state !== common.NodeState.UP) {
      throw new UsageError(
        `--nodes: node ${id} is ${nodeStateName(node.state)}: only UP nodes are rebooted`,
      );
    }
  }
  const chosen = nodes
    .filter((n) => n.state === common.NodeState.UP)
    .filter((n) => selected === undefined || selected.includes(n.id))
    .map((n) => ({
      id: n.id,
      member: n.roles?.consensusMember !== undefined,
      leader: n.id === leaderId,
      bootId: n.status?.bootId ?? "",
    }))
    .sort((a, b) => (a.id < b.id ? -1 : a.id > b.id ? 1 : 0));
  const workers = chosen.filter((t) => !t.member && !t.leader);
  const steps: RebootTarget[][] = [];
  for (let i = 0; i < workers.length; i += maxUnavailable) {
    steps.push(workers.slice(i, i + maxUnavailable));
  }
  for (const t of chosen.filter((t) => t.member && !t.leader)) steps.push([t]);
  for (const t of chosen.filter((t) => t.leader)) steps.push([t]);
  return steps;
}

/** What keeps `target` from counting as back, or undefined once it is. */
function notBackYet(
  target: RebootTarget,
  nodes: readonly api.Node[],
  consensus: api.GetClusterConsensusResponse | undefined,
): string | undefined {
  const node = nodes.find((n) => n.id === target.id);
  if (!node) return "it is no longer in the cluster";
  const bootId = node.status?.bootId ?? "";
  if (bootId === "" || bootId === target.bootId) return "it has not reported a new boot";
  if (node.state !== common.NodeState.UP || node.health !== common.NodeHealth.HEALTHY) {
    return `it is ${nodeStateName(node.state)}, ${nodeHealthName(node.health)}`;
  }
  if (!target.member) return undefined;
  const member = consensus?.members.find((m) => m.nodeId === target.id);
  if (!member) return "its etcd member is not listed";
  if (member.status !== common.ConsensusMember_Status.VOTER) return "its etcd member is no voter";
  if (member.reachability !== common.ConsensusMember_Reachability.REACHABLE) {
    return "its etcd member is not reachable";
  }
  return undefined;
}

/** The first failing check of `health` as one line, or undefined when none fails. */
function failingCheck(health: api.GetClusterHealthResponse): string | undefined {
  const [failing] = checksWith(healthView(health), "fail");
  return failing && `cluster health: ${failing.name}: ${failing.detail}`;
}

/** Polls until every node of `step` is back, or throws with what kept the first one not back. */
async function untilBack(
  ctx: CommandContext,
  session: ClusterSession,
  step: readonly RebootTarget[],
  timeoutMs: number,
): Promise<void> {
  const deadline = performance.now() + timeoutMs;
  for (;;) {
    let why: string;
    try {
      const nodes = await session.getNodes({}, ctx.dialTimeoutMs);
      const consensus = step.some((t) => t.member)
        ? await session.getClusterConsensus()
        : undefined;
      const pending = step
        .map((t) => ({ t, why: notBackYet(t, nodes, consensus) }))
        .find((p) => p.why !== undefined);
      const unhealthy = pending ? undefined : failingCheck(await session.getClusterHealth());
      if (!pending && unhealthy === undefined) return;
      why = pending ? `node ${pending.t.id}: ${pending.why}` : (unhealthy ?? "");
    } catch (e) {
      // The curator leader itself may be the node rebooting: the session finds the next one.
      why = `the cluster did not answer (${describeError(e)})`;
    }
    const remaining = deadline - performance.now();
    if (remaining <= 0) throw new MetroctlError(why);
    await abortableSleep(Math.min(defaultPollIntervalMs, remaining), ctx.signal);
  }
}

/** The nodes of `steps` as one comma-separated list, or "none". */
const listed = (steps: readonly RebootTarget[][]) =>
  steps
    .flat()
    .map((t) => t.id)
    .join(", ") || "none";

/** `cluster rolling-reboot`; see the module comment. */
export async function rollingReboot(
  ctx: CommandContext,
  opts: RollingRebootOptions,
): Promise<void> {
  const maxUnavailable =
    opts.maxUnavailable === undefined ? 1 : parseCount(opts.maxUnavailable, "--max-unavailable");
  if (maxUnavailable < 1) throw new UsageError("--max-unavailable: at least 1");
  const timeoutMs =
    opts.timeout === undefined
      ? defaultRollingRebootTimeoutMs
      : parseSeconds(opts.timeout, "--timeout");
  const selected = opts.nodes?.split(",").map((id) => parseNodeId(id.trim()));
  const { nodes, consensus, health } = await withOwnerSession(ctx, async (session) => ({
    nodes: await session.getNodes(),
    consensus: await session.getClusterConsensus(),
    health: await session.getClusterHealth(),
  }));
  const unhealthy = failingCheck(health);
  if (unhealthy !== undefined) {
    throw new RollingRebootStoppedError(
      `rolling reboot not started: the cluster is not healthy (${unhealthy}); see metroctl cluster health`,
    );
  }
  const steps = rollingRebootPlan(nodes, consensus.leader?.nodeId, selected, maxUnavailable);
  if (steps.length === 0) throw new UsageError("no UP node to reboot");
  writeLine(
    ctx.io.stdout,
    `rolling reboot of ${steps.flat().length} nodes in ${steps.length} steps: ${steps
      .map((s) =>
        s.map((t) => t.id + (t.leader ? " (leader)" : t.member ? " (member)" : "")).join(" + "),
      )
      .join(" → ")}`,
  );
  for (const [i, step] of steps.entries()) {
    const at = `step ${i + 1} of ${steps.length} (${step.map((t) => t.id).join(", ")})`;
    const stopped = (why: string, e?: unknown) =>
      new RollingRebootStoppedError(
        `rolling reboot stopped at ${at}: ${why}; rebooted: ${listed(steps.slice(0, i))}; not rebooted: ${listed(steps.slice(i + 1))}`,
        { cause: e },
      );
    const started = performance.now();
    try {
      for (const t of step) await nodePower(ctx, t.id, "reboot", { debugPort: opts.debugPort });
    } catch (e) {
      throw stopped(`reboot refused or failed: ${describeError(e)}`, e);
    }
    try {
      await withOwnerSession(ctx, (session) => untilBack(ctx, session, step, timeoutMs));
    } catch (e) {
      throw stopped(`not back within ${timeoutMs / 1000} s: ${describeError(e)}`, e);
    }
    const seconds = ((performance.now() - started) / 1000).toFixed(1);
    writeLine(
      ctx.io.stdout,
      `${at}: back with a new boot, UP and HEALTHY${step.some((t) => t.member) ? ", voting" : ""} after ${seconds} s`,
    );
  }
  writeLine(ctx.io.stdout, `rolling reboot done: ${steps.flat().length} nodes rebooted`);
}
