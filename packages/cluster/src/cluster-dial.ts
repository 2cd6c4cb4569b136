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
import type { RunContext } from "@metropolis/supervisor";
import { ClusterCaMismatchError, ClusterRefusedError, EnrolmentError } from "./errors";

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
 * Runs `call` on the cluster's leader; retries with backoff while the cluster
 * is unreachable (calling `onUnreachable` each time), and turns every other
 * failure into a typed error naming `what`. `accept` may claim an error as a
 * result instead (e.g. "not approved yet").
 */
export async function callCluster<T>(
  ctx: RunContext,
  connection: CuratorConnection,
  what: string,
  call: (leader: LeaderClients) => Promise<T>,
  onUnreachable: (e: unknown) => void = () => undefined,
): Promise<T> {
  let delay = 250;
  for (;;) {
    try {
      return await connection.call(call, { timeoutMs: 10_000, signal: ctx.signal });
    } catch (e) {
      ctx.signal.throwIfAborted();
      if (!isUnreachable(e)) throw classify(e, what);
      onUnreachable(e);
      ctx.logger.warn(`${what}: cluster unreachable (${details(e)}); retrying in ${delay} ms`);
      await ctx.sleep(delay);
      delay = Math.min(delay * 2, 5_000);
    }
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
