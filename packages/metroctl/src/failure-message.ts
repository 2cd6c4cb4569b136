/**
 * The operator's one-line message and exit code of any failure: a refusal
 * of the cluster as `<gRPC status name>: <details>`, metroctl's own errors
 * by their message, an interruption as "interrupted". Used by
 * `runMetroctl` for every command, and by the observer for the errors it
 * shows in the page.
 *
 * It is on the path of every run (a usage error included), so it names the
 * gRPC status codes itself rather than loading grpc-js for its `status`.
 */
import type { ServiceError } from "@grpc/grpc-js";
import { CommanderError } from "commander";
import { describeError, errorName, InterruptedError, MetroctlError } from "./errors";

/**
 * The gRPC status codes' names, by code: fixed by the gRPC protocol
 * (grpc/doc/statuscodes.md) and equal to grpc-js' `status` enum.
 */
export const grpcStatusNames = [
  "OK",
  "CANCELLED",
  "UNKNOWN",
  "INVALID_ARGUMENT",
  "DEADLINE_EXCEEDED",
  "NOT_FOUND",
  "ALREADY_EXISTS",
  "PERMISSION_DENIED",
  "RESOURCE_EXHAUSTED",
  "FAILED_PRECONDITION",
  "ABORTED",
  "OUT_OF_RANGE",
  "UNIMPLEMENTED",
  "INTERNAL",
  "UNAVAILABLE",
  "DATA_LOSS",
  "UNAUTHENTICATED",
] as const;

/** grpc-js' `status.CANCELLED`. */
const cancelled = grpcStatusNames.indexOf("CANCELLED");

const isServiceError = (e: unknown): e is ServiceError =>
  typeof e === "object" &&
  e !== null &&
  "code" in e &&
  typeof e.code === "number" &&
  "details" in e &&
  typeof e.details === "string";

const isAbort = (e: unknown) =>
  e instanceof InterruptedError ||
  errorName(e) === "AbortError" ||
  (isServiceError(e) && e.code === cancelled);

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
    return [`${grpcStatusNames[e.code] ?? e.code}: ${details}`, 1];
  }
  return [describeError(e), 1];
}
