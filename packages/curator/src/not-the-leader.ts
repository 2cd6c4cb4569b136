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
    details: `not the leader: ${why}; ${hint} (${path} is served by the leader only)`,
    metadata,
  };
}
