/**
 * Dialing the cluster during enrolment: a CuratorConnection to the curators
 * of a cluster directory, and the retry policy around enrolment calls.
 *
 * While the cluster is unreachable (no curator answers, or the leader is
 * changing) an enrolment call is retried with backoff, forever: a node that
 * boots before its cluster must simply wait. Anything else is final — the
 * cluster refused (a wrong ticket, an unknown node), or it presented a
 * certificate the node's CA does not verify (a forged or wrong CA), which
 * retrying would never fix.
 */
import { status, type ServiceError } from "@grpc/grpc-js";
import {
  CuratorConnection,
  directoryCurators,
  NoLeaderError,
  type CuratorAddress,
  type LeaderClients,
} from "@metropolis/curator";
import { encodePem, tlsMaterial, type ParsedCertificate } from "@metropolis/pki";
import type { common } from "@metropolis/proto";
import { abortable, answerDeadline, type RunContext } from "@metropolis/supervisor";
import {
  ClusterCaMismatchError,
  ClusterRefusedError,
  EnrolmentAnswerTimeoutError,
  EnrolmentError,
} from "./errors";

/**
 * The curators of a directory: every address of its consensus members, each
 * bound to its node (a curator is believed only with that node's
 * certificate). Other nodes run no curator, and are never asked.
 * EnrolmentError when the directory names none.
 */
export function directoryEndpoints(
  directory: common.ClusterDirectory,
  port: number,
): CuratorAddress[] {
  const endpoints = directoryCurators(directory, port);
  if (endpoints.length === 0) {
    throw new EnrolmentError(
      "the cluster directory names no consensus member with an address: there is no curator to ask",
    );
  }
  return endpoints;
}

/** A connection to the cluster, authenticated by a self-signed certificate for `privateKey`. */
export function dialWithEphemeral(
  endpoints: CuratorAddress[],
  caCertificate: Uint8Array,
  ephemeral: ParsedCertificate,
  privateKey: Uint8Array,
): CuratorConnection {
  const tls = tlsMaterial({ certificate: ephemeral, privateKey, ca: ephemeral });
  return new CuratorConnection({
    endpoints,
    ca: encodePem("CERTIFICATE", caCertificate),
    identity: { cert: tls.cert, key: tls.key },
  });
}

// Certificate verification failures as Node/OpenSSL word them ("unable to verify the first
// certificate", "self-signed certificate in certificate chain"). Not just "TLS": "socket
// disconnected before secure TLS connection was established" is a curator restarting, and must
// be retried; nor a node other than the one expected at an address (@metropolis/curator's
// credentials word that without "certificate"): a node that moved, not a forged cluster.
const tlsFailure = /certificate|self[- ]signed/i;

function details(e: unknown): string {
  if (e instanceof NoLeaderError && e.cause !== undefined) return details(e.cause);
  const err = e as Partial<ServiceError>;
  return err?.details || (e instanceof Error ? e.message : String(e));
}

/**
 * Whether `e` means "the cluster cannot be reached right now" (retry), as
 * opposed to an answer of the cluster (final). Exported for its test.
 */
export function isUnreachable(e: unknown): boolean {
  if (e instanceof NoLeaderError) return !tlsFailure.test(details(e));
  if (e instanceof EnrolmentAnswerTimeoutError) return true;
  const code = (e as Partial<ServiceError>)?.code;
  return (
    // UNIMPLEMENTED: a follower answered, the leader is changing (e.g. in a cold start).
    // CANCELLED: the call's channel was closed under it (the connection moved to a new
    // leader, or the curator shut down); the caller's own abort is checked before this.
    // The chaos run found a node that took it for a refusal, and gave up on its cluster.
    (code === status.UNAVAILABLE ||
      code === status.DEADLINE_EXCEEDED ||
      code === status.UNIMPLEMENTED ||
      code === status.CANCELLED) &&
    !tlsFailure.test(details(e))
  );
}

