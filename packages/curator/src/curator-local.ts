/**
 * CuratorLocal: served by every curator, leader or follower, to anyone (no
 * client certificate needed): where the leader is, and the cluster CA. It is
 * how clients find the leader through any curator they know.
 */
import { decodePem } from "@metropolis/pki";
import { curator } from "@metropolis/proto";
import type { Watchable } from "@metropolis/event";
import type { Logger } from "winston";
import { serverStream, unary } from "./grpc-handlers";
import type { CuratorEndpoint } from "./leadership";

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
}

export function curatorLocalServer(local: LocalContext): curator.CuratorLocalServer {
  const caDer = decodePem(local.caCertificate, "CERTIFICATE");
  return {
    getCurrentLeader: serverStream("GetCurrentLeader", local.logger, async (call) => {
      const watcher = local.leader.watch();
      const stop = new AbortController();
      const onEnd = () => stop.abort();
      call.on("cancelled", onEnd);
      local.signal.addEventListener("abort", onEnd, { once: true });
      try {
        for (;;) {
          const leader = await watcher.get({ signal: stop.signal, filter: (l) => l !== undefined });
          call.write({
            leaderNodeId: leader!.nodeId,
            leaderHost: leader!.host,
            leaderPort: leader!.port,
            thisNodeId: local.nodeId,
          });
        }
      } catch (e) {
        if (!stop.signal.aborted) throw e;
      } finally {
        watcher.close();
        local.signal.removeEventListener("abort", onEnd);
      }
    }),
    getCaCertificate: unary("GetCACertificate", local.logger, async () => ({
      caCertificate: caDer,
    })),
  };
}
