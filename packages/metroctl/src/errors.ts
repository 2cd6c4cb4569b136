/**
 * Typed errors of metroctl. Every failure the operator can cause or meet ends
 * as one of these (or a gRPC error from the cluster), so that
 * `runMetroctl` turns it into exactly one line and an exit code.
 */

/**
 * Base class: a failure with a message meant for the operator, exit code 1.
 * Not abstract: commands throw it themselves for failures no subclass names.
 */
export class MetroctlError extends Error {
  /** The process exit code this failure ends metroctl with. */
  readonly exitCode: number = 1;

  constructor(message: string, options?: { cause?: unknown }) {
    super(message, options);
    // Set once, here, from the class actually constructed: every subclass
    // shows its own name in stack traces and logs, and can be told apart by
    // `name` where `instanceof` does not work (another realm, a second copy of
    // the package). No subclass sets `name` itself.
    this.name = new.target.name;
  }
}

/** A flag or argument has a value metroctl cannot use. */
export class UsageError extends MetroctlError {}

/** A file of the config dir is missing, unreadable or corrupt. The message names the file. */
export class ConfigFileError extends MetroctlError {
  constructor(
    readonly path: string,
    problem: string,
    options?: { cause?: unknown },
  ) {
    super(`${path}: ${problem}`, options);
  }
}

/** No curator endpoint was given and none is remembered in the config dir. */
export class MissingEndpointsError extends MetroctlError {
  constructor(configDir: string) {
    super(
      `no curator endpoints known in ${configDir}: pass --endpoints HOST[:PORT],... once (they are remembered)`,
    );
  }
}

/** The node named on the command line is not in the cluster. */
export class NodeNotFoundError extends MetroctlError {
  constructor(readonly nodeId: string) {
    super(`node ${nodeId} not found`);
  }
}

/** What the cluster answered cannot be trusted or used (e.g. a CA that does not match). */
export class TrustError extends MetroctlError {}

/**
 * `cluster directory`: the cluster's directory names no consensus member
 * with an address, so a node given it would find no curator. Nothing was
 * written.
 */
export class DirectoryWithoutCuratorError extends MetroctlError {}

/**
 * The curator leader did not accept a stream (its answer's headers did not
 * come) within the dial timeout: it is hung, or cut off with its connection
 * still open. The session gives it up, so the next attempt asks the curators
 * who leads.
 */
export class StreamNotAcceptedError extends MetroctlError {
  constructor(
    /** The RPC, e.g. "Management.WatchNodes". */
    readonly method: string,
    readonly leaderNodeId: string,
    timeoutMs: number,
  ) {
    super(
      `${method}: the curator leader ${leaderNodeId} did not accept the stream within ${timeoutMs} ms`,
    );
  }
}

/** A `wait` did not see its condition before its deadline. */
export class WaitTimeoutError extends MetroctlError {}

/** The operator interrupted a command (Ctrl-C). */
export class InterruptedError extends MetroctlError {
  override readonly exitCode = 130;

  constructor() {
    super("interrupted");
  }
}

/**
 * A command failed: carries the command's name for the one-line report
 * (`metroctl: <command>: …`) and the original error as its cause.
 */
export class CommandFailedError extends MetroctlError {
  constructor(
    readonly command: string,
    readonly error: unknown,
  ) {
    super(`${command}: ${describeError(error)}`, { cause: error });
  }
}

/**
 * The message of anything thrown. Duck-typed rather than `instanceof Error`:
 * errors from Node internals or another realm (a test sandbox) are errors too.
 */
export function describeError(e: unknown): string {
  if (typeof e === "object" && e !== null && typeof (e as Error).message === "string") {
    return (e as Error).message;
  }
  return String(e);
}

/** The `name` of anything thrown ("AbortError", …), or undefined. */
export function errorName(e: unknown): string | undefined {
  return typeof e === "object" && e !== null && typeof (e as Error).name === "string"
    ? (e as Error).name
    : undefined;
}
