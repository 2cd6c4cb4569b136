/**
 * The errors a watcher can reject `get()` with. They are classes so that
 * callers can tell them apart with `instanceof` rather than by message.
 */
import { withoutStackTrace } from "@metropolis/supervisor";

/** Base class of every error of the event package. */
export abstract class EventError extends Error {
  constructor(message: string, options?: { cause?: unknown }) {
    super(message, options);
    // Set once, here, from the class actually constructed: every subclass
    // shows its own name in stack traces and logs, and can be told apart by
    // `name` where `instanceof` does not work (another realm, a second copy of
    // the package). No subclass sets `name` itself.
    this.name = new.target.name;
  }
}

/** Rejects `get()` on a watcher that was closed, including a `get()` pending at the time of `close()`. */
export class WatcherClosedError extends EventError {
  constructor() {
    super("watcher is closed: get() cannot be called after close()");
  }

  /**
   * The error close() ends a pending get() with. Made without a stack trace:
   * closing is how another component says "stop reading", not a bug, and its
   * frames would be the closer's, not the reader's (see withoutStackTrace).
   */
  static atClose(): WatcherClosedError {
    return withoutStackTrace(() => new WatcherClosedError());
  }
}

/**
 * Rejects a `get()` made while another `get()` on the same watcher is still
 * pending. A watcher tracks what it has delivered; two readers sharing it would
 * each see an arbitrary half of the updates, so each reader must call
 * `watch()` for a watcher of its own.
 */
export class ConcurrentGetError extends EventError {
  constructor() {
    super(
      "concurrent get() on one watcher: await the pending get() first, or call watch() for a second watcher",
    );
  }
}

/**
 * Ends a `get({ backlogOnly: true })` sequence on an etcd-backed watcher: every
 * key that existed when the watcher started has been delivered. Not a failure;
 * it is how a caller knows its local copy of a key range is complete.
 */
export class BacklogDone extends EventError {
  constructor() {
    super("backlog done: every value that existed when the watch started has been delivered");
  }
}

/**
 * Rejects `get()` on an etcd-backed watcher when the decoder threw for the
 * stored bytes of `key`. The watcher stays usable: later updates still arrive.
 */
export class DecoderError extends EventError {
  constructor(
    /** The etcd key whose bytes could not be decoded. */
    readonly key: string,
    cause: unknown,
  ) {
    super(
      `decoding etcd key ${JSON.stringify(key)} failed: ${cause instanceof Error ? cause.message : String(cause)}`,
      { cause },
    );
  }
}
