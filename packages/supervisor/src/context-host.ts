/**
 * What a RunContext needs of the tree that runs it. The tree implements it;
 * the context depends only on this, so context.ts and tree.ts do not import
 * each other.
 */
import type { TreeNode } from "./tree-node";
import type { ChildOptions, Logger, Runnable } from "./types";

/** The options of a child started without any: shared, and known to be valid. */
export const noOptions: ChildOptions = Object.freeze({});

/**
 * The tree's side of a RunContext's calls. Every call that changes the tree
 * names the run (`incarnation`) it was made for, so that a stale context is
 * refused.
 */
export interface ContextHost {
  /** The logger of `node`'s DN. */
  loggerOf(node: TreeNode): Logger;
  /** A logger for `name` under `node`'s DN (`subLogger`). */
  subLogger(node: TreeNode, incarnation: number, name: string): Logger;
  /** Starts one child (`run`). */
  addChild(
    parent: TreeNode,
    incarnation: number,
    name: string,
    runnable: Runnable,
    opts: ChildOptions,
  ): void;
  /** Starts children as one group (`runGroup`). */
  addGroup(
    parent: TreeNode,
    incarnation: number,
    children: Record<string, Runnable>,
    opts: ChildOptions,
  ): void;
  /** `healthy()`. */
  signalHealthy(node: TreeNode, incarnation: number): void;
  /** `done()`. */
  signalDone(node: TreeNode, incarnation: number): void;
  /** `status(text)`: ignored unless `incarnation` is the run still running. */
  setStatus(node: TreeNode, incarnation: number, text: string): void;
}
