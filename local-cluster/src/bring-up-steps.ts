/**
 * The steps that bring a local cluster up, each driven the way an operator
 * would drive it (metroctl as the owner) and each timed: bootstrap the first
 * node, register and approve another, give a node the consensus role or take
 * it away, cold-start every node from disk.
 *
 * A step learns how a node is getting on from the node's typed progress
 * events (`@metropolis/supervisor`'s node-progress.ts: `cluster.enrolled`,
 * `consensus.serving`, `consensus.promoted`, `curator.leading`,
 * `status.pushed`) and from metroctl, never from the wording of a log
 * message, and waits for them rather than sleeping. Every wait has the
 * cluster's step deadline and ends with its signal.
 */
import { abortableSleep } from "@metropolis/supervisor";
import type {
  NodeProgressEvent,
  NodeProgressEventName,
} from "@metropolis/supervisor/node-progress";
import type { ClusterNode, LocalCluster } from "./cluster-launcher";
import { MetroctlFailedError, NodeIdentityError, StepTimeoutError } from "./errors";
import { removeNodeRoot } from "./node-root-removal";
import type { NodeProcess } from "./node-process";

/** `1234` ms as `1.2 s`. */
export const seconds = (ms: number): string => `${(ms / 1000).toFixed(1)} s`;

/** How often a refused metroctl call or an unmet condition is tried again. */
const retryIntervalMs = 200;

/**
 * Creates the cluster: starts node1 with bootstrap parameters, waits until
 * it knows its node ID and its curator leads, takes ownership, and waits
 * until node1 is UP and HEALTHY and has reported its address. node1 joins
 * `cluster.nodes`.
 */
export async function bootstrapFirstNode(cluster: LocalCluster): Promise<void> {
  const node = cluster.newNode(1);
  const params = await cluster.paramsPath(node);
  await cluster.metroctlOk(["bootstrap-params", "-o", params]);
  const wait = { signal: cluster.signal };
  const proc = await cluster.timed(
    (ms) => `${node.name} bootstrapped the cluster as ${node.id}: curator leader in ${seconds(ms)}`,
    async () => {
      const proc = cluster.startNode(node, params);
      const enrolled = await proc.waitForProgress("cluster.enrolled", cluster.stepTimeoutMs, {
        ...wait,
        where: (e) => e.flow === "bootstrap",
      });
      node.id = enrolled.nodeId;
      await proc.waitForProgress("curator.leading", cluster.stepTimeoutMs, {
        ...wait,
        where: (e) => e.nodeId === node.id,
      });
      return proc;
    },
  );
  cluster.nodes.push(node);
  await cluster.timed(
    (ms) => `took ownership of the cluster in ${seconds(ms)}`,
    () => cluster.metroctlOk(["takeownership"]),
  );
  await cluster.waitFor(node, { state: "UP", health: "HEALTHY" });
  // UP and HEALTHY come from the heartbeat; the node's address (which new
  // nodes register with and metroctl dials the node at) from its first status
  // push, which can come later on a loaded machine: the cluster is up once both are in.
  await proc.waitForProgress("status.pushed", cluster.stepTimeoutMs, wait);
  await cluster.saveState();
}

/**
 * Registers node number `nodes.length + 1` and waits until the cluster
 * lists it as NEW, waiting for the owner's approval; the node joins
 * `cluster.nodes`. A node whose registration fails is stopped.
 */
export async function enrolNode(cluster: LocalCluster): Promise<ClusterNode> {
  const node = cluster.newNode(cluster.nodes.length + 1);
  await removeNodeRoot(node.root);
  const params = await cluster.paramsPath(node);
  // Refused until some UP node has reported its address: retried.
  await retry(cluster, `register parameters for ${node.name}`, () =>
    cluster.metroctlOk(["register-params", "-o", params]),
  );
  const started = performance.now();
  const proc = cluster.startNode(node, params);
  try {
    const enrolled = await proc.waitForProgress("cluster.enrolled", cluster.stepTimeoutMs, {
      signal: cluster.signal,
      where: (e) => e.flow === "register",
    });
    node.id = enrolled.nodeId;
    cluster.nodes.push(node);
    await cluster.waitFor(node, { state: "NEW" });
  } catch (e) {
    await proc.stop();
    throw e;
  }
  cluster.record(
    `${node.name} registered as ${node.id}: NEW ${seconds(performance.now() - started)} after start`,
    performance.now() - started,
  );
  return node;
}

/**
 * Registers node number `nodes.length + 1`, approves it, and waits until it
 * is UP and HEALTHY. A node whose registration fails is stopped.
 */
export async function registerNode(cluster: LocalCluster): Promise<ClusterNode> {
  const node = await enrolNode(cluster);
  await cluster.metroctlOk(["approve", node.id]);
  await cluster.timed(
    (ms) => `${node.name} UP and HEALTHY after approval in ${seconds(ms)}`,
    () => cluster.waitFor(node, { state: "UP", health: "HEALTHY" }),
  );
  await cluster.saveState();
  return node;
}

/**
 * `set-role ID --consensus on|off`, then waits until it took effect: on —
 * the node's etcd member serves, some member promoted it to a voter, and it
 * pushed a status naming its curator; off — it pushed a status without a
 * curator. Either way metroctl then shows the role changed and the node
 * HEALTHY. The time is recorded.
 */
