/**
 * At most one defragmentation of an etcd member at a time, and a pause
 * after each: a defragmentation stalls the member, and on the curator
 * leader's node with it the leader's own lease renewals. Back to back (the fuzz test sent
 * hundreds as the owner, with --force) they stalled it for seconds at a
 * time, the leader lost its lease and stepped down, and every call after
 * that was answered "not the leader". A database does not need defragmenting
 * twice a minute, so a second request in that time is refused
 * (RESOURCE_EXHAUSTED, saying when it may be asked again) rather than queued.
 *
 * Used by the curator leader for DefragmentConsensus (one gate per
 * leadership) and by every node for NodeManagement.DefragmentMember (one
 * gate per node, packages/node): each guards one member.
 */
import { status } from "@grpc/grpc-js";
import { CuratorError } from "./errors";

/** How long after a defragmentation ended another is refused. */
export const defragmentPauseMs = 60_000;

/** See the module comment; one per member defragmented (per curator leadership, per node). */
export class DefragmentGate {
  private running = false;
  private endedAt: number | undefined;

  constructor(
    /** The monotonic clock. @default performance.now */
    private readonly now: () => number = () => performance.now(),
  ) {}

  /**
   * Runs `defragment` unless another runs or ended less than
   * {@link defragmentPauseMs} ago.
   * @throws CuratorError RESOURCE_EXHAUSTED when refused, naming why.
   */
  async run<T>(defragment: () => Promise<T>): Promise<T> {
    if (this.running) {
      throw new CuratorError(
        status.RESOURCE_EXHAUSTED,
        "a defragmentation is running; ask again once it ended",
      );
    }
    const since = this.endedAt === undefined ? undefined : this.now() - this.endedAt;
    if (since !== undefined && since < defragmentPauseMs) {
      const wait = Math.ceil((defragmentPauseMs - since) / 1000);
      throw new CuratorError(
        status.RESOURCE_EXHAUSTED,
        `the last defragmentation ended ${Math.floor(since / 1000)} s ago: ask again in ${wait} s (one a minute at most: it stalls the etcd member)`,
      );
    }
    this.running = true;
    try {
      return await defragment();
    } finally {
      this.running = false;
      this.endedAt = this.now();
    }
  }
}