/**
 * How long one attempt of an enrolment call waits for the leader's answer
 * before the leader is given up as unresponsive and the call is retried.
 * A curator may name a leader that is gone: after a power cut of the whole
 * cluster, the election key of the last leader outlives its process until
 * its lease expires, and the curators name it until then. A machine that is
 * gone drops the packets sent to it rather than refusing them, and grpc-js
 * sets no timeout on connecting: a call without a deadline waited until the
 * kernel gave the TCP connection up (over two minutes), and a consensus
 * member's JoinNode after a cold start with one member's machine gone waited
 * that long on it (e2e ha-cold).
 */
export const enrolmentAnswerTimeoutMs = 10_000;

/** Options of {@link callCluster}. */
export interface CallClusterOptions {
  /** Called with each failure that means the cluster is unreachable, before the retry. */
  onUnreachable?: (e: unknown) => void;
  /** How long each attempt waits for the leader's answer; default {@link enrolmentAnswerTimeoutMs}. */
  answerTimeoutMs?: number;
}

/**
 * Runs `call` on the cluster's leader; retries with backoff while the cluster
 * is unreachable (calling `onUnreachable` each time), and turns every other
 * failure into a typed error naming `what`. A leader that does not answer an
 * attempt within `answerTimeoutMs` is given up as unresponsive (the next
 * attempt looks for the leader again, waiting past answers that still name
 * it), and the attempt counts as the cluster being unreachable.
 */
export async function callCluster<T>(
  ctx: RunContext,
  connection: CuratorConnection,
  what: string,
  call: (leader: LeaderClients) => Promise<T>,
  opts: CallClusterOptions = {},
): Promise<T> {
  const answerTimeoutMs = opts.answerTimeoutMs ?? enrolmentAnswerTimeoutMs;
  const attempt = (leader: LeaderClients) =>
    answeredInTime(connection, leader, what, call, answerTimeoutMs, ctx.signal);
  let delay = 250;
  for (;;) {
    try {
      return await connection.call(attempt, { timeoutMs: 10_000, signal: ctx.signal });
    } catch (e) {
      ctx.signal.throwIfAborted();
      if (!isUnreachable(e)) throw classify(e, what);
      opts.onUnreachable?.(e);
      ctx.logger.warn(`${what}: cluster unreachable (${details(e)}); retrying in ${delay} ms`);
      await ctx.sleep(delay);
      delay = Math.min(delay * 2, 5_000);
    }
  }
}

/**
 * `call(leader)`, or EnrolmentAnswerTimeoutError after `timeoutMs` on the
 * monotonic clock (a grpc-js deadline is a wall-clock time), when `leader`
 * is given up as unresponsive: its connection is closed, which ends the
 * call still waiting on it.
 */
async function answeredInTime<T>(
  connection: CuratorConnection,
  leader: LeaderClients,
  what: string,
  call: (leader: LeaderClients) => Promise<T>,
  timeoutMs: number,
  signal: AbortSignal,
): Promise<T> {
  const deadline = answerDeadline(
    timeoutMs,
    () => new EnrolmentAnswerTimeoutError(what, leader.endpoint.nodeId, timeoutMs),
    signal,
  );
  try {
    return await abortable(call(leader), deadline.signal);
  } catch (e) {
    if (deadline.signal.aborted && !signal.aborted) {
      connection.leaderUnresponsive(leader, deadline.signal.reason);
    }
    throw e;
  } finally {
    deadline.clear();
  }
}

function classify(e: unknown, what: string): Error {
  if (tlsFailure.test(details(e))) {
    return new ClusterCaMismatchError(
      `${what}: the cluster's curators presented a certificate that the cluster CA of this node does not verify (${details(e)}): the CA certificate is wrong or forged`,
      { cause: e },
    );
  }
  const code = (e as Partial<ServiceError>)?.code;
  if (code !== undefined) {
    return new ClusterRefusedError(`${what}: the cluster refused: ${status[code]}: ${details(e)}`, {
      cause: e,
    });
  }
  return e instanceof Error ? e : new Error(String(e));
}

/** Whether `e` is a gRPC error with `code`. */
export function hasCode(e: unknown, code: status): boolean {
  return (e as Partial<ServiceError>)?.code === code;
}
