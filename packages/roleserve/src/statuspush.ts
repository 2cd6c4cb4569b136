/**
 * The status push worker: tells the cluster how to reach this node. Its
 * NodeStatus (external address, the port of the curator it runs if any,
 * software version, boot ID) is what other nodes and clients dial and what
 * the owner sees; in particular a node that starts serving a curator must
 * say so, or nobody finds it.
 *
 * It pushes a status whenever what it would report changes, and only then:
 * every push is an etcd write on the curator leader. A failed push fails the
 * worker; its restart pushes again, since it cannot know whether the failed
 * push took effect.
 */
import { combine } from "@metropolis/event";
import { unaryCall } from "@metropolis/curator";
import { common, type curator, protocolVersion } from "@metropolis/proto";
import type { Runnable } from "@metropolis/supervisor";
import { logProgress } from "@metropolis/supervisor/node-progress";
import { callCurator } from "./curator-calls";
import type { LocalControlPlane, RoleserveValues } from "./values";

export interface StatusPushOptions {
  /** The IP address at which other nodes reach this node. */
  address: string;
  /** Version of the node software. */
  version: string;
  /** Random identifier of this boot of the node. */
  bootId: string;
}

/** The status this node reports, without its timestamp. */
export function nodeStatus(
  opts: StatusPushOptions,
  controlPlane: LocalControlPlane | undefined,
): common.NodeStatus {
  return {
    externalAddress: opts.address,
    runningCurator: controlPlane ? { port: controlPlane.curatorPort } : undefined,
    version: opts.version,
    bootId: opts.bootId,
    timestamp: undefined,
    protocolVersion,
  };
}

/**
 * The status push worker: once `values.curatorConnection` and
 * `values.localControlPlane` are known (the control plane worker sets the
 * latter, to undefined when it runs none), calls UpdateNodeStatus with the
 * node's status, and again whenever it changes. Healthy after the first
 * successful push; fails when a push fails.
 */
export function statusPushWorker(values: RoleserveValues, opts: StatusPushOptions): Runnable {
  return async (ctx) => {
    const inputs = combine({
      connection: values.curatorConnection,
      controlPlane: values.localControlPlane,
    }).watch();
    // What the curator holds, as far as this run knows: compared as encoded
    // bytes without the timestamp, which differs on every push.
    let pushed: Buffer | undefined;
    let healthy = false;
    try {
      for (;;) {
        const { connection, controlPlane } = await inputs.get({ signal: ctx.signal });
        const status = nodeStatus(opts, controlPlane);
        const encoded = Buffer.from(common.NodeStatus.encode(status).finish());
        if (pushed?.equals(encoded)) {
          ctx.logger.debug("status unchanged: not pushing it again");
          continue;
        }
        const request: curator.UpdateNodeStatusRequest = {
          nodeId: connection.credentials.nodeId,
          status: { ...status, timestamp: new Date() },
        };
        await callCurator(
          connection.connection,
          (leader) => unaryCall(leader.curator.updateNodeStatus.bind(leader.curator), request),
          ctx.signal,
        );
        pushed = encoded;
        const curatorPort = status.runningCurator?.port ?? null;
        logProgress(
          ctx.logger,
          `pushed status: address ${status.externalAddress}, ${
            curatorPort === null ? "no curator" : `curator on port ${curatorPort}`
          }, version ${status.version}`,
          { event: "status.pushed", address: status.externalAddress, curatorPort },
        );
        if (!healthy) {
          healthy = true;
          ctx.healthy();
        }
      }
    } catch (e) {
      if (ctx.signal.aborted) return;
      throw e;
    } finally {
      inputs.close();
    }
  };
}
