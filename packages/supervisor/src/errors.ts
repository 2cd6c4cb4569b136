/**
 * Typed errors of the supervision tree. Every error names the DN it concerns,
 * so a line in a log or a test failure says where the problem is.
 */

/**
 * Base class of every error raised by the supervisor. Not abstract: the test
 * harness throws it itself for problems no subclass names.
 */
export class SupervisorError extends Error {
  constructor(message: string, options?: { cause?: unknown }) {
    super(message, options);
    // Set once, here, from the class actually constructed: every subclass
    // shows its own name in stack traces and logs, and can be told apart by
    // `name` where `instanceof` does not work (another realm, a second copy of
    // the package). No subclass sets `name` itself.
    this.name = new.target.name;
  }
}

/** A child or sub-logger name that does not match `^[a-z0-9_-]{1,64}$`. */
export class InvalidNameError extends SupervisorError {
  constructor(
    /** DN of the runnable concerned. */
    readonly dn: string,
    /** The name that was refused. */
    readonly childName: string,
  ) {
    super(`${dn}: invalid name ${JSON.stringify(childName)}: names must match ^[a-z0-9_-]{1,64}$`);
  }
}

/** A name already taken by a child or a sub-logger of the same runnable. */
export class DuplicateNameError extends SupervisorError {
  constructor(
    /** DN of the runnable concerned. */
    readonly dn: string,
    /** The name that was refused. */
    readonly childName: string,
    takenBy: "child" | "sub-logger",
  ) {
    super(`${dn}: name ${JSON.stringify(childName)} is already taken by a ${takenBy}`);
  }
}

/** `run`/`runGroup` called when the runnable may no longer start children. */
export class ChildStartError extends SupervisorError {
  constructor(
    /** DN of the runnable concerned. */
    readonly dn: string,
    why: string,
  ) {
    super(`${dn}: cannot start children: ${why}`);
  }
}

/** `healthy()` or `done()` called in a state where it is not legal. */
export class SignalMisuseError extends SupervisorError {
  constructor(
    /** DN of the runnable concerned. */
    readonly dn: string,
    signal: "healthy" | "done",
    state: string,
  ) {
    super(
      signal === "healthy"
        ? `${dn}: healthy() called in state ${state}; it is legal only once, while the runnable is new`
        : `${dn}: done() called in state ${state}; it is legal only after healthy()`,
    );
  }
}

/** A permanent runnable returned without calling `done()`. */
export class ReturnedWithoutDoneError extends SupervisorError {
  constructor(
    /** DN of the runnable concerned. */
    readonly dn: string,
    state: string,
  ) {
    super(`${dn}: returned in state ${state} without calling done()`);
  }
}

/** A runnable threw or rejected with something that is not an Error. */
export class NonErrorThrownError extends SupervisorError {
  constructor(
    /** DN of the runnable concerned. */
    readonly dn: string,
    /** What was thrown (not an Error). */
    readonly value: unknown,
  ) {
    super(`${dn}: failed with a non-Error value: ${String(value)}`);
  }
}

/** A child exceeded its restart intensity; its parent fails with this error. */
export class EscalationError extends SupervisorError {
  constructor(
    /** DN of the child that was given up on. */
    readonly childDn: string,
    /** The intensity it exceeded: more than this many restarts... */
    readonly restarts: number,
    /** ...within this many milliseconds. */
    readonly periodMs: number,
    cause: unknown,
  ) {
    super(
      `${childDn} failed more than ${restarts} times within ${periodMs} ms; giving up on it: ${
        cause instanceof Error ? cause.message : String(cause)
      }`,
      { cause },
    );
  }
}

/** The root runnable ended for good through a failure (escalation past the root). */
export class TreeFailedError extends SupervisorError {
  constructor(cause: unknown) {
    super(`supervision tree failed: ${cause instanceof Error ? cause.message : String(cause)}`, {
      cause,
    });
  }
}

/**
 * Abort reason of runs stopped because of something outside them. One reason
 * is shared by everything a single event stops (a failure can stop a group
 * of hundreds; an Error per run would be the slowest part of the restart).
 * `dn` is where the event happened.
 */
export class RunAbortedError extends SupervisorError {
  constructor(
    /** DN of the runnable concerned. */
    readonly dn: string,
    /** Why the run was told to stop. */
    readonly why: string,
  ) {
    super(`${dn}: ${why}`);
  }
}
