/**
 * The supervision tree's processor: it starts runnables, classifies how they
 * end, and decides what to restart and when.
 *
 * Restarts are event-driven. Monogon's supervisor scans the whole tree on a
 * 1 ms tick to find dead subtrees that have fully stopped; here every node
 * counts the runnables still running in its subtree (`live`), so the moment
 * the last one settles is known exactly, and the decision is taken then, in
 * the same tick, by walking up from that node (O(depth), not O(tree)).
 *
 *   settle / failure / abort
 *          │
 *          ▼
 *   topmost ancestor that needs a restart ──(its group still running)──▶ wait
 *          │ (group settled)
 *          ▼
 *   dead members: backoff, or give up and escalate to the parent
 *   aborted members: restart at once
 */
import { abortReason } from "./abort-reason";
import { abortRunSignal } from "./run-signal";
import { Backoff, resolveBackoff } from "./backoff";
import { RunContextImpl } from "./context";
import { noOptions, type ContextHost } from "./context-host";
import {
  ChildStartError,
  DuplicateNameError,
  EscalationError,
  NonErrorThrownError,
  ReturnedWithoutDoneError,
  RunAbortedError,
  SignalMisuseError,
  TreeFailedError,
} from "./errors";
import { LogTree } from "./log-tree";
import { defaultLogger, dnLogger } from "./logger";
import { joinDn, validateName } from "./names";
import { Group, TreeNode } from "./tree-node";
import { ReportHub } from "./reports";
import { RestartWindow } from "./restart-window";
import { statusText } from "./status-text";
import { TickClock } from "./tick-clock";
import { TreeWatch } from "./tree-watch";
import type { ReportsOptions, RestartCount, SupervisorReport } from "./report-types";
import type {
  BackoffOptions,
  ChildOptions,
  LogEntry,
  Logger,
  NodeState,
  NodeStatus,
  Runnable,
  StopReport,
  Supervisor,
  SupervisorMetrics,
  SupervisorOptions,
  Transition,
} from "./types";

const defaultStopTimeoutMs = 5000;

export class Tree implements Supervisor, ContextHost {
  readonly done: Promise<void>;
  private resolveDone!: () => void;
  private rejectDone!: (e: Error) => void;

  private readonly root: TreeNode;
  private readonly rootLogger: Logger;
  private readonly logTree: LogTree;
  private readonly backoffDefaults: Readonly<Required<BackoffOptions>>;
  private readonly metrics: SupervisorMetrics | undefined;
  private readonly listeners = new Set<(t: Transition) => void>();
  /** Reports: history, subscribers, and the watchers of the live tree. */
  private readonly hub: ReportHub;
  private readonly restartWindow = new RestartWindow();
  /** Stamps transitions: one reading of the wall clock per burst of work. */
  private readonly clock = new TickClock();

  /** Restart timers pending anywhere in the tree. */
  private pendingTimers = 0;
  /** No more restarts: stop() was called or a failure escalated past the root. */
  private stopping = false;
  private failure: Error | undefined;
  private ended = false;

  constructor(runnable: Runnable, opts: SupervisorOptions = {}) {
    this.done = new Promise<void>((resolve, reject) => {
      this.resolveDone = resolve;
      this.rejectDone = reject;
    });
    // A caller that never awaits `done` must not get an unhandled rejection.
    this.done.catch(() => undefined);
    this.backoffDefaults = resolveBackoff(opts.backoff);
    this.rootLogger = opts.logger ?? defaultLogger(opts.logLevelEnv);
    this.logTree = new LogTree(opts.logBufferLines);
    this.metrics = opts.metrics;
    this.hub = new ReportHub(opts.reportHistory);
    const rootOpts = opts.root ?? {};
    validateChildOptions("root", rootOpts);
    this.root = new TreeNode("root", undefined, runnable, rootOpts);
    // Start on the next microtask, so that whoever called supervise() can
    // subscribe to transitions before the first one happens.
    this.root.running = true;
    this.root.live = 1;
    queueMicrotask(() => {
      this.root.running = false;
      this.root.live = 0;
      if (this.stopping) {
        this.setState(this.root, "canceled");
        return this.checkEnded();
      }
      this.start(this.root);
    });
  }

  // ── Supervisor API ────────────────────────────────────────────────────

