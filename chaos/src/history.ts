/**
 * The history of a chaos run: every operation a client invoked, with when it
 * was invoked, when it completed, and how it ended. The workload records it;
 * the checker proves from it alone that nothing acknowledged was lost and no
 * read went back in time. Times are milliseconds since the run started
 * (`performance.now()` of the run's process, which is monotonic).
 *
 * Outcomes follow Jepsen: `ok` (the server acknowledged it), `failed` (a
 * definite refusal: the operation did not happen), `unknown` (timeout or a
 * dropped connection: it may or may not have happened, at any time after its
 * invocation).
 */

/** How an operation ended. */
export type Outcome = "ok" | "failed" | "unknown";

/** What every recorded operation has. */
interface OperationBase {
  /** Unique within the history, in invocation order. */
  id: number;
  /** The client (one logical thread of the workload) that invoked it. */
  client: string;
  /** When it was invoked. */
  invokedAt: number;
  /** When its outcome was known; for `unknown`, when the client gave up. */
  completedAt: number;
  outcome: Outcome;
  /** The error's gRPC code and message, for `failed` and `unknown`. */
  error?: string;
  /**
   * The node whose curator the request was sent to (the one the client took
   * for the leader), when a request was sent: who served an `ok` answer.
   */
  servedBy?: string;
}

/**
 * A write of one label register: label `key` of node `nodeId` set to
 * `value`, unique in the whole run (so a read names the write it saw).
 */
export interface WriteOperation extends OperationBase {
  type: "write";
  register: RegisterId;
  value: string;
}

/**
 * A read that observed label registers, `ok` only: a GetNodes answer (every
 * register at once), or one Watch update. `values` maps each register it saw
 * to its value, `null` if the label was absent.
 */
export interface ReadOperation extends OperationBase {
  type: "read";
  /** Where the read came from: a reader's GetNodes or its Watch stream. */
  source: "get-nodes" | "watch";
  values: ReadonlyMap<RegisterId, string | null>;
}

/** Any other operation of the workload (roles, registrations, approvals). */
export interface OtherOperation extends OperationBase {
  type: "other";
  /** What it was, e.g. "set-roles", "register", "approve". */
  what: string;
}

export type Operation = WriteOperation | ReadOperation | OtherOperation;

/** A label register: `${nodeId}/${labelKey}`. */
export type RegisterId = string;

/** The registers' values after the last fault, read from every node's view. */
export interface FinalRead {
  /** When the final read was taken (after recovery). */
  at: number;
  values: ReadonlyMap<RegisterId, string | null>;
}

/**
 * One answer of a curator about leadership, as a client saw it, with the
 * interval of the call (run clock, ms, monotonic): the curator acted as the
 * leader at some instant inside [invokedAt, completedAt], no more is known.
 *
 * - `serve`: it served a leader-only call (Management.GetClusterConsensus,
 *   which names the answering leader and its `term`: the create revision of
 *   its election key, larger for every later leadership); or GetNodes (no
 *   term), from the workload's or the probe's reads.
 * - `claim`: its CuratorLocal.GetCurrentLeader named itself the leader.
 */
export interface LeaderObservation {
  kind: "serve" | "claim";
  /** The node whose curator answered. */
  curator: string;
  /** Its leadership's term, when the answer says it. */
  term?: number;
  /** What was called, e.g. "GetClusterConsensus". */
  call: string;
  invokedAt: number;
  completedAt: number;
}

/** What the checker found wrong, each with the operations that prove it. */
export interface Anomaly {
  kind: "lost-write" | "failed-write-visible" | "not-linearizable" | "stale-read" | "unknown-value";
  register: RegisterId;
  /** A sentence saying what is wrong, for the report. */
  message: string;
  /** The ids of the operations involved. */
  operations: number[];
}
