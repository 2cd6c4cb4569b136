/**
 * The operator's one-line message and exit code of any failure: a refusal
 * of the cluster as `<gRPC status name>: <details>`, metroctl's own errors
 * by their message, an interruption as "interrupted". Used by
 * `runMetroctl` for every command, and by the observer for the errors it
 * shows in the page.
 */
import { status, type ServiceError } from "@grpc/grpc-js";
import { CommanderError } from "commander";
import { describeError, errorName, InterruptedError, MetroctlError } from "./errors";

const isServiceError = (e: unknown): e is ServiceError =>
  typeof e === "object" &&
  e !== null &&
  typeof (e as ServiceError).code === "number" &&
  typeof (e as ServiceError).details === "string";

const isAbort = (e: unknown) =>
  e instanceof InterruptedError ||
  errorName(e) === "AbortError" ||
  (isServiceError(e) && e.code === status.CANCELLED);

/**
 * The one-line message and exit code of a failure; `signal` is the run's
 * interrupt, which turns a cancellation into "interrupted".
 */
export function describeFailure(e: unknown, signal: AbortSignal | undefined): [string, number] {
  if (signal?.aborted && (isAbort(e) || e === signal.reason)) {
    const interrupted = new InterruptedError();
    return [interrupted.message, interrupted.exitCode];
  }
  if (e instanceof CommanderError) return [e.message.replace(/^error: /, ""), e.exitCode || 1];
  if (e instanceof MetroctlError) return [e.message, e.exitCode];
  if (isServiceError(e)) {
    // grpc-js appends an empty "Resolution note:" to connection failures.
    const details = e.details.replace(/\s*Resolution note:\s*$/, "");
    return [`${status[e.code] ?? e.code}: ${details}`, 1];
  }
  return [describeError(e), 1];
}