  async stop(opts: { timeoutMs?: number } = {}): Promise<StopReport> {
    const timeoutMs = opts.timeoutMs ?? defaultStopTimeoutMs;
    this.stopping = true;
    this.abortSubtree(this.root, abortReason("root", "supervisor stopped"));
    this.checkEnded();
    let timer: NodeJS.Timeout | undefined;
    const timedOut = new Promise<boolean>((resolve) => {
      timer = setTimeout(() => resolve(true), timeoutMs);
    });
    const ended = this.done.then(
      () => false,
      () => false,
    );
    const late = await Promise.race([ended, timedOut]);
    clearTimeout(timer);
    const laggards = late ? this.runningDns() : [];
    return { clean: laggards.length === 0, laggards };
  }

  tree(): NodeStatus[] {
    const out: NodeStatus[] = [];
    const now = Date.now();
    const visit = (n: TreeNode) => {
      const s: NodeStatus = { dn: n.dn, state: n.state, since: n.since, restarts: n.restarts };
      if (n.lastError) s.lastError = n.lastError.message;
      if (n.restartAt !== undefined) s.nextRestartInMs = Math.max(0, n.restartAt - now);
      if (n.givenUp) s.givenUp = true;
      const status = n.status;
      if (status !== undefined) s.status = status;
      out.push(s);
      n.children?.forEach(visit);
    };
    visit(this.root);
    return out;
  }

  onTransition(cb: (t: Transition) => void): () => void {
    this.listeners.add(cb);
    return () => this.listeners.delete(cb);
  }

  logs(dnPrefix: string, opts?: { tail?: number }): LogEntry[] {
    return this.logTree.query(dnPrefix, opts);
  }

  onLog(cb: (entry: LogEntry) => void): () => void {
    return this.logTree.subscribe(cb);
  }

  reports(opts?: ReportsOptions): AsyncIterableIterator<SupervisorReport> {
    return this.hub.reader(opts);
  }

  onReport(cb: (report: SupervisorReport) => void): () => void {
    return this.hub.subscribe(cb);
  }

  recentReports(opts?: { dnPrefix?: string; tail?: number }): SupervisorReport[] {
    return this.hub.recent(opts);
  }

  watchTree(): AsyncIterableIterator<NodeStatus[]> {
    const hub = this.hub;
    return new TreeWatch({
      tree: () => this.tree(),
      onChange: (cb) => this.hub.onChange(cb),
      get hasEnded() {
        return hub.hasEnded;
      },
    });
  }

  topRestarts(opts: { windowMs: number; limit?: number }): RestartCount[] {
    return this.restartWindow.top(opts);
  }

  // ── Called by RunContextImpl ──────────────────────────────────────────

  loggerOf(node: TreeNode): Logger {
    return (node.logger ??= dnLogger(this.rootLogger, node.dn, this.logTree));
  }

  subLogger(node: TreeNode, incarnation: number, name: string): Logger {
    validateName(node.dn, name);
    if (incarnation === node.incarnation) {
      if (node.children?.has(name)) throw new DuplicateNameError(node.dn, name, "child");
      if (node.reservedNames?.has(name)) throw new DuplicateNameError(node.dn, name, "sub-logger");
      (node.reservedNames ??= new Set()).add(name);
    }
    return dnLogger(this.rootLogger, joinDn(node.dn, name), this.logTree);
  }

  /** Starts one child (`run`). */
  addChild(
    parent: TreeNode,
    incarnation: number,
    name: string,
    runnable: Runnable,
    opts: ChildOptions,
  ): void {
    this.checkCanStartChildren(parent, incarnation, opts);
    this.checkChildName(parent, name, runnable);
    const node = new TreeNode(name, parent, runnable, opts);
    (parent.children ??= new Map()).set(name, node);
    this.start(node);
  }

  /** Starts children as one group (`runGroup`); all are validated before any starts. */
  addGroup(
    parent: TreeNode,
    incarnation: number,
    children: Record<string, Runnable>,
    opts: ChildOptions,
  ): void {
    this.checkCanStartChildren(parent, incarnation, opts);
    const names = Object.keys(children);
    if (names.length === 0)
      throw new ChildStartError(parent.dn, "runGroup() needs at least one child");
    for (const name of names) this.checkChildName(parent, name, children[name]);
    const group = names.map((name) => new TreeNode(name, parent, children[name], opts));
    const map = (parent.children ??= new Map());
    const shared = new Group(group);
    for (const n of group) {
      n.group = shared;
      map.set(n.name, n);
    }
    for (const n of group) this.start(n);
  }

