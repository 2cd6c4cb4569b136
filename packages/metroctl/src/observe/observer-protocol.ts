/**
 * The observer's wire format: what its HTTP server sends the page (as
 * server-sent events) and what the page sends back (actions). Shared by the
 * server (packages/metroctl/src/observe) and the page (observer-ui), so it
 * is plain types, importing only the import-free node-fields.ts and
 * consensus-fields.ts: the page's build must not pull in Node.
 */
import type { ConsensusMemberView, ConsensusView } from "../consensus-fields";
import type { NodeDescription, SupervisionTreeNode } from "../node-fields";

/** One node as the cluster view shows it: metroctl's NodeDescription, and when its heartbeat came. */
export interface ObservedNode extends NodeDescription {
  /**
   * When the leader last heard a heartbeat from the node, in the server's
   * clock (ms since the epoch); null if never. The page ages it itself.
   */
  heartbeatAt: number | null;
}

/** `snapshot` event of the cluster stream: everything, sent first. */
export interface ClusterSnapshot {
  nodes: ObservedNode[];
  /** Node ID of the curator leader the server talks to; null if unknown. */
  leaderId: string | null;
  /** The server's clock when it sent this (ms since the epoch), to age heartbeats. */
  serverTime: number;
}

/** `delta` event of the cluster stream: what changed since the last event. */
export interface ClusterDelta {
  /** Nodes new or changed, in their current state. */
  upserts: ObservedNode[];
  /** IDs of nodes no longer in the cluster. */
  removed: string[];
  leaderId: string | null;
  serverTime: number;
}

/** One etcd member as the consensus view shows it: metroctl's `cluster members -o json` member. */
export type ObservedConsensusMember = ConsensusMemberView;

/**
 * `consensus` event of the consensus stream: the whole consensus (members,
 * curator and raft leaders with their terms, fault tolerance), sent whenever
 * it changed.
 */
export type ConsensusSnapshot = ConsensusView;

/** One runnable of a node's supervision tree (metroctl's `tree -o json`). */
export type ObservedRunnable = SupervisionTreeNode;

/** `tree` event of a node's tree stream: the whole tree after a change. */
export interface TreeSnapshot {
  roots: ObservedRunnable[];
  /** The server's clock when the node sent it, for restart countdowns. */
  receivedAt: number;
}

/** One supervisor report (metroctl's `reports -o json`). */
export interface ObservedReport {
  seq: number;
  time: string | null;
  /** started, healthy, done, died, restart-scheduled, given-up, escalated. */
  kind: string;
  dn: string;
  restarts?: number;
  delayMs?: number;
  attempt?: number;
  maxRestarts?: number;
  periodMs?: number;
  escalatedTo?: string | null;
  error?: { name: string; message: string; stack: string };
  dropped?: number;
}

/** `reports` event: reports, oldest first (the kept ones first, then new ones). */
export interface ReportBatch {
  reports: ObservedReport[];
  /** The list starts over: the node's stream was opened again and sends its backlog anew. */
  reset?: boolean;
}

/** One log line of a node. */
export interface ObservedLogEntry {
  time: string | null;
  level: string;
  dn: string;
  message: string;
}

/** `logs` event: log lines, oldest first. */
export interface LogBatch {
  entries: ObservedLogEntry[];
  /** The list starts over, as {@link ReportBatch.reset}. */
  reset?: boolean;
}

/** `failure` event: the upstream stream broke (the message says why); the server retries. */
export interface FeedFailure {
  message: string;
  /** When the server tries again (ms from now). */
  retryInMs: number;
}

/** The minimum log levels the logs view offers. */
export const observedLogLevels = ["debug", "info", "warn", "error"] as const;

/** Body of `POST /api/nodes/:id/roles`: roles to give (true) or take (false); unset ones stay. */
export interface RolesChange {
  consensus?: boolean;
  controller?: boolean;
  worker?: boolean;
}

/** Body of `POST /api/nodes/:id/labels`: `key=value` to set, `key-` to remove (as `metroctl label`). */
export interface LabelsChange {
  changes: string[];
}

/** What the logs view asks for: a DN and below, at least a level, and whether to keep following. */
export interface LogsQuery {
  dn: string;
  level: (typeof observedLogLevels)[number];
  follow: boolean;
}

/** Answer of an action: ok, or the error the API gave (`<STATUS>: <details>`). */
export type ActionResult = { ok: true; message: string } | { ok: false; error: string };

/** The header the page sends its token in (EventSource cannot: it uses `?token=`). */
export const tokenHeader = "x-observer-token";
