/**
 * One node of the supervision tree: a runnable, its current run, and the
 * bookkeeping that restart decisions need. Nodes are plain records; all
 * decisions are taken by the Tree (tree.ts), which owns them.
 *
 * Everything that is not needed by an idle healthy runnable (abort signal,
 * logger, children map, backoff) is created on first use: a node should cost
 * well under a kilobyte, since services run thousands of them.
 */
import type { Backoff } from "./backoff";
import type { RunAbortedError } from "./errors";
import { joinDn } from "./names";
import { abortRunSignal, createRunSignal } from "./run-signal";
import type { ChildOptions, Logger, NodeState, Runnable } from "./types";

/**
 * The origin of every node's `since`. A node keeps the time it entered its
 * state as milliseconds after this, a small integer that V8 stores in the
 * node itself: a wall-clock time in milliseconds is not one, and V8 keeps it
 * in a 16-byte number object of its own, one per node (measured: 65 against
 * 44 bytes for an object of two fields). 24.8 days after this module was
 * loaded the offsets outgrow a small integer and are boxed again: the saving
 * ends there, nothing else changes.
 */
const sinceEpoch = Date.now();

/**
 * What most nodes never need: set on failures, restarts, sub-loggers,
 * logging and status texts. Kept out of TreeNode so that an idle or
 * finished node carries one pointer for all of it (bytes per node: every
 * field costs 8 on every node).
 */
class ColdState {
  reservedNames: Set<string> | undefined;
  lastError: Error | undefined;
  givenUp = false;
  backoff: Backoff | undefined;
  restartTimes: number[] | undefined;
  restartTimer: NodeJS.Timeout | undefined;
  restartAt: number | undefined;
  logger: Logger | undefined;
  status: string | undefined;
}

export class TreeNode {
  /** Children by name; undefined while there are none. */
  children: Map<string, TreeNode> | undefined;
  /**
   * The members of this node's `runGroup` (shared by all of them), or
   * undefined for a child started by `run`, which is a group of its own.
   */
  group: Group | undefined;

  state: NodeState = "new";
  /** See `since`. */
  private sinceOffset = 0;
  /** Restarts so far: 0 during the first run. */
  restarts = 0;
  /** See `dn`. */
  private dnCache: string | undefined;
  /** The runnable's promise has not settled yet. */
  running = false;
  /** Runnables still running in this subtree, this node included. Zero: the subtree has settled. */
  live = 0;
  /** Why this run was told to stop; undefined until it is (see `aborted`). */
  abortReason: RunAbortedError | undefined;
  /** This run's `ctx.signal` (run-signal.ts), made on first use. */
  runSignal: AbortSignal | undefined;
  /** What `untilAborted()` returns for this run, and how to release it (two fields, not an object: bytes per idle node). */
  abortWaiter: Promise<void> | undefined;
  releaseWaiter: (() => void) | undefined;

  /** The rarely used fields below, allocated on the first write of a value. */
  private cold: ColdState | undefined;

  private coldState(): ColdState {
    return (this.cold ??= new ColdState());
  }

  /** Names taken by sub-loggers. */
  get reservedNames(): Set<string> | undefined {
    return this.cold?.reservedNames;
  }
  set reservedNames(v: Set<string> | undefined) {
    if (v !== undefined || this.cold) this.coldState().reservedNames = v;
  }
  get lastError(): Error | undefined {
    return this.cold?.lastError;
  }
  set lastError(v: Error | undefined) {
    if (v !== undefined || this.cold) this.coldState().lastError = v;
  }
  /** Failed too often (restart intensity): never restarted again. */
  get givenUp(): boolean {
    return this.cold?.givenUp ?? false;
  }
  set givenUp(v: boolean) {
    if (v || this.cold) this.coldState().givenUp = v;
  }
  get backoff(): Backoff | undefined {
    return this.cold?.backoff;
  }
  set backoff(v: Backoff | undefined) {
    if (v !== undefined || this.cold) this.coldState().backoff = v;
  }
  /** Times of recent restarts after failures, for the restart intensity. */
  get restartTimes(): number[] | undefined {
    return this.cold?.restartTimes;
  }
  set restartTimes(v: number[] | undefined) {
    if (v !== undefined || this.cold) this.coldState().restartTimes = v;
  }
  get restartTimer(): NodeJS.Timeout | undefined {
    return this.cold?.restartTimer;
  }
  set restartTimer(v: NodeJS.Timeout | undefined) {
    if (v !== undefined || this.cold) this.coldState().restartTimer = v;
  }
  get restartAt(): number | undefined {
    return this.cold?.restartAt;
  }
  set restartAt(v: number | undefined) {
    if (v !== undefined || this.cold) this.coldState().restartAt = v;
  }
  get logger(): Logger | undefined {
    return this.cold?.logger;
  }
  set logger(v: Logger | undefined) {
    if (v !== undefined || this.cold) this.coldState().logger = v;
  }
  /**
   * What the current run says it is doing (`RunContext.status`, already cut
   * to one short line); undefined when it said nothing, and again once the
   * run has ended. Cold: most runnables never publish one.
   */
  get status(): string | undefined {
    return this.cold?.status;
  }
  set status(v: string | undefined) {
    if (v !== undefined || this.cold) this.coldState().status = v;
  }

