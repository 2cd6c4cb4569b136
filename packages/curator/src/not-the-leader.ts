/**
 * The answer a curator gives to a leader-only call it cannot serve: a
 * follower, or a leader whose lease deadline passed (lease-deadline.ts).
 * UNAVAILABLE, never UNIMPLEMENTED: gRPC clients take UNIMPLEMENTED for "this
 * method does not exist", while this is "ask the leader" — which clients do
 * on UNAVAILABLE (curator-client.ts, cluster-dial.ts), asking any curator's
 * CuratorLocal.GetCurrentLeader. When this curator knows the leader, the
 * answer names it in its details and in trailing metadata
 * ({@link leaderNodeMetadataKey}, {@link leaderAddressMetadataKey}), so a
 * client may go there directly.
 */
import { Metadata, status } from "@grpc/grpc-js";
import type { CallRefusal } from "./call-router";
import type { CuratorEndpoint } from "./leadership";

/** Trailing metadata naming the leader's node ID in a "not the leader" answer. */
export const leaderNodeMetadataKey = "metropolis-leader-node";
/** Trailing metadata naming the leader's `host:port` in a "not the leader" answer. */
export const leaderAddressMetadataKey = "metropolis-leader-address";

/** The beginning of a "not the leader" answer's details (see {@link notTheLeader}). */
const notTheLeaderPrefix = "not the leader: ";

/**
 * The refusal of a call of `path` by a curator that does not lead, naming
 * `leader` when it is known (and is not this curator itself) and saying why
 * (`why`, e.g. "this curator follows").
 */
export function notTheLeader(
  path: string,
  why: string,
  leader: CuratorEndpoint | undefined,
): CallRefusal {
  const metadata = new Metadata();
  let hint = "the leader is not known here; ask another curator";
  if (leader) {
    const address = `${leader.host}:${leader.port}`;
    metadata.set(leaderNodeMetadataKey, leader.nodeId);
    metadata.set(leaderAddressMetadataKey, address);
    hint = `the leader is ${leader.nodeId} at ${address}`;
  }
  return {
    code: status.UNAVAILABLE,
    details: `${notTheLeaderPrefix}${why}; ${hint} (${path} is served by the leader only)`,
    metadata,
  };
}

/**
 * What a client reads off a call's failure that is a curator's "not the
 * leader" answer: the leader it names (its trailing metadata), when it
 * names one. Undefined for any other failure. A stream's failure may come
 * wrapped (roleserve's CuratorStreamError keeps the gRPC error as its
 * `cause`): the causes are looked through, a few levels deep.
 */
export function notTheLeaderAnswer(
  error: unknown,
): { leader: CuratorEndpoint | undefined } | undefined {
  let e: unknown = error;
  for (let depth = 0; depth < 4 && typeof e === "object" && e !== null; depth++) {
    const details = "details" in e ? e.details : undefined;
    const code = "code" in e ? e.code : undefined;
    if (
      code === status.UNAVAILABLE &&
      typeof details === "string" &&
      details.startsWith(notTheLeaderPrefix)
    ) {
      const metadata = "metadata" in e ? e.metadata : undefined;
      return { leader: metadata instanceof Metadata ? leaderOf(metadata) : undefined };
    }
    e = "cause" in e ? e.cause : undefined;
  }
  return undefined;
}

/** The leader named by a "not the leader" answer's trailing metadata, if both keys are there. */
function leaderOf(metadata: Metadata): CuratorEndpoint | undefined {
  const [nodeId] = metadata.get(leaderNodeMetadataKey);
  const [address] = metadata.get(leaderAddressMetadataKey);
  if (typeof nodeId !== "string" || typeof address !== "string") return undefined;
  // `host:port`, the host an IPv4 or IPv6 address (the port after the last colon).
  const colon = address.lastIndexOf(":");
  const port = Number(address.slice(colon + 1));
  const host = address.slice(0, colon).replace(/^\[(.*)\]$/, "$1");
  if (colon < 1 || !Number.isInteger(port)) return undefined;
  return { nodeId, host, port };
}
