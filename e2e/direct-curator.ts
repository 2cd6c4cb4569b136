/**
 * The owner's calls to the curator of one node only, for the partition
 * tests: no leader search and no retry (what CuratorConnection does would
 * hide which curator answered), each with a deadline; and a prober that
 * asks one curator who leads and reads a label, over and over, recording
 * each call's invocation and return on the monotonic clock so that a test
 * concludes only what those times prove (an answer was made after its
 * call's invocation, before its return).
 */
import { performance } from "node:perf_hooks";
import { Metadata, type ServiceError } from "@grpc/grpc-js";
import { api, curator } from "@metropolis/proto";
import type { ClusterNode } from "../local-cluster/src/cluster-launcher";
import type { ownerTowardsNode } from "../local-cluster/src/cluster-view";
import { curatorPort } from "./e2e-cluster";

/** How long a call to one curator may take before it counts as unanswered. */
const callTimeoutMs = 1000;
/** Every how often a prober asks its curator. */
export const probeIntervalMs = 100;

/** One call to a curator, as the owner saw it. */
export interface Probe {
  kind: "GetCurrentLeader" | "GetNodes";
  invokedAt: number;
  returnedAt: number;
  /** The leader it named (GetCurrentLeader), or the label it showed (GetNodes; "" when unset). */
  answer?: string;
  /** Its gRPC status code, or the error's message, when it failed. */
  failed?: string;
}

/** What failed a call: its gRPC status name, or the message. */
function failure(e: unknown): string {
  if (typeof e === "object" && e !== null && "code" in e && typeof e.code === "number") {
    const details = "details" in e ? String(e.details) : "";
    return `${e.code}: ${details}`;
  }
  return String(e);
}

/** The owner's clients of the curator on one node only (no leader search, no retry). */
export class DirectCurator {
  private readonly local: InstanceType<typeof curator.CuratorLocalClient>;
  private readonly management: InstanceType<typeof api.ManagementClient>;

  constructor(node: ClusterNode, credentials: ReturnType<typeof ownerTowardsNode>) {
    const address = `${node.address}:${curatorPort}`;
    this.local = new curator.CuratorLocalClient(address, credentials);
    this.management = new api.ManagementClient(address, credentials);
  }

  /** The first GetCurrentLeader answer: the leader's node ID. */
  leader(): Promise<string> {
    return new Promise((resolve, reject) => {
      const call = this.local.getCurrentLeader({}, new Metadata(), {
        deadline: Date.now() + callTimeoutMs,
      });
      call.once("data", (res: curator.GetCurrentLeaderResponse) => {
        resolve(res.leaderNodeId);
        call.cancel();
      });
      call.once("error", reject);
      call.once("end", () => reject(new Error("GetCurrentLeader ended without an answer")));
    });
  }

  /** Label `key` of node `nodeId` as GetNodes shows it ("" when unset). */
  label(nodeId: string, key: string): Promise<string> {
    return new Promise((resolve, reject) =>
      this.management.getNodes(
        { states: [], roles: [], labels: new Map() },
        new Metadata(),
        { deadline: Date.now() + callTimeoutMs },
        (e: ServiceError | null, res?: api.GetNodesResponse) => {
          if (e || !res) return reject(e ?? new Error("no answer"));
          const node = res.nodes.find((n) => n.id === nodeId);
          if (!node) return reject(new Error(`GetNodes does not list ${nodeId}`));
          resolve(node.labels.get(key) ?? "");
        },
      ),
    );
  }

  /** Sets label `key` of node `nodeId` to `value`; resolves once acknowledged. */
  setLabel(nodeId: string, key: string, value: string): Promise<void> {
    return new Promise((resolve, reject) =>
      this.management.updateNodeLabels(
        { node: { $case: "id", id: nodeId }, add: new Map([[key, value]]), remove: [] },
        new Metadata(),
        { deadline: Date.now() + 5000 },
        (e: ServiceError | null) => (e ? reject(e) : resolve()),
      ),
    );
  }

  close(): void {
    this.local.close();
    this.management.close();
  }
}

/**
 * Asks `old` who leads and reads label `key` every {@link probeIntervalMs}
 * until `signal` aborts; `probes` grows as the answers come, `done` settles
 * once the last round has.
 */
export function startProbing(
  old: DirectCurator,
  nodeId: string,
  key: string,
  signal: AbortSignal,
): { probes: Probe[]; done: Promise<void> } {
  const probes: Probe[] = [];
  const record = async (kind: Probe["kind"], call: () => Promise<string>) => {
    const invokedAt = performance.now();
    try {
      const answer = await call();
      probes.push({ kind, invokedAt, returnedAt: performance.now(), answer });
    } catch (e) {
      probes.push({ kind, invokedAt, returnedAt: performance.now(), failed: failure(e) });
    }
  };
  const done = (async () => {
    while (!signal.aborted) {
      const round = Promise.all([
        record("GetCurrentLeader", () => old.leader()),
        record("GetNodes", () => old.label(nodeId, key)),
      ]);
      await new Promise<void>((resolve) => {
        const timer = setTimeout(resolve, probeIntervalMs);
        signal.addEventListener("abort", () => (clearTimeout(timer), resolve()), { once: true });
      });
      await round;
    }
  })();
  return { probes, done };
}
