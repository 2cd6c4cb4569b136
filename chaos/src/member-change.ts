/**
 * A consensus role change as the nemesis makes it: `metroctl set-role ID
 * --consensus on|off` (off with `--force`, past the quorum check; retried while the curator answers UNAVAILABLE or
 * DEADLINE_EXCEEDED: etcd refuses membership changes for a while after one,
 * and a leader may be gone), then a poll of the cluster itself until the
 * change took effect — on: metroctl shows the role, the node's own etcd
 * member lists it as a voter (promoted from learner) and its consensus runs;
 * off: metroctl shows the role gone and its consensus no longer runs —
 * and the node is HEALTHY.
 *
 * Why not LocalCluster.setConsensus: it waits for progress events of the
 * node processes that run when it starts (the member that promotes the
 * learner logs `consensus.promoted`), so a member restarted by another fault
 * meanwhile makes it miss the promotion, or fail because an old process
 * exited. Polling the cluster has no such blind spot.
 *
 * Guarantees: resolves once the change took effect; rejects with the last
 * error after `timeoutMs`.
 */
import { api } from "@metropolis/proto";
import {
  MetroctlFailedError,
  type ClusterNode,
  type ClusterView,
  type LocalCluster,
} from "@metropolis/local-cluster";
import { abortableSleep } from "@metropolis/supervisor";
import { NemesisError } from "./errors";

/** How long a role change may take (a learner must catch up, under faults). */
export const memberChangeTimeoutMs = 120_000;

/** Gives `node` the consensus role (`on`) or takes it away; see the module comment. */
export async function changeConsensusRole(
  cluster: LocalCluster,
  view: ClusterView,
  node: ClusterNode,
  on: boolean,
  timeoutMs = memberChangeTimeoutMs,
): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  // Forced off: the nemesis takes the role under faults on purpose, which the
  // curator's quorum check (issue 38) would refuse while a voter is cut off.
  const args = ["set-role", node.id, "--consensus", on ? "on" : "off", ...(on ? [] : ["--force"])];
  await until(deadline, `metroctl ${args.join(" ")}`, async () => {
    try {
      await cluster.metroctlOk(args);
      return true;
    } catch (e) {
      if (e instanceof MetroctlFailedError && /UNAVAILABLE|DEADLINE_EXCEEDED/.test(e.stderr)) {
        return false;
      }
      throw e;
    }
  });
  await until(deadline, `${node.name}'s consensus role ${on ? "on" : "off"}`, async () => {
    const listed = (await cluster.listNodes()).find((n) => n.id === node.id);
    if (listed?.roles.includes("consensus") !== on) return false;
    const running = (await view.condition(node, api.Condition.CONSENSUS_RUNNING, 2000)).ok;
    if (!on) return !running;
    const members = await view.etcdMembers(node);
    return running && members.some((m) => m.name === node.id && !m.isLearner);
  });
  await cluster.waitFor(node, { health: "HEALTHY" }, Math.max(1000, deadline - Date.now()));
}

/**
 * Calls `check` every 500 ms until it returns true; errors count as "not
 * yet" until the deadline, then the last one is thrown (an error `check`
 * throws that is not retried is thrown at once only from `metroctl`).
 */
async function until(deadline: number, what: string, check: () => Promise<boolean>): Promise<void> {
  let last: unknown;
  for (;;) {
    try {
      if (await check()) return;
    } catch (e) {
      if (e instanceof MetroctlFailedError) throw e;
      last = e;
    }
    if (Date.now() > deadline) {
      throw new NemesisError(`${what}: not done in time`, { cause: last });
    }
    await abortableSleep(500);
  }
}