  private checkCanStartChildren(parent: TreeNode, incarnation: number, opts: ChildOptions): void {
    if (incarnation !== parent.incarnation || !parent.running) {
      throw new ChildStartError(parent.dn, "this run has already ended");
    }
    if (parent.aborted) throw new ChildStartError(parent.dn, "this run is being stopped");
    if (parent.state !== "new") {
      throw new ChildStartError(
        parent.dn,
        `children may only be started before healthy(), and the runnable is ${parent.state}`,
      );
    }
    if (opts !== noOptions) validateChildOptions(parent.dn, opts);
  }

  private checkChildName(parent: TreeNode, name: string, runnable: Runnable): void {
    validateName(parent.dn, name);
    if (parent.children?.has(name)) throw new DuplicateNameError(parent.dn, name, "child");
    if (parent.reservedNames?.has(name))
      throw new DuplicateNameError(parent.dn, name, "sub-logger");
    if (typeof runnable !== "function")
      throw new ChildStartError(parent.dn, `child ${name} is not a function`);
  }

  signalHealthy(node: TreeNode, incarnation: number): void {
    if (this.isStale(node, incarnation, "healthy")) return;
    if (node.state !== "new")
      return this.misuse(node, new SignalMisuseError(node.dn, "healthy", node.state));
    node.backoff?.reset();
    this.setState(node, "healthy");
  }

  signalDone(node: TreeNode, incarnation: number): void {
    if (this.isStale(node, incarnation, "done")) return;
    if (node.state !== "healthy")
      return this.misuse(node, new SignalMisuseError(node.dn, "done", node.state));
    node.backoff?.reset();
    this.setState(node, "done");
  }

  setStatus(node: TreeNode, incarnation: number, text: string): void {
    // A run that has ended says nothing about the next one: it starts bare.
    if (incarnation !== node.incarnation || !node.running) return;
    const line = statusText(text);
    const status = line === "" ? undefined : line;
    if (status === node.status) return;
    node.status = status;
    if (this.hub.watched) this.hub.changed();
  }

  // ── Lifecycle ─────────────────────────────────────────────────────────

  private start(node: TreeNode): void {
    node.running = true;
    for (let n: TreeNode | undefined = node; n; n = n.parent)
      if (n.live++ === 0 && n.group) n.group.live++;
    this.setState(node, "new");
    const ctx = new RunContextImpl(this, node, node.incarnation);
    let result: Promise<void>;
    try {
      // Promise.resolve: a runnable from plain JavaScript may return no
      // promise; a native one is returned as it is, allocating nothing.
      result = Promise.resolve(node.runnable(ctx));
    } catch (e) {
      result = Promise.reject(e);
    }
    // The handlers are made per run and not kept on the node: once the run
    // has settled they are garbage, where handlers kept for a restart stayed
    // alive with every finished node (a burst of runs that end was then half
    // garbage collection, copying them; see bench/, the done lifecycle).
    // Both outcomes are handled: the rejection handler is the second one.
    void result.then(
      () => this.settled(node, true, undefined),
      (e: unknown) => this.settled(node, false, e),
    );
  }

  /** The runnable's promise settled: classify the ending and act on it. */
  private settled(node: TreeNode, ok: boolean, error: unknown): void {
    // Always the current run's promise: a node is restarted only once settled.
    node.running = false;
    for (let n: TreeNode | undefined = node; n; n = n.parent)
      if (--n.live === 0 && n.group) n.group.live--;
    if (node.status !== undefined) {
      // What the run said it was doing ended with it. Watchers are told even
      // when no transition follows (a done runnable that returns).
      node.status = undefined;
      if (this.hub.watched) this.hub.changed();
    }
    if (node.state === "dead") {
      // Already failed while running (misuse, escalation); this is just the run ending.
    } else if (ok && node.state === "done") {
      // Finished its work; its children keep running.
    } else if (node.aborted) {
      if (!ok && !isAbortReason(node, error)) {
        this.loggerOf(node).warn(`failed while being stopped: ${describe(error)}`);
      }
      this.setState(node, "canceled");
    } else if (ok && node.opts.restart === "transient") {
      node.backoff?.reset();
      this.setState(node, "done");
    } else {
      this.fail(
        node,
        ok ? new ReturnedWithoutDoneError(node.dn, node.state) : toError(node.dn, error),
      );
    }
    this.checkRestart(node);
  }

