/**
 * Management.GetClusterConsensus and WatchClusterConsensus: the etcd
 * membership (which member leads raft, which ones the leader's own etcd
 * member reaches), the raft leader and term, the curator leader with its
 * term, and the consensus's fault tolerance, for the owner (nodes ask
 * Curator.GetConsensusStatus).
 *
 * etcd has no watch of its membership, so a watch is the leader reading it:
 * once per {@link consensusRefreshMs} while anybody watches, one reading
 * shared by every stream of this leadership (a {@link ConsensusFeed}), and a
 * message to a stream only when what it would say changed. The streams end
 * with the leadership (the server they belong to stops); a client watches
 * again on the new leader, whose first message has a larger term.
 *
 *   etcd MemberList + raft status + members' node records ──(every refreshMs, while watched)──▶ ConsensusFeed
 *        ──▶ stream 1 (first the current consensus, then each change)
 *        ──▶ stream 2 …
 */
import type { ServerWritableStream } from "@grpc/grpc-js";
import { MemoryValue } from "@metropolis/event";
import { api } from "@metropolis/proto";
import { abortableSleep } from "@metropolis/supervisor";
import { readConsensus } from "./consensus-members";
import { faultTolerance } from "./fault-tolerance";
import type { LeaderContext } from "./leader-context";

/**
 * How often a leader with consensus watchers reads the membership: a change
 * (a member added or promoted, a curator starting) reaches them within this.
 */
export const consensusRefreshMs = 1_000;

/** The answer of GetClusterConsensus on the leader whose context is `ctx`. */
export async function getClusterConsensus(
  ctx: LeaderContext,
): Promise<api.GetClusterConsensusResponse> {
  const { self, createRevision } = ctx.leadership;
  const { members, raft } = await readConsensus(ctx);
  return {
    members,
    leader: {
      nodeId: self.nodeId,
      host: self.host,
      port: self.port,
      // The election key's create revision: a later leader's key was created later.
      term: Number(createRevision),
    },
    raft: raft && { leaderMemberId: raft.leaderId ?? "", term: raft.raftTerm },
    faultTolerance: faultTolerance(members),
  };
}

/** A WatchClusterConsensus call, as grpc-js gives it to the handler. */
export type WatchClusterConsensusCall = ServerWritableStream<
  api.WatchClusterConsensusRequest,
  api.WatchClusterConsensusResponse
>;

/** A reading of the consensus, or why it failed (every stream ends with that). */
type Reading =
  { consensus: api.GetClusterConsensusResponse; encoded: Buffer } | { failed: unknown };

/** The consensus as one leadership's watchers see it; see the module comment. */
export class ConsensusFeed {
  private readonly latest = new MemoryValue<Reading | undefined>(undefined);
  private watchers = 0;
  private reading: AbortController | undefined;

  /** @param refreshMs - how often the membership is read while watched; @default consensusRefreshMs */
  constructor(
    private readonly ctx: LeaderContext,
    private readonly refreshMs = consensusRefreshMs,
  ) {}

  /**
   * Writes the current consensus to `call`, then each change, until `ended`
   * aborts (resolves) or a reading fails (rejects with its error: the
   * client watches again, and finds out whether it still fails).
   */
  async serve(call: WatchClusterConsensusCall, ended: AbortSignal): Promise<void> {
    if (this.watchers++ === 0) this.startReading();
    const watcher = this.latest.watch();
    let sent: Buffer | undefined;
    try {
      for (;;) {
        const reading = await watcher.get({ signal: ended });
        if (reading === undefined) continue; // the first reading is on its way
        if ("failed" in reading) throw reading.failed;
        if (sent?.equals(reading.encoded)) continue;
        call.write({ consensus: reading.consensus });
        sent = reading.encoded;
      }
    } catch (e) {
      if (!ended.aborted) throw e;
    } finally {
      watcher.close();
      if (--this.watchers === 0) this.stopReading();
    }
  }

  private startReading(): void {
    const reading = new AbortController();
    this.reading = reading;
    void (async () => {
      let last: Buffer | undefined;
      while (!reading.signal.aborted) {
        let next: Reading;
        try {
          const consensus = await getClusterConsensus(this.ctx);
          const encoded = Buffer.from(api.GetClusterConsensusResponse.encode(consensus).finish());
          next = { consensus, encoded };
        } catch (failed) {
          next = { failed };
        }
        // A reading finishing after the last watcher left belongs to nobody.
        if (reading.signal.aborted) return;
        // Watchers wake for changes only.
        if ("failed" in next || !last?.equals(next.encoded)) this.latest.set(next);
        last = "failed" in next ? undefined : next.encoded;
        await abortableSleep(this.refreshMs, reading.signal).catch(() => undefined);
      }
    })();
  }

  private stopReading(): void {
    this.reading?.abort();
    this.reading = undefined;
    // The next watcher starts from a fresh reading, not from this one's last.
    this.latest.set(undefined);
  }
}
