/**
 * The node binary's errors. The classes live next to the code that throws
 * them (node-config.ts, node-tree.ts, metrics-server.ts, debug-service.ts);
 * this is their common base.
 */

/** Base class of every error of the node package. */
export abstract class NodeError extends Error {
  constructor(message: string, options?: { cause?: unknown }) {
    super(message, options);
    // Set once, here, from the class actually constructed: every subclass
    // shows its own name in stack traces and logs, and can be told apart by
    // `name` where `instanceof` does not work (another realm, a second copy of
    // the package). No subclass sets `name` itself.
    this.name = new.target.name;
  }
}