  /**
   * Marks `node` dead and aborts what must stop with it: its subtree, and its
   * group siblings unless it is temporary (whose death affects nothing else).
   */
  private fail(node: TreeNode, error: Error): void {
    node.lastError = error;
    this.setState(node, "dead", error);
    this.loggerOf(node).error(`runnable failed: ${error.message}`, {
      ...(error.stack && { stack: error.stack }),
    });
    const reason = abortReason(node.dn, "failed; stopping its subtree and group");
    this.abortSubtree(node, reason);
    if (node.isTemporary()) return;
    for (const sibling of node.groupMembers())
      if (sibling !== node) this.abortSubtree(sibling, reason);
  }

  private misuse(node: TreeNode, error: Error): void {
    this.fail(node, error);
    this.checkRestart(node);
  }

  private abortSubtree(node: TreeNode, reason: RunAbortedError): void {
    if (node.restartTimer) {
      // A restart that was waiting for its backoff is cancelled with the rest.
      this.clearRestartTimer(node);
      this.setState(node, "canceled");
    }
    if (node.aborted) return;
    node.abortReason = reason;
    if (node.runSignal) abortRunSignal(node.runSignal, reason);
    node.releaseWaiter?.();
    node.releaseWaiter = undefined;
    if (node.group && !node.isTemporary()) node.group.abort();
    node.children?.forEach((child) => this.abortSubtree(child, reason));
  }

  /**
   * Restarts what can be restarted now that something under `from` changed.
   * Only the topmost node that needs a restart is considered: restarting it
   * re-creates everything below it anyway.
   */
  private checkRestart(from: TreeNode): void {
    if (!this.stopping) {
      let top: TreeNode | undefined;
      for (let n: TreeNode | undefined = from; n; n = n.parent) if (this.needsRestart(n)) top = n;
      if (top) {
        if (top.groupSettled()) {
          const members = top.groupMembers();
          // Asked once per group, not per member: winston's answer allocates.
          const debug = this.rootLogger.isLevelEnabled?.("debug") ?? true;
          for (const m of members) {
            // An aborted parent (stopping, or just failed through an escalation
            // from this very loop) restarts its children itself, fresh.
            if (top.parent?.aborted) break;
            if (this.needsRestart(m)) this.restart(m, debug);
          }
        }
      }
    }
    this.checkEnded();
  }

  private needsRestart(n: TreeNode): boolean {
    if (n.isTemporary() || n.givenUp || n.restartTimer) return false;
    return n.state === "dead" || n.state === "canceled" || (n.state === "done" && n.aborted);
  }

  /** `node` and its subtree have settled: run it again, after its backoff if it failed. */
  private restart(node: TreeNode, debug: boolean): void {
    if (node.state !== "dead") {
      // A consequence of a failure that is logged (at error and info) at the
      // failed node's DN; at info, a group of a hundred would drown it.
      // Checked first: no log record is built, per member, for a disabled level.
      if (debug)
        this.loggerOf(node).debug("restarting at once: it was stopped along with its group");
      this.respawn(node);
      return;
    }
    const intensity = node.opts.intensity;
    if (intensity) {
      const now = Date.now();
      const times = (node.restartTimes ??= []).filter((t) => now - t < intensity.periodMs);
      times.push(now);
      node.restartTimes = times;
      if (times.length > intensity.maxRestarts) {
        node.givenUp = true;
        const error = new EscalationError(
          node.dn,
          intensity.maxRestarts,
          intensity.periodMs,
          node.lastError,
        );
        this.loggerOf(node).error(`not restarting: ${error.message}`);
        this.hub.givenUp(node.dn, intensity.maxRestarts, intensity.periodMs, node.lastError);
        this.escalate(node, error);
        return;
      }
    }
    node.backoff ??= new Backoff(resolveBackoff(node.opts.backoff, this.backoffDefaults));
    const delay = node.backoff.next();
    this.loggerOf(node).info(`restarting in ${delay} ms`);
    const scheduledAt = Date.now();
    this.restartWindow.record(node.dn, scheduledAt);
    this.hub.restartScheduled(node.dn, scheduledAt, delay, node.backoff.attempts);
    if (delay === 0) return this.respawn(node);
    this.pendingTimers++;
    node.restartAt = Date.now() + delay;
    node.restartTimer = setTimeout(() => {
      this.clearRestartTimer(node);
      this.respawn(node);
    }, delay);
  }

