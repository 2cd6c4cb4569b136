/**
 * The RunContext handed to one run of a runnable. It is a thin handle: all
 * state lives in the TreeNode, and every call is checked against the run it
 * was made for, so a context kept past its run cannot affect a later one.
 */
import { abortReason } from "./abort-reason";
import { abortableSleep } from "./abortable-sleep";
import { noOptions, type ContextHost } from "./context-host";
import type { TreeNode } from "./tree-node";
import type { ChildOptions, Logger, RunContext, Runnable } from "./types";

export class RunContextImpl implements RunContext {
  constructor(
    private readonly tree: ContextHost,
    private readonly node: TreeNode,
    private readonly incarnation: number,
  ) {}

  get signal(): AbortSignal {
    // A context kept past its run must not get the next run's signal: what
    // the ended run left behind is told to stop.
    if (this.incarnation !== this.node.incarnation)
      return AbortSignal.abort(abortReason(this.node.dn, "this run has ended"));
    return this.node.signal();
  }

  get dn(): string {
    return this.node.dn;
  }

  get logger(): Logger {
    return this.tree.loggerOf(this.node);
  }

  run(name: string, runnable: Runnable, opts: ChildOptions = noOptions): void {
    this.tree.addChild(this.node, this.incarnation, name, runnable, opts);
  }

  runGroup(children: Record<string, Runnable>, opts: ChildOptions = noOptions): void {
    this.tree.addGroup(this.node, this.incarnation, children, opts);
  }

  healthy(): void {
    this.tree.signalHealthy(this.node, this.incarnation);
  }

  done(): void {
    this.tree.signalDone(this.node, this.incarnation);
  }

  status(text: string): void {
    this.tree.setStatus(this.node, this.incarnation, text);
  }

  subLogger(name: string): Logger {
    return this.tree.subLogger(this.node, this.incarnation, name);
  }

  sleep(ms: number): Promise<void> {
    return abortableSleep(ms, this.signal);
  }

  untilAborted(): Promise<void> {
    // A context kept past its run must not wait for the next run's abort.
    if (this.incarnation !== this.node.incarnation) return Promise.resolve();
    return this.node.untilAborted();
  }
}
