/**
 * A snapshot of one etcd member's whole database, as etcd's
 * Maintenance.Snapshot streams it (what `etcdctl snapshot save` saves): a
 * consistent copy of the backend at one point in time, ending with etcd's own
 * SHA-256 of the database, which `etcdctl snapshot restore` checks.
 *
 * The stream is read with backpressure: the consumer pulls chunks, and etcd's
 * stream is paused while more than {@link maxBufferedChunks} wait, so a slow
 * consumer (an owner on a slow link) holds at most a few chunks in memory,
 * never the database.
 */
import { Readable } from "node:stream";
import type { Etcd3, ISnapshotResponse } from "etcd3";
import { MemberSnapshotError } from "./backup-errors";
import { hexMemberId } from "./raft-status";

/** How many chunks may wait for the consumer before etcd's stream is paused. */
export const maxBufferedChunks = 8;

/** A snapshot being taken. */
export interface MemberSnapshot {
  /** The etcd revision read just before the snapshot began: every write up to it is in it. */
  readonly revision: bigint;
  /** The member's cluster ID and member ID, hex. */
  readonly clusterId: string;
  readonly memberId: string;
  /** The snapshot's bytes, chunk by chunk; ends when etcd has sent them all. */
  readonly chunks: AsyncIterable<Buffer>;
  /** The total size in bytes, known from the first chunk on (undefined before). */
  sizeBytes(): number | undefined;
}

/**
 * Starts a snapshot of the member `client` talks to. `signal` cancels it
 * (the iteration then rejects with {@link MemberSnapshotError}).
 */
export async function snapshotMember(client: Etcd3, signal: AbortSignal): Promise<MemberSnapshot> {
  const status = await client.maintenance.status();
  const revision = BigInt(status.header.revision);
  const clusterId = hexMemberId(status.header.cluster_id);
  const memberId = hexMemberId(status.header.member_id);
  const stream = await client.maintenance.snapshot();
  let size: number | undefined;
  const pending: Buffer[] = [];
  let ended = false;
  let failure: Error | undefined;
  let wake: (() => void) | undefined;
  const notify = () => {
    const w = wake;
    wake = undefined;
    w?.();
  };
  const pausable = stream instanceof Readable ? stream : undefined;
  stream.on("data", (message: ISnapshotResponse) => {
    if (size === undefined) size = Number(message.remaining_bytes) + message.blob.length;
    if (message.blob.length > 0) pending.push(message.blob);
    if (pending.length > maxBufferedChunks) pausable?.pause();
    notify();
  });
  stream.on("end", () => {
    ended = true;
    notify();
  });
  stream.on("error", (e: Error) => {
    failure ??= new MemberSnapshotError(`etcd's snapshot stream failed: ${e.message}`, {
      cause: e,
    });
    notify();
  });
  const cancel = () => {
    failure ??= new MemberSnapshotError("the snapshot was cancelled");
    if (pausable) pausable.destroy();
    notify();
  };
  signal.addEventListener("abort", cancel, { once: true });
  async function* chunks(): AsyncGenerator<Buffer> {
    try {
      for (;;) {
        if (failure) throw failure;
        const next = pending.shift();
        if (next) {
          if (pending.length <= maxBufferedChunks / 2) pausable?.resume();
          yield next;
          continue;
        }
        if (ended) return;
        await new Promise<void>((resolve) => (wake = resolve));
      }
    } finally {
      signal.removeEventListener("abort", cancel);
      if (!ended && pausable) pausable.destroy();
    }
  }
  return { revision, clusterId, memberId, chunks: chunks(), sizeBytes: () => size };
}