  private escalate(node: TreeNode, error: EscalationError): void {
    const parent = node.parent;
    if (parent && (parent.state === "dead" || parent.aborted)) return; // already going down; it restarts us fresh
    this.hub.escalated(node.dn, parent?.dn, error);
    if (!parent) return this.failTree(error);
    this.fail(parent, error);
    this.checkRestart(parent);
  }

  private failTree(error: Error): void {
    this.failure = new TreeFailedError(error);
    this.stopping = true;
    this.abortSubtree(this.root, abortReason("root", "the supervision tree failed"));
  }

  private respawn(node: TreeNode): void {
    node.restarts++; // and so the incarnation: contexts of the last run are stale now
    node.children = undefined;
    node.reservedNames = undefined;
    node.abortReason = undefined;
    node.runSignal = undefined;
    node.abortWaiter = undefined;
    node.releaseWaiter = undefined;
    this.start(node);
  }

  private clearRestartTimer(node: TreeNode): void {
    clearTimeout(node.restartTimer);
    node.restartTimer = undefined;
    node.restartAt = undefined;
    this.pendingTimers--;
  }

  /** Nothing runs and nothing is scheduled: the tree has ended for good. */
  private checkEnded(): void {
    if (this.ended || this.root.live > 0 || this.pendingTimers > 0) return;
    if (!this.stopping && this.needsRestart(this.root)) return;
    this.ended = true;
    this.hub.end();
    if (this.failure) return this.rejectDone(this.failure);
    if (this.root.state === "dead" && !this.stopping) {
      // A temporary root that failed: nothing will ever restart it.
      return this.rejectDone(new TreeFailedError(this.root.lastError));
    }
    this.resolveDone();
  }

  private isStale(node: TreeNode, incarnation: number, signal: string): boolean {
    if (incarnation === node.incarnation && node.running && !node.aborted) return false;
    if (incarnation !== node.incarnation || !node.running) {
      this.loggerOf(node).warn(`${signal}() called from a run that has already ended; ignored`);
    }
    return true;
  }

  private setState(node: TreeNode, to: NodeState, error?: Error): void {
    const from = node.incarnation === 0 && to === "new" ? undefined : node.state;
    node.state = to;
    node.since = this.clock.now();
    this.hub.transition(node, to, error);
    if (!this.metrics && this.listeners.size === 0) return;
    const t: Transition = { dn: node.dn, from, to, at: node.since };
    if (error) t.error = error;
    this.metrics?.onTransition(t);
    for (const cb of this.listeners) cb(t);
  }

  private runningDns(): string[] {
    const out: string[] = [];
    const visit = (n: TreeNode) => {
      if (n.running) out.push(n.dn);
      n.children?.forEach(visit);
    };
    visit(this.root);
    return out;
  }
}

function validateChildOptions(dn: string, opts: ChildOptions): void {
  const { restart, intensity, backoff } = opts;
  if (restart !== undefined && !["permanent", "transient", "temporary"].includes(restart)) {
    throw new ChildStartError(dn, `unknown restart type ${JSON.stringify(restart)}`);
  }
  if (intensity && !(intensity.maxRestarts >= 0 && intensity.periodMs > 0)) {
    throw new ChildStartError(dn, "intensity needs maxRestarts >= 0 and periodMs > 0");
  }
  if (backoff) resolveBackoff(backoff);
}

function isAbortReason(node: TreeNode, error: unknown): boolean {
  return (
    error === node.abortReason ||
    (error instanceof Error && (error.name === "AbortError" || error instanceof RunAbortedError))
  );
}

function toError(dn: string, e: unknown): Error {
  return e instanceof Error ? e : new NonErrorThrownError(dn, e);
}

function describe(e: unknown): string {
  return e instanceof Error ? e.message : String(e);
}
