/**
 * Adapters from async handlers to grpc-js callbacks, mapping errors to gRPC
 * statuses in one place: a CuratorError is answered with its code and
 * message; the etcd client's "unavailable" and "deadline exceeded" (this
 * curator's etcd member is down or without quorum) are answered UNAVAILABLE,
 * so that clients retry, and so is the etcd client closed under a call (the
 * node is stopping its consensus member while the curator still answers
 * the calls it admitted); anything else is a bug, logged, and answered
 * INTERNAL without its details. Nothing a client sends can crash the process.
 *
 * A status message is an HTTP/2 header: messages quote client values cut
 * short (bounded-text.ts), and as a last line of defence every message is
 * clipped here too, so no error can make a status too large to send.
 */
import {
  status,
  type sendUnaryData,
  type ServerUnaryCall,
  type ServerWritableStream,
} from "@grpc/grpc-js";
import { ClientClosedError, GRPCDeadlineExceededError, GRPCUnavailableError } from "etcd3";
import { MembershipRefusedError } from "@metropolis/consensus";
import type { Logger } from "@metropolis/supervisor";
import { clipped } from "./bounded-text";
import { CuratorError } from "./errors";

export interface GrpcError {
  code: status;
  details: string;
}

/** Whether `e`, or an error it was caused by, is etcd3's "the client was already closed". */
function clientClosed(e: unknown): boolean {
  for (let cause = e, depth = 0; cause instanceof Error && depth < 8; depth++) {
    if (cause instanceof ClientClosedError) return true;
    cause = cause.cause;
  }
  return false;
}

export function toGrpcError(e: unknown, logger: Logger, method: string): GrpcError {
  if (e instanceof CuratorError) return { code: e.code, details: clipped(e.message) };
  if (clientClosed(e)) {
    // The node is stopping: its consensus member closed the client the curator shares. Not a
    // bug: the client retries elsewhere. (Answered INTERNAL, a joining node took it for a
    // refusal; the chaos run on the testbed found it with SIGTERM of the curator leader's node.)
    logger.warn(`${method}: the curator is shutting down: ${e instanceof Error ? e.message : e}`);
    return { code: status.UNAVAILABLE, details: "the curator is shutting down; retry" };
  }
  if (e instanceof MembershipRefusedError) {
    // etcd refused a membership change for now (an unhealthy cluster, a change
    // still fresh) or held it for want of quorum until the call's time ran out.
    logger.warn(`${method}: ${e.message}`);
    return { code: status.UNAVAILABLE, details: clipped(`${e.message}; retry`) };
  }
  if (e instanceof GRPCUnavailableError || e instanceof GRPCDeadlineExceededError) {
    // This curator's etcd member is down or cut off (killed, restarting, no quorum): not a
    // bug, and not a refusal — the client should try again, likely with another leader.
    // (Answered INTERNAL before, a rejoining node took it as the cluster disowning it.)
    logger.warn(`${method}: etcd unavailable: ${e.message}`);
    return {
      code: status.UNAVAILABLE,
      details: clipped(`consensus unavailable on this curator (${e.message}); retry`),
    };
  }
  logger.error(`${method} failed: ${e instanceof Error ? (e.stack ?? e.message) : String(e)}`);
  return { code: status.INTERNAL, details: `internal error in ${method}` };
}

/**
 * A signal for the work a handler does on its caller's behalf: aborted when
 * the call is cancelled (its caller gave up, or its deadline passed) and
 * `marginMs` before the call's deadline, so that a handler waiting on etcd
 * still answers why it gave up while its caller listens, instead of working
 * on for a caller that is gone.
 */
export function callSignal(call: ServerUnaryCall<unknown, unknown>, marginMs = 1000): AbortSignal {
  const cancelled = new AbortController();
  call.once("cancelled", () =>
    cancelled.abort(new Error("the caller gave up (cancelled, or past its deadline)")),
  );
  const deadline = call.getDeadline();
  const remainingMs = (deadline instanceof Date ? deadline.getTime() : deadline) - Date.now();
  if (!Number.isFinite(remainingMs)) return cancelled.signal;
  return AbortSignal.any([
    cancelled.signal,
    AbortSignal.timeout(Math.max(0, remainingMs - marginMs)),
  ]);
}

/** A unary handler from an async function of the call. */
export function unary<Req, Res>(
  method: string,
  logger: Logger,
  handler: (call: ServerUnaryCall<Req, Res>) => Promise<Res>,
): (call: ServerUnaryCall<Req, Res>, callback: sendUnaryData<Res>) => void {
  return (call, callback) => {
    handler(call).then(
      (res) => callback(null, res),
      (e: unknown) => callback(toGrpcError(e, logger, method)),
    );
  };
}

/** A server-streaming handler from an async function that writes to the call and returns when done. */
export function serverStream<Req, Res>(
  method: string,
  logger: Logger,
  handler: (call: ServerWritableStream<Req, Res>) => Promise<void>,
): (call: ServerWritableStream<Req, Res>) => void {
  return (call) => {
    handler(call).then(
      () => call.end(),
      // grpc-js answers a server stream with the status of an emitted error.
      (e: unknown) => call.emit("error", toGrpcError(e, logger, method)),
    );
  };
}
