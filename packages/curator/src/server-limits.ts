/**
 * Limits every gRPC server of the node core (the curator's listener, the
 * node's Debug service) is created with: a client can make a server hold
 * only so much of its memory, whatever it sends.
 *
 * - Requests are small (the largest, a RegisterNode or UpdateNodeLabels with
 *   128 labels of the longest keys and values, is about 50 KiB), so anything
 *   above {@link maxRequestBytes} is refused by grpc-js before it is decoded
 *   (RESOURCE_EXHAUSTED).
 * - A connection may have at most {@link maxConcurrentStreamsPerConnection}
 *   calls open at once (HTTP/2 SETTINGS_MAX_CONCURRENT_STREAMS): a node keeps
 *   a handful (watches, heartbeat), an operator's client a few more.
 * - Streams anyone may open without a certificate (CuratorLocal's
 *   GetCurrentLeader) are capped further, per connection and per server:
 *   {@link maxLeaderStreamsPerConnection}, {@link maxLeaderStreams}; the
 *   owner's node watches (Management.WatchNodes) too, as each holds a copy
 *   of the node records: {@link maxNodeWatchStreamsPerConnection},
 *   {@link maxNodeWatchStreams}, and their watches of the consensus:
 *   {@link maxConsensusWatchStreamsPerConnection},
 *   {@link maxConsensusWatchStreams}.
 *
 * What a server answers with is bounded too: error messages quote client
 * values cut short (bounded-text.ts).
 */
import type { ServerOptions } from "@grpc/grpc-js";

/** Largest request message a server accepts, in bytes. */
export const maxRequestBytes = 256 * 1024;

/** Calls one connection may have open at once. */
export const maxConcurrentStreamsPerConnection = 100;

/**
 * GetCurrentLeader streams one connection may have open at once. A client
 * asks with one short stream (CuratorConnection cancels it at the first
 * answer), but grpc-js shares one connection among all clients of a process
 * with the same target and credentials, so several components of one node
 * may ask at once; 16 leaves them room while one connection cannot take
 * much of {@link maxLeaderStreams}.
 */
export const maxLeaderStreamsPerConnection = 16;

/**
 * GetCurrentLeader streams a server may have open at once, from everyone.
 * After a leader fails, every node of the cluster holds one open at a
 * surviving curator until the new leader is named (up to the election
 * lease, 10 s; CuratorConnection's askLeader): 10,000 nodes put about 5,000
 * on each of two survivors. One open stream costs the server about 7 KiB of
 * heap (measured: 35 MB for 5,000), so this caps them at about 56 MiB.
 * Past it, callers get RESOURCE_EXHAUSTED and try another curator (at 1,024,
 * 5,000 simulated nodes were refused that way through a failover, and part
 * of them gave up the search).
 */
export const maxLeaderStreams = 8192;

/**
 * Management.WatchNodes streams one connection may have open at once. The
 * owner's tools keep one each (metroctl observe); a few spare ones cover
 * tools run side by side over one shared connection.
 */
export const maxNodeWatchStreamsPerConnection = 8;

/**
 * Management.WatchNodes streams a leader may have open at once. Each keeps
 * the records it sent in memory (about a KiB per node: a MiB per stream on a
 * 1,000-node cluster), so this caps them at about 32 MiB there; only the
 * owner can open them.
 */
export const maxNodeWatchStreams = 32;

/**
 * Management.WatchClusterConsensus streams one connection may have open at
 * once: as for node watches, one per owner tool, a few spare.
 */
export const maxConsensusWatchStreamsPerConnection = 8;

/**
 * Management.WatchClusterConsensus streams a leader may have open at once.
 * They share one reading of the membership (management-consensus.ts) and
 * each holds only the last message it sent; only the owner opens them.
 */
export const maxConsensusWatchStreams = 64;

/** The grpc-js server options that enforce the limits above. */
export function serverLimits(): ServerOptions {
  return {
    "grpc.max_receive_message_length": maxRequestBytes,
    "grpc.max_concurrent_streams": maxConcurrentStreamsPerConnection,
  };
}
