/**
 * Node progress events: the milestones of a node that whoever drives nodes
 * from outside (the local cluster, the e2e tests) waits for — the node knows
 * its ID, its consensus member serves, a learner was promoted, its curator
 * leads or handed the leadership over, it pushed its status, it runs its
 * workloads. They are the one interface between the node's
 * log and its drivers; the message of a line is for people and may change
 * freely.
 *
 * An event travels as a structured field of a log line, `progress`
 * ({@link progressField}): `logProgress(logger, message, event)` writes it,
 * and the node's JSON log line carries it in `meta.progress`, as does the
 * supervisor's log tree (`LogEntry.meta`). `readProgressEvent` reads it back,
 * checked against the types below, so a reader never trusts a shape it has
 * not seen.
 *
 * It is Metropolis's own vocabulary, not part of the generic supervisor: it
 * lives in the subpath `@metropolis/supervisor/node-progress`, next to the
 * log that carries it, because every package that emits an event sits above
 * the supervisor.
 *
 * @module
 */
import type { Logger } from "./types";

/** The name of the log line field that carries a progress event. */
export const progressField = "progress";

/** How a node came to know its ID in a cluster. */
export type EnrolmentFlow = "bootstrap" | "register" | "rejoin";

/** Every progress event by name, with its payload. */
export interface NodeProgressEvents {
  /**
   * The node has its ID in the cluster: it is bootstrapping a new cluster
   * with it (`bootstrap`), registering with it (`register`, before the
   * owner's approval), or has rejoined the cluster as it (`rejoin`).
   */
  "cluster.enrolled": {
    /** The node's ID in the cluster. */
    nodeId: string;
    /** How it got it. */
    flow: EnrolmentFlow;
  };
  /** The consensus (etcd) member of node `nodeId`, this node, serves. */
  "consensus.serving": {
    /** This node's ID. */
    nodeId: string;
  };
  /**
   * This node's autopromoter promoted the learner of node `nodeId` to a
   * voting member: logged by the node that did it (the etcd leader), not
   * necessarily by the promoted one.
   */
  "consensus.promoted": {
    /** The promoted member's node ID. */
    nodeId: string;
  };
  /** This node's curator (node `nodeId`) serves the cluster's APIs as the leader at `address`. */
  "curator.leading": {
    /** This node's ID. */
    nodeId: string;
    /** Where the leader serves, host:port. */
    address: string;
  };
  /**
   * This node's curator, the leader, handed the leadership over because its
   * node, `nodeId`, is to leave consensus.
   */
  "curator.handed-over": {
    /** This node's ID. */
    nodeId: string;
  };
  /**
   * The node pushed its status to the cluster: reachable at `address`, and
   * running a curator on `curatorPort`, or none (`null`).
   */
  "status.pushed": {
    /** The node's external address as pushed. */
    address: string;
    /** The port of its curator, or null when it runs none. */
    curatorPort: number | null;
  };
  /**
   * The node started the workloads it runs as a worker (`worker`: it holds
   * the role), by name, or stopped them all (`worker` false, `workloads` empty).
   */
  "workloads.changed": {
    /** Whether the node holds the worker role. */
    worker: boolean;
    /** The workloads now running, by name. */
    workloads: string[];
  };
}

/** The name of a progress event. */
export type NodeProgressEventName = keyof NodeProgressEvents;

/** What every progress event carries besides its payload: its name. */
export interface ProgressEventName<E extends NodeProgressEventName> {
  /** The event's name: which of {@link NodeProgressEvents} this is. */
  event: E;
}

/** A progress event: its name in `event`, with its payload. */
export type NodeProgressEvent<E extends NodeProgressEventName = NodeProgressEventName> = Extract<
  {
    [K in NodeProgressEventName]: ProgressEventName<K> & NodeProgressEvents[K];
  }[NodeProgressEventName],
  ProgressEventName<E>
>;

/** Every progress event name, in the order of {@link NodeProgressEvents}. */
export const nodeProgressEventNames: readonly NodeProgressEventName[] = [
  "cluster.enrolled",
  "consensus.serving",
  "consensus.promoted",
  "curator.leading",
  "curator.handed-over",
  "status.pushed",
  "workloads.changed",
];

/** Logs `message` at info level with `event` in its {@link progressField} field. */
export function logProgress(logger: Logger, message: string, event: NodeProgressEvent): void {
  logger.info(message, { [progressField]: event });
}

/** Whether `event` is a progress event named `name` (narrows it). */
export function isProgressEvent<E extends NodeProgressEventName>(
  event: NodeProgressEvent | undefined,
  name: E,
): event is NodeProgressEvent<E> {
  return event?.event === name;
}

/**
 * The progress event in a log line's structured fields (`meta`), or
 * undefined when it has none or its `progress` field is not a well-formed
 * event of a known name.
 */
export function readProgressEvent(meta: unknown): NodeProgressEvent | undefined {
  if (typeof meta !== "object" || meta === null || !(progressField in meta)) return undefined;
  const e: unknown = meta[progressField];
  if (typeof e !== "object" || e === null || !("event" in e)) return undefined;
  const nodeId = "nodeId" in e && typeof e.nodeId === "string" ? e.nodeId : undefined;
  const address = "address" in e && typeof e.address === "string" ? e.address : undefined;
  switch (e.event) {
    case "cluster.enrolled": {
      const flow = "flow" in e ? e.flow : undefined;
      if (nodeId === undefined) return undefined;
      if (flow === "bootstrap" || flow === "register" || flow === "rejoin") {
        return { event: e.event, nodeId, flow };
      }
      return undefined;
    }
    case "consensus.serving":
    case "consensus.promoted":
    case "curator.handed-over":
      return nodeId === undefined ? undefined : { event: e.event, nodeId };
    case "curator.leading":
      return nodeId === undefined || address === undefined
        ? undefined
        : { event: e.event, nodeId, address };
    case "status.pushed": {
      const port = "curatorPort" in e ? e.curatorPort : undefined;
      if (address === undefined) return undefined;
      if (port === null || (typeof port === "number" && Number.isInteger(port))) {
        return { event: e.event, address, curatorPort: port };
      }
      return undefined;
    }
    case "workloads.changed": {
      const worker = "worker" in e ? e.worker : undefined;
      const workloads = "workloads" in e ? e.workloads : undefined;
      if (typeof worker !== "boolean" || !Array.isArray(workloads)) return undefined;
      const names = workloads.filter((w): w is string => typeof w === "string");
      return names.length === workloads.length
        ? { event: e.event, worker, workloads: names }
        : undefined;
    }
    default:
      return undefined;
  }
}
