/**
 * The local cluster's errors: one base class, `LocalClusterError`, so that a
 * caller can tell a failed bring-up step from anything else, and one class
 * per way a step fails.
 */

/**
 * Base class of the launcher's errors. Not abstract: the launcher throws it
 * itself for misuse no subclass names (an unknown node, a node already running).
 */
export class LocalClusterError extends Error {
  constructor(message: string, options?: ErrorOptions) {
    super(message, options);
    // Set once, here, from the class actually constructed: every subclass
    // shows its own name in stack traces and logs, and can be told apart by
    // `name` where `instanceof` does not work (another realm, a second copy of
    // the package). No subclass sets `name` itself.
    this.name = new.target.name;
  }
}

/** A metroctl command exited non-zero. */
export class MetroctlFailedError extends LocalClusterError {
  constructor(
    readonly args: readonly string[],
    readonly exitCode: number,
    readonly stderr: string,
  ) {
    super(
      `metroctl ${args.join(" ")} failed (exit ${exitCode}): ${stderr.trim() || "(no output)"}`,
    );
  }
}

/** The state dir's cluster.json cannot be used. */
export class StateFileError extends LocalClusterError {}

/** A node came back from disk as another node than the one recorded. */
export class NodeIdentityError extends LocalClusterError {}

/** A condition polled for did not hold before its deadline. */
export class StepTimeoutError extends LocalClusterError {}