export async function setConsensusRole(
  cluster: LocalCluster,
  node: ClusterNode,
  proc: NodeProcess,
  on: boolean,
): Promise<void> {
  const running = cluster.nodes.flatMap((n) => (n.process?.running ? [n.process] : []));
  const cursors = new Map(running.map((p) => [p, p.cursor()]));
  const wait = { since: cursors.get(proc), signal: cluster.signal };
  const isNode = (e: { nodeId: string }) => e.nodeId === node.id;
  await cluster.timed(
    (ms) =>
      on
        ? `${node.name} joined consensus (voting etcd member, curator running) in ${seconds(ms)}`
        : `${node.name} left consensus (control plane stopped) in ${seconds(ms)}`,
    async () => {
      // The curator answers UNAVAILABLE when etcd refuses a membership change for now
      // (an unhealthy cluster, a change still fresh) past metroctl's 30 s; set-role is
      // idempotent, and the step has its own deadline.
      await retry(
        cluster,
        `set-role ${node.name} --consensus ${on ? "on" : "off"}`,
        () => cluster.metroctlOk(["set-role", node.id, "--consensus", on ? "on" : "off"]),
        (e) => e instanceof MetroctlFailedError && /UNAVAILABLE|DEADLINE_EXCEEDED/.test(e.stderr),
      );
      if (on) {
        await proc.waitForProgress("consensus.serving", cluster.stepTimeoutMs, {
          ...wait,
          where: isNode,
        });
        await anyReports(cluster, cursors, "consensus.promoted", isNode);
      }
      await proc.waitForProgress("status.pushed", cluster.stepTimeoutMs, {
        ...wait,
        where: (e) => (e.curatorPort !== null) === on,
      });
      await poll(cluster, `${node.name} to show consensus ${on ? "on" : "off"}`, async () => {
        const view = (await cluster.listNodes()).find((n) => n.id === node.id);
        return view?.roles.includes("consensus") === on;
      });
      await cluster.waitFor(node, { health: "HEALTHY" });
    },
  );
}

/**
 * Cold start: starts every node at once (a consensus needs a quorum to come
 * back), checks that each rejoined as the node ID on record, and waits
 * until all are UP and HEALTHY. Every node must be stopped. The times are
 * recorded.
 */
export async function coldStartNodes(cluster: LocalCluster): Promise<void> {
  await cluster.timed(
    (ms) => `cold start: all ${cluster.nodes.length} nodes UP and HEALTHY in ${seconds(ms)}`,
    () =>
      Promise.all(
        cluster.nodes.map(async (node) => {
          const started = performance.now();
          const proc = cluster.startNode(node);
          await rejoined(cluster, node, proc);
          await cluster.waitFor(node, { state: "UP", health: "HEALTHY" });
          const ms = performance.now() - started;
          cluster.record(`${node.name} (${node.id}) UP and HEALTHY ${seconds(ms)} after start`, ms);
        }),
      ),
  );
}

/**
 * Waits until `proc` reports that it rejoined the cluster, and checks that
 * it did so as `node.id`.
 *
 * @throws NodeIdentityError when it rejoined as another node.
 */
export async function rejoined(
  cluster: LocalCluster,
  node: ClusterNode,
  proc: NodeProcess,
): Promise<void> {
  const { nodeId } = await proc.waitForProgress("cluster.enrolled", cluster.stepTimeoutMs, {
    signal: cluster.signal,
    where: (e) => e.flow === "rejoin",
  });
  if (nodeId !== node.id) {
    throw new NodeIdentityError(`${node.name} rejoined as ${nodeId}, but it was ${node.id}`);
  }
}

/** Waits until one of the processes in `cursors` reports `event` (after its cursor) for which `where` holds. */
async function anyReports<E extends NodeProgressEventName>(
  cluster: LocalCluster,
  cursors: ReadonlyMap<NodeProcess, number>,
  event: E,
  where: (e: NodeProgressEvent<E>) => boolean,
): Promise<void> {
  const waits = [...cursors].map(([proc, since]) =>
    proc.waitForProgress(event, cluster.stepTimeoutMs, { since, signal: cluster.signal, where }),
  );
  try {
    await Promise.any(waits);
  } catch (e) {
    throw e instanceof AggregateError && e.errors.length > 0 ? e.errors[0] : e;
  }
}

/**
 * Calls `fn` until it succeeds, or until it fails with an error `retryable`
 * refuses (thrown as it is); rethrows its last error at the step deadline.
 */
async function retry<T>(
  cluster: LocalCluster,
  what: string,
  fn: () => Promise<T>,
  retryable: (e: unknown) => boolean = () => true,
): Promise<T> {
  const deadline = Date.now() + cluster.stepTimeoutMs;
  for (;;) {
    try {
      return await fn();
    } catch (e) {
      if (!retryable(e)) throw e;
      if (Date.now() > deadline || cluster.signal.aborted) {
        throw new StepTimeoutError(`${what}: gave up after ${seconds(cluster.stepTimeoutMs)}`, {
          cause: e,
        });
      }
    }
    await abortableSleep(retryIntervalMs, cluster.signal);
  }
}

/** Polls `check` until it returns true. @throws StepTimeoutError at the step deadline. */
async function poll(
  cluster: LocalCluster,
  what: string,
  check: () => Promise<boolean>,
): Promise<void> {
  const deadline = Date.now() + cluster.stepTimeoutMs;
  let last: unknown;
  for (;;) {
    try {
      if (await check()) return;
    } catch (e) {
      last = e;
    }
    if (Date.now() > deadline || cluster.signal.aborted) {
      throw new StepTimeoutError(`timed out waiting for ${what}`, { cause: last });
    }
    await abortableSleep(retryIntervalMs, cluster.signal);
  }
}
