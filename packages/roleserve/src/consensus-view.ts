/**
 * The local etcd member's own view of the consensus — the members it lists,
 * the raft leader it follows and its term — read about once a heartbeat
 * interval while this node runs a member, for the heartbeats to carry to
 * the curator leader (`HeartbeatRequest.consensus_view`). The leader's
 * health check compares the members' views: only this node can ask its
 * member, whose client endpoint is a unix socket of its own.
 *
 * A read that fails or takes longer than {@link viewReadTimeoutMs} leaves
 * no view (the heartbeat carries none, the check says so); a view older
 * than two intervals is not handed out. Nothing else depends on it.
 */
import { performance } from "node:perf_hooks";
import { hexMemberId } from "@metropolis/consensus";
import type { RunningConsensus } from "@metropolis/curator";
import type { curator } from "@metropolis/proto";
import type { Watchable } from "@metropolis/event";
import { abortableSleep, type Runnable } from "@metropolis/supervisor";
import { defaultHeartbeatIntervalMs } from "./heartbeat";

/** What the reader asks of the local member. */
export type MemberReads = Pick<RunningConsensus, "members" | "raftStatus">;

/** Whether this node runs a member: the roleserver's `localControlPlane`, as the reader sees it. */
export interface LocalMemberSource {
  readonly localControlPlane: Watchable<{ readonly consensus: MemberReads } | undefined>;
}

/** How long one reading of the member may take. */
export const viewReadTimeoutMs = 2_000;

/** The view of `consensus`'s member, within `timeoutMs`; rejects when it does not answer in time. */
export async function readConsensusView(
  consensus: MemberReads,
  timeoutMs = viewReadTimeoutMs,
): Promise<curator.ConsensusView> {
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
    return {
      memberIds: members.map((m) => hexMemberId(m.ID)).sort(),
      raftLeaderId: raft.leaderId ?? "",
      raftTerm: raft.raftTerm,
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
            const view = await readConsensusView(plane.consensus);
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
