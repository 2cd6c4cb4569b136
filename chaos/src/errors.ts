/**
 * The chaos run's own errors, one class per way it can fail, so that the CLI
 * tells a bad flag (exit 2) from a run that could not be carried out (exit
 * 1) from a run whose checks failed (exit 1, with the report written).
 */

/** Base class of every error of the chaos run. */
export class ChaosError extends Error {
  constructor(message: string, options?: ErrorOptions) {
    super(message, options);
    this.name = new.target.name;
  }
}

/** A command line flag is missing its value, unknown, or out of range. */
export class ChaosUsageError extends ChaosError {}

/** The cluster could not be brought up, or a step of the run itself failed. */
export class ChaosRunError extends ChaosError {}

/** A fault could not be injected or healed (e.g. the process to signal is not running). */
export class NemesisError extends ChaosError {}

/** A final invariant does not hold (a result of the run, reported, never thrown out of it). */
export class InvariantFailure extends ChaosError {}
