/**
 * The local etcd member's own view of the consensus — the members it lists,
 * the raft leader it follows and its term, and its database's size and
 * quota (from its metrics: `readDatabaseSize`) — read about once a heartbeat
 * interval while this node runs a member, for the heartbeats to carry to
 * the curator leader (`HeartbeatRequest.consensus_view`). The leader's
 * health check compares the members' views: only this node can ask its
 * member, whose client endpoint is a unix socket of its own.
 *
 * A read that fails or takes longer than {@link viewReadTimeoutMs} leaves
 * no view (the heartbeat carries none, the check says so); a database size
 * that cannot be read within that time leaves the view without one, the rest
 * of it kept. A view older than two intervals is not handed out. Nothing
 * else depends on it.
 */
import { performance } from "node:perf_hooks";
import { hexMemberId, readDatabaseSize, type DatabaseSize } from "@metropolis/consensus";
import type { RunningConsensus } from "@metropolis/curator";
import type { curator } from "@metropolis/proto";
import type { Watchable } from "@metropolis/event";
import { abortableSleep, type Runnable } from "@metropolis/supervisor";
import { defaultHeartbeatIntervalMs } from "./heartbeat";

/** What the reader asks of the local member. */
export type MemberReads = Pick<RunningConsensus, "members" | "raftStatus" | "clientSocket">;

/** Whether this node runs a member: the roleserver's `localControlPlane`, as the reader sees it. */
export interface LocalMemberSource {
  readonly localControlPlane: Watchable<{ readonly consensus: MemberReads } | undefined>;
}

/** How long one reading of the member may take. */
export const viewReadTimeoutMs = 2_000;

/** Whether `n` can go on the wire as a uint64 number of bytes. */
const wholeBytes = (n: number): boolean => Number.isSafeInteger(n) && n >= 0;

/**
 * The database size and quota of the member at `socketPath`, or why not
 * (its metrics failed, or did not answer within `timeoutMs`); never rejects.
 */
async function databaseSizeWithin(
  socketPath: string,
  timeoutMs: number,
): Promise<{ ok: DatabaseSize } | { failed: string }> {
  let timer: ReturnType<typeof setTimeout> | undefined;
  const late = new Promise<{ failed: string }>((resolve) => {
    timer = setTimeout(
      () => resolve({ failed: `its metrics did not answer within ${timeoutMs} ms` }),
      timeoutMs,
    );
  });
  try {
    return await Promise.race([
      readDatabaseSize(socketPath, timeoutMs).then(
        ({ sizeBytes, quotaBytes }) => {
          // The wire's fields are whole bytes (uint64).
          const ok = { sizeBytes: Math.round(sizeBytes), quotaBytes: Math.round(quotaBytes) };
          return wholeBytes(ok.sizeBytes) && wholeBytes(ok.quotaBytes)
            ? { ok }
            : { failed: `its metrics claim ${sizeBytes} bytes of a ${quotaBytes}-byte quota` };
        },
        (e: unknown) => ({ failed: e instanceof Error ? e.message : String(e) }),
      ),
      late,
    ]);
  } finally {
    clearTimeout(timer);
  }
}

/**
 * The view of `consensus`'s member, within `timeoutMs`; rejects when it does
 * not answer in time. Its database size is read alongside, within the same
 * time: when that fails, the view comes without one, and `onSizeFailure`
 * (if given) is told why.
 */
export async function readConsensusView(
  consensus: MemberReads,
  timeoutMs = viewReadTimeoutMs,
  onSizeFailure?: (why: string) => void,
): Promise<curator.ConsensusView> {
  // Started first and bounded by itself, so that it adds no time to the rest.
  const size = databaseSizeWithin(consensus.clientSocket, timeoutMs);
  let timer: ReturnType<typeof setTimeout> | undefined;
  const late = new Promise<never>((_resolve, reject) => {
    timer = setTimeout(
      () => reject(new Error(`the etcd member did not answer within ${timeoutMs} ms`)),
      timeoutMs,
    );
  });
  try {
    const [members, raft] = await Promise.race([
      Promise.all([consensus.members(), consensus.raftStatus(timeoutMs)]),
      late,
    ]);
    const view: curator.ConsensusView = {
      memberIds: members.map((m) => hexMemberId(m.ID)).sort(),
      raftLeaderId: raft.leaderId ?? "",
      raftTerm: raft.raftTerm,
    };
    const database = await size;
    if ("failed" in database) {
      onSizeFailure?.(database.failed);
      return view;
    }
    return {
      ...view,
      databaseSizeBytes: database.ok.sizeBytes,
      databaseQuotaBytes: database.ok.quotaBytes,
    };
  } finally {
    clearTimeout(timer);
  }
}

/** Reads and keeps the local member's view; see the module comment. */
export class ConsensusViewReader {
  private latestView: { view: curator.ConsensusView; at: number } | undefined;
  private plane: { readonly consensus: MemberReads } | undefined;
  private readonly intervalMs: number;

  constructor(
    private readonly values: LocalMemberSource,
    opts: { intervalMs?: number } = {},
  ) {
    this.intervalMs = opts.intervalMs ?? defaultHeartbeatIntervalMs;
  }

  /** The latest view, if this node runs a member and it was read lately. */
  latest(): curator.ConsensusView | undefined {
    const latest = this.latestView;
    if (latest === undefined || this.plane === undefined) return undefined;
    return performance.now() - latest.at <= 2 * this.intervalMs ? latest.view : undefined;
  }

  /** The runnable: follows the local control plane and reads its member's view every interval. */
  readonly run: Runnable = async (ctx) => {
    const watcher = this.values.localControlPlane.watch();
    const following = (async () => {
      for (;;) {
        this.plane = await watcher.get({ signal: ctx.signal });
        if (this.plane === undefined) this.latestView = undefined;
      }
    })();
    following.catch(() => undefined);
    ctx.healthy();
    try {
      while (!ctx.signal.aborted) {
        const plane = this.plane;
        if (plane !== undefined) {
          try {
            const view = await readConsensusView(plane.consensus, viewReadTimeoutMs, (why) =>
              ctx.logger.debug(`consensus view: no database size: ${why}`),
            );
            this.latestView = { view, at: performance.now() };
          } catch (e) {
            ctx.logger.debug(`consensus view: ${e instanceof Error ? e.message : String(e)}`);
          }
        }
        await abortableSleep(this.intervalMs, ctx.signal).catch(() => undefined);
      }
    } finally {
      watcher.close();
    }
  };
}
