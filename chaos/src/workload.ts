/**
 * The workload of a chaos run: clients of the cluster's Management API, as
 * its owner, for the whole run, each recording every operation it invokes
 * in the history (see history.ts).
 *
 *   writers (4)   UpdateNodeLabels: one label register at a time, set to a
 *                 value unique in the run (`c<client>-<n>`)
 *   readers (2)   GetNodes: every register's value at once
 *   roles (1)     UpdateNodeRoles: toggles the worker role of the nodes
 *                 that hold the registers (not consensus members)
 *
 * The owner may not call Curator.Watch (PERMISSION_DENIED, see the curator's
 * authorization matrix), so there are no Watch readers. Every call is one
 * attempt with a short deadline (owner-client.ts): a timeout is recorded as
 * `unknown`, never retried. Reads that did not answer carry no values and
 * are not part of the history; they are counted in `failedReads`.
 *
 * Guarantees: `stop()` resolves once every client has finished its current
 * call (within its deadline) and closed its channels.
 */
import type { ClusterNode } from "@metropolis/local-cluster";
import type { CuratorAddress } from "@metropolis/curator";
import type { OwnerCredentials } from "@metropolis/metroctl";
import { abortableSleep } from "@metropolis/supervisor";
import type { api } from "@metropolis/proto";
import type { RegisterId } from "./history";
import type { HistoryRecorder, PendingOperation } from "./history-recorder";
import { classify, OwnerClient, type Invoke } from "./owner-client";
import type { Prng } from "./prng";

/** The label keys of each register node. */
export const registerKeys = ["chaos-a", "chaos-b", "chaos-c"] as const;

/** The register of label `key` on node `nodeId`. */
export function registerId(nodeId: string, key: string): RegisterId {
  return `${nodeId}/${key}`;
}

export interface WorkloadOptions {
  /** Curators to ask where the leader is. */
  endpoints: readonly CuratorAddress[];
  owner: OwnerCredentials;
  /** The nodes whose labels are the registers (and whose worker role is toggled). */
  registerNodes: readonly ClusterNode[];
  recorder: HistoryRecorder;
  prng: Prng;
  writers?: number;
  readers?: number;
  /** Deadline of each call; default 2 s. */
  deadlineMs?: number;
  /** The name of the node with ID `id` (for `servedBy`); default the ID itself. */
  nodeName?: (id: string) => string;
}

/** The workload of one run; see the module comment. */
export class Workload {
  /** Reads that did not answer (failed or unknown), not in the history. */
  failedReads = 0;
  private readonly stopping = new AbortController();
  private readonly clients: Promise<void>[] = [];
  private readonly deadlineMs: number;

  constructor(private readonly opts: WorkloadOptions) {
    this.deadlineMs = opts.deadlineMs ?? 2000;
  }

  private name(id: string): string {
    return this.opts.nodeName?.(id) ?? id;
  }

  /** Every register of the run. */
  get registers(): RegisterId[] {
    return this.opts.registerNodes.flatMap((n) => registerKeys.map((k) => registerId(n.id, k)));
  }

  /** Starts every client. */
  start(): void {
    const writers = this.opts.writers ?? 4;
    const readers = this.opts.readers ?? 2;
    for (let i = 1; i <= writers; i++) this.clients.push(this.loop(`c${i}`, (c) => this.write(c)));
    for (let i = 1; i <= readers; i++) this.clients.push(this.loop(`r${i}`, (c) => this.read(c)));
    this.clients.push(this.loop("roles", (c) => this.toggleRole(c)));
  }

  /** Stops every client once its current call is over. */
  async stop(): Promise<void> {
    this.stopping.abort();
    await Promise.all(this.clients);
  }

  /** Runs `step` for client `name` until stopped, pausing after each call. */
  private async loop(
    name: string,
    step: (client: { name: string; api: OwnerClient; n: number }) => Promise<boolean>,
  ): Promise<void> {
    const client = { name, api: new OwnerClient(this.opts.endpoints, this.opts.owner), n: 0 };
    const prng = this.opts.prng.fork(name);
    try {
      while (!this.stopping.signal.aborted) {
        client.n++;
        const ok = await step(client);
        // After a failure, back off a little: no leader means nothing to do quickly.
        const pause = name === "roles" ? prng.int(800, 1500) : ok ? prng.int(50, 150) : 250;
        await abortableSleep(pause, this.stopping.signal).catch(() => undefined);
      }
    } finally {
      client.api.close();
    }
  }

  private async write(client: { name: string; api: OwnerClient; n: number }): Promise<boolean> {
    const prng = this.opts.prng;
    const node = prng.pick(this.opts.registerNodes);
    const key = prng.pick(registerKeys);
    const value = `${client.name}-${client.n}`;
    const op = this.opts.recorder.invoke(client.name, {
      type: "write",
      register: registerId(node.id, key),
      value,
    });
    return this.recorded(op, client.api, (l, m, o, cb) =>
      l.management.updateNodeLabels(
        { node: { $case: "id", id: node.id }, add: new Map([[key, value]]), remove: [] },
        m,
        o,
        cb,
      ),
    );
  }

  private async read(client: { name: string; api: OwnerClient }): Promise<boolean> {
    const op = this.opts.recorder.invoke(client.name, { type: "read", source: "get-nodes" });
    try {
      const res = await client.api.attempt<api.GetNodesResponse>(
        (l, m, o, cb) =>
          l.management.getNodes({ states: [], roles: [], labels: new Map() }, m, o, cb),
        this.deadlineMs,
        (id) => op.sentTo(this.name(id)),
      );
      const values = new Map<RegisterId, string | null>();
      for (const target of this.opts.registerNodes) {
        const node = res.nodes.find((n) => n.id === target.id);
        if (!node) continue;
        for (const key of registerKeys)
          values.set(registerId(node.id, key), node.labels.get(key) ?? null);
      }
      op.ok(values);
      return true;
    } catch {
      op.drop();
      this.failedReads++;
      return false;
    }
  }

  private async toggleRole(client: {
    name: string;
    api: OwnerClient;
    n: number;
  }): Promise<boolean> {
    const node = this.opts.prng.pick(this.opts.registerNodes);
    const worker = client.n % 2 === 1;
    const op = this.opts.recorder.invoke(client.name, {
      type: "other",
      what: `set-roles ${node.name} worker=${worker}`,
    });
    return this.recorded(op, client.api, (l, m, o, cb) =>
      l.management.updateNodeRoles(
        { node: { $case: "id", id: node.id }, kubernetesWorker: worker },
        m,
        o,
        cb,
      ),
    );
  }

  /** One attempt of a call whose answer carries nothing, its outcome recorded on `op`. */
  private async recorded(
    op: PendingOperation,
    client: OwnerClient,
    invoke: Invoke<unknown>,
  ): Promise<boolean> {
    try {
      await client.attempt(invoke, this.deadlineMs, (id) => op.sentTo(this.name(id)));
      op.ok();
      return true;
    } catch (e) {
      const error = classify(e);
      op.end(error.outcome, error.detail);
      return false;
    }
  }
}
