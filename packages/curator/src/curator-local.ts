/**
 * CuratorLocal: served by every curator, leader or follower, to anyone (no
 * client certificate needed): where the leader is, and the cluster CA. It is
 * how clients find the leader through any curator they know.
 *
 * Since anyone may open GetCurrentLeader streams, they are bounded
 * (bounded-streams.ts): at most {@link maxLeaderStreamsPerConnection} per
 * connection and {@link maxLeaderStreams} per server, RESOURCE_EXHAUSTED
 * beyond; a cancelled one releases all it held.
 */
import { decodePem } from "@metropolis/pki";
import { curator } from "@metropolis/proto";
import type { Watchable } from "@metropolis/event";
import type { Logger } from "@metropolis/supervisor";
import { BoundedStreams } from "./bounded-streams";
import { serverStream, unary } from "./grpc-handlers";
import type { CuratorEndpoint } from "./leadership";
import type { HasAuthContext } from "./identity";
import { maxLeaderStreams, maxLeaderStreamsPerConnection } from "./server-limits";

export interface LocalContext {
  /** This curator's node. */
  nodeId: string;
  /** The current leader as this curator sees it; undefined while unknown. */
  leader: Watchable<CuratorEndpoint | undefined>;
  /** The cluster CA certificate (PEM). */
  caCertificate: string;
  logger: Logger;
  /** Ends open streams when the listener stops, so that it can stop at once. */
  signal: AbortSignal;
  /**
   * The GetCurrentLeader streams. Default: capped at
   * {@link maxLeaderStreamsPerConnection} and {@link maxLeaderStreams},
   * ended by `signal`. A test passes its own to watch them or to set other caps.
   */
  leaderStreams?: BoundedStreams;
  /**
   * Told of every GetCurrentLeader caller: a curator learns who its callers
   * are while it follows (identity.ts, IdentityCache.learn), since the nodes
   * that ask it who leads after a leader failed are the nodes that call it
   * once it leads.
   */
  onCaller?: (call: HasAuthContext) => void;
}

export function curatorLocalServer(local: LocalContext): curator.CuratorLocalServer {
  const caDer = decodePem(local.caCertificate, "CERTIFICATE");
  const streams =
    local.leaderStreams ??
    new BoundedStreams(
      "GetCurrentLeader",
      { perConnection: maxLeaderStreamsPerConnection, total: maxLeaderStreams },
      local.signal,
    );
  return {
    getCurrentLeader: serverStream("GetCurrentLeader", local.logger, (call) =>
      streams.serve(call, async (ended) => {
        local.onCaller?.(call);
        const watcher = local.leader.watch();
        try {
          for (;;) {
            const leader = await watcher.get({ signal: ended });
            if (leader === undefined) continue; // not known yet: nothing to tell
            call.write({
              leaderNodeId: leader.nodeId,
              leaderHost: leader.host,
              leaderPort: leader.port,
              thisNodeId: local.nodeId,
            });
          }
        } catch (e) {
          if (!ended.aborted) throw e;
        } finally {
          watcher.close();
        }
      }),
    ),
    getCaCertificate: unary("GetCACertificate", local.logger, async () => ({
      caCertificate: caDer,
    })),
  };
}
