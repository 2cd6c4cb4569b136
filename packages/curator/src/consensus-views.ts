/**
 * Each etcd member's own view of the consensus, as its node's heartbeats
 * carry it (`HeartbeatRequest.consensus_view`), for the health check of
 * etcd's members (cluster-health.ts): every member's client endpoint is a
 * unix socket of its own node, so the leader cannot ask another member
 * itself; the member's node reads it and tells.
 *
 * A view also carries the member's database size and quota (each member has
 * its own database file, and etcd raises NOSPACE per member), for the
 * database size check.
 *
 * Kept in the leader's memory like heartbeats, aged on the monotonic clock;
 * read only by the health check.
 */
import { performance } from "node:perf_hooks";
import type { curator } from "@metropolis/proto";

/** The most member IDs a view may list; a larger one is not kept. */
export const maxViewMembers = 64;

/**
 * The largest database size or quota (bytes) a view may claim: 1 TiB, far
 * beyond etcd's largest quota (8 GiB). A view claiming more keeps the rest
 * of itself but no database reading.
 */
export const maxViewDatabaseBytes = 2 ** 40;

/** A member's database size and quota, bytes, as its view said. */
export interface ViewDatabaseSize {
  sizeBytes: number;
  quotaBytes: number;
}

/** One member's view, as last heard. */
export interface ConsensusViewSample {
  /** The member IDs (hex) it lists, sorted. */
  memberIds: readonly string[];
  /** The member (hex) it follows as raft leader; undefined while it knows none. */
  raftLeaderId: string | undefined;
  raftTerm: number;
  /** Its database size and quota; undefined when the view carried none, or none believable. */
  database: ViewDatabaseSize | undefined;
  /** When the leader heard it, on its monotonic clock (ms). */
  receivedAt: number;
}

const memberId = /^[0-9a-f]{1,16}$/;

/** Whether `n` is a whole number of bytes a view may claim. */
const believableBytes = (n: number | undefined): n is number =>
  n !== undefined && Number.isSafeInteger(n) && n >= 0 && n <= maxViewDatabaseBytes;

/**
 * The database reading `view` carries: both fields whole, non-negative, at
 * most {@link maxViewDatabaseBytes}, with a quota above zero; otherwise none.
 */
export function viewDatabaseSize(view: curator.ConsensusView): ViewDatabaseSize | undefined {
  const size = view.databaseSizeBytes;
  const quota = view.databaseQuotaBytes;
  if (!believableBytes(size) || !believableBytes(quota) || quota === 0) return undefined;
  return { sizeBytes: size, quotaBytes: quota };
}

/** Whole milliseconds of the monotonic clock. */
const monotonicMs = (): number => Math.floor(performance.now());

/** The latest consensus view of each node; see the module comment. */
export class ConsensusViews {
  private readonly views = new Map<string, ConsensusViewSample>();

  constructor(private readonly monotonic: () => number = monotonicMs) {}

  /**
   * Records the view a heartbeat of `nodeId` carried; one that is malformed
   * or too large is dropped. An unbelievable database reading is dropped
   * alone ({@link viewDatabaseSize}).
   */
  record(nodeId: string, view: curator.ConsensusView | undefined): void {
    if (view === undefined) return;
    const ids = view.memberIds;
    if (ids.length > maxViewMembers || !ids.every((id) => memberId.test(id))) return;
    const leader = view.raftLeaderId;
    if (leader !== "" && !memberId.test(leader)) return;
    this.views.set(nodeId, {
      memberIds: [...new Set(ids)].sort(),
      raftLeaderId: leader === "" ? undefined : leader,
      raftTerm: view.raftTerm,
      database: viewDatabaseSize(view),
      receivedAt: this.monotonic(),
    });
  }

  /** The latest view of `nodeId`, if any. */
  view(nodeId: string): ConsensusViewSample | undefined {
    return this.views.get(nodeId);
  }

  /** Milliseconds since `sample` was heard (monotonic). */
  age(sample: ConsensusViewSample): number {
    return this.monotonic() - sample.receivedAt;
  }

  /** Forgets a deleted node. */
  forget(nodeId: string): void {
    this.views.delete(nodeId);
  }
}