  constructor(
    readonly name: string,
    readonly parent: TreeNode | undefined,
    readonly runnable: Runnable,
    readonly opts: ChildOptions,
  ) {}

  /**
   * The node's distinguished name: its parent's DN, a dot and its name
   * ("root.network.dhcp"). Made on first use and kept: most runnables that
   * start and end are never logged, listed or named in an error, and a burst
   * of them then makes no string each (the reports record the parent's DN and
   * the name; see reports.ts).
   */
  get dn(): string {
    return (this.dnCache ??= joinDn(this.parentDn, this.name));
  }

  /** The DN of the node's parent, "" for the root: with `name`, what a report records. */
  get parentDn(): string {
    return this.parent ? this.parent.dn : "";
  }

  /** When the node entered its current state, in ms since the epoch (stamped by the tree's TickClock). */
  get since(): number {
    return sinceEpoch + this.sinceOffset;
  }
  set since(ms: number) {
    this.sinceOffset = ms - sinceEpoch;
  }

  /** This run has been told to stop: it has a reason to (one field less on every node). */
  get aborted(): boolean {
    return this.abortReason !== undefined;
  }

  /**
   * Which run of the runnable this is: a RunContext made for another one is
   * stale. Every restart starts the next run, so this is `restarts` (one
   * field less on every node).
   */
  get incarnation(): number {
    return this.restarts;
  }

  /** This run's abort signal, created on first use. */
  signal(): AbortSignal {
    if (!this.runSignal) {
      this.runSignal = createRunSignal();
      if (this.aborted) abortRunSignal(this.runSignal, this.abortReason);
    }
    return this.runSignal;
  }

  /** Resolves when this run is aborted (at once if it is). */
  untilAborted(): Promise<void> {
    if (this.aborted) return Promise.resolve();
    if (this.group && !this.isTemporary()) return this.group.untilAborted();
    return (this.abortWaiter ??= new Promise<void>((r) => (this.releaseWaiter = r)));
  }

  /** Members of this node's restart group (itself alone for `run` children). */
  groupMembers(): readonly TreeNode[] {
    return this.group?.members ?? [this];
  }

  /** This node and everything below it have settled, and so has its whole group. */
  groupSettled(): boolean {
    return this.group ? this.group.live === 0 : this.live === 0;
  }

  /** A restart type under which this node is never restarted. */
  isTemporary(): boolean {
    return this.opts.restart === "temporary";
  }
}

/**
 * A `runGroup`: its members, and how many of them have a live subtree, kept
 * as members start and settle, so that "has the whole group settled?" is
 * answered in O(1), not by a walk over the members on every settle (which made
 * a group restart quadratic in the size of the group).
 *
 * The members of a group that is not temporary are always aborted together
 * (a member's failure stops its siblings; a parent's stop stops them all), so
 * they share what `untilAborted()` returns: one promise per generation of
 * the group instead of one per member and run. A group restart of a hundred
 * siblings then makes one promise, not a hundred (with their resolving
 * functions, about 250 bytes each: most of what a restart allocates).
 */
export class Group {
  live = 0;
  /** What `untilAborted()` returns to the members until the group is next aborted. */
  private waiter: Promise<void> | undefined;
  private releaseWaiter: (() => void) | undefined;

  constructor(readonly members: TreeNode[]) {}

  /** Resolves when the members' current runs are aborted. */
  untilAborted(): Promise<void> {
    return (this.waiter ??= new Promise<void>((r) => (this.releaseWaiter = r)));
  }

  /**
   * The members' runs are being aborted: release their waiter. Members that
   * start afterwards (the restarted ones) wait on a new one.
   */
  abort(): void {
    this.releaseWaiter?.();
    this.waiter = undefined;
    this.releaseWaiter = undefined;
  }
}
