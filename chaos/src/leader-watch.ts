/**
 * Who leads, every 500 ms: asks every consensus member's curator
 * (CuratorLocal.GetCurrentLeader, 1 s deadline) and takes the leader most
 * of those that answered name. A change of that answer is a leader change;
 * rounds where none answered are skipped (no leader is not a change).
 * Every answer in which a curator names itself is also kept as a leader
 * claim, with the call's invocation and completion times (history.ts
 * `LeaderObservation`), for the check that two curators never act as the
 * leader at once (leader-check.ts).
 *
 * Guarantees: `stop()` resolves once the current round is over; `changes`
 * lists the first leader and every change after it, in time order.
 */
import type { ClusterNode, ClusterView } from "@metropolis/local-cluster";
import { abortableSleep } from "@metropolis/supervisor";
import type { LeaderObservation } from "./history";

/** A leader seen from `at` on (run clock, ms): its node's name. */
export interface LeaderChange {
  at: number;
  leader: string;
}

/** Polls the leader; see the module comment. */
export class LeaderWatch {
  readonly changes: LeaderChange[] = [];
  /** Every answer of a curator naming itself the leader. */
  readonly claims: LeaderObservation[] = [];
  private readonly stopping = new AbortController();
  private running: Promise<void> | undefined;

  constructor(
    private readonly view: ClusterView,
    private readonly members: readonly ClusterNode[],
    private readonly now: () => number,
    private readonly intervalMs = 500,
  ) {}

  /** Starts polling. */
  start(): void {
    this.running = this.poll();
  }

  /** Stops polling. */
  async stop(): Promise<void> {
    this.stopping.abort();
    await this.running;
  }

  private async poll(): Promise<void> {
    while (!this.stopping.signal.aborted) {
      const at = this.now();
      const answers = await Promise.allSettled(
        this.members.map(async (m) => {
          const invokedAt = this.now();
          const { leaderNodeId } = await this.view.currentLeader(m, 1000);
          if (leaderNodeId === m.id) {
            const call = "GetCurrentLeader";
            this.claims.push({
              kind: "claim",
              curator: m.name,
              call,
              invokedAt,
              completedAt: this.now(),
            });
          }
          return leaderNodeId;
        }),
      );
      const votes = new Map<string, number>();
      for (const a of answers) {
        if (a.status === "fulfilled" && a.value !== "") {
          votes.set(a.value, (votes.get(a.value) ?? 0) + 1);
        }
      }
      const best = [...votes.entries()].sort((a, b) => b[1] - a[1])[0];
      if (best) {
        const name = this.members.find((m) => m.id === best[0])?.name ?? best[0];
        if (this.changes.at(-1)?.leader !== name) this.changes.push({ at, leader: name });
      }
      await abortableSleep(this.intervalMs, this.stopping.signal).catch(() => undefined);
    }
  }
}
