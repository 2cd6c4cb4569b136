/**
 * The members a quorum check has just allowed to go away, until etcd itself
 * can tell: what keeps two maintenance actions checked at the same time
 * from both passing.
 *
 * The quorum check (quorum-safety.ts) judges the members as etcd reports
 * them the moment it runs. Between an allowed reboot and its node actually
 * going down lie metroctl's call to the node and the node's shutdown, and
 * etcd notices the member gone only a few seconds after that: a second
 * operator's reboot of another member, checked in that window, found every
 * member healthy and passed too — two of three members down, no quorum.
 * So an allowed action on a node's member holds that node here, and every
 * later check of another node counts a held member as not healthy, until:
 *
 *   - the node reports a boot other than the one it was held in (it
 *     rebooted and is back: etcd's own word about its member applies again);
 *   - the action is over, for those the leader runs itself (a
 *     defragmentation: {@link MaintenanceHolds.release});
 *   - {@link maintenanceHoldMs} have passed: by then a node going down has
 *     gone, and etcd says so; one that did not (the reboot never came) is
 *     healthy again.
 *
 * Actions that remove a member for good (decommission, the consensus role
 * taken away) are held too, until the member is out of etcd's list, which
 * the check then reads. Held in the leader's memory, on the monotonic
 * clock: a new leader starts without holds, and a check it runs in the
 * window again judges by etcd alone (the window is seconds; a failover in
 * it is the rare case this does not cover).
 */
import { actionWords, type MaintenanceAction } from "./quorum-safety";

/** How long an allowed action holds its node at most. */
export const maintenanceHoldMs = 60_000;

/** One held node. */
interface Hold {
  action: MaintenanceAction;
  /** The boot ID its node reported when the action was allowed ("" when none). */
  bootId: string;
  /** When, on the monotonic clock. */
  at: number;
}

/** A held node as a refusal names it. */
export interface HeldNode {
  nodeId: string;
  /** Why, for a refusal: e.g. "rebooting it was allowed 3 s ago". */
  reason: string;
}

/** The holds of one curator leader; see the module comment. */
export class MaintenanceHolds {
  private readonly holds = new Map<string, Hold>();

  constructor(
    /** The monotonic clock, ms. @default performance.now */
    private readonly now: () => number = () => performance.now(),
    /** @default {@link maintenanceHoldMs} */
    private readonly holdMs = maintenanceHoldMs,
  ) {}

  /** Holds `nodeId` for `action`, allowed while it ran boot `bootId`. */
  hold(nodeId: string, action: MaintenanceAction, bootId: string): void {
    this.holds.set(nodeId, { action, bootId, at: this.now() });
  }

  /** Ends the hold of `nodeId` (an action the leader ran itself is over). */
  release(nodeId: string): void {
    this.holds.delete(nodeId);
  }

  /**
   * The nodes held now, given each node's current boot ID (`bootIdOf`,
   * undefined for a node without a record): expired holds and those of a
   * node that has booted since are dropped.
   */
  held(bootIdOf: (nodeId: string) => string | undefined): HeldNode[] {
    const now = this.now();
    const held: HeldNode[] = [];
    for (const [nodeId, hold] of this.holds) {
      const bootId = bootIdOf(nodeId);
      const rebooted = bootId !== undefined && bootId !== "" && bootId !== hold.bootId;
      if (rebooted || now - hold.at >= this.holdMs) {
        this.holds.delete(nodeId);
        continue;
      }
      const ago = Math.floor((now - hold.at) / 1000);
      held.push({ nodeId, reason: `${actionWords[hold.action]} it was allowed ${ago} s ago` });
    }
    return held;
  }
}
