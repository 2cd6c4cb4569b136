/**
 * Join: a node that belongs to a cluster comes back (every boot after its
 * enrolment). It authenticates with its join key, gets its cluster unlock
 * key (CUK) from the cluster through JoinNode, mounts its data and hands its
 * credentials to the roleserver.
 *
 * JoinNode is retried forever while the cluster is unreachable (state SPLIT
 * meanwhile). A consensus member keeps its CUK sealed: it mounts at once and
 * starts its own control plane, since when the whole cluster was powered off
 * no curator can answer before the consensus members are back; it turns HOME
 * once the cluster answers its JoinNode.
 */
import { status } from "@grpc/grpc-js";
import { unaryCall } from "@metropolis/curator";
import { createEphemeralCertificate } from "@metropolis/pki";
import { common, type curator, type priv, protocolVersion } from "@metropolis/proto";
import { loadCredentials, type NodeCredentials } from "@metropolis/roleserve";
import { logProgress } from "@metropolis/supervisor/node-progress";
import { callCluster, dialWithEphemeral, directoryEndpoints, hasCode } from "./cluster-dial";
import type { EnrolmentEnv } from "./enrolment-env";
import { ClusterRefusedError, EnrolmentError } from "./errors";
import { dataPolicyOf } from "./storage-policy";

export async function joinCluster(
  env: EnrolmentEnv,
  sealed: priv.SealedConfiguration,
): Promise<NodeCredentials> {
  const { ctx, storage } = env;
  const directoryFile = storage.esp.metropolis.clusterDirectory;
  if (sealed.clusterCa.length === 0) {
    throw new EnrolmentError(
      "the sealed configuration has no cluster CA: this node's bootstrap never finished; wipe the node and bootstrap again",
    );
  }
  if (!(await directoryFile.exists())) {
    throw new EnrolmentError(
      `the node is sealed into a cluster, but its cluster directory ${directoryFile.fullPath} is missing: it cannot find the cluster`,
    );
  }
  const directory = await directoryFile.read();
  env.setState(common.ClusterState.SPLIT);
  const connection = dialWithEphemeral(
    directoryEndpoints(directory, env.curatorPort),
    sealed.clusterCa,
    await createEphemeralCertificate(sealed.joinKey),
    sealed.joinKey,
  );
  const joinNode = () =>
    callCluster(ctx, connection, "JoinNode", (leader) =>
      unaryCall<curator.JoinNodeRequest, curator.JoinNodeResponse>(
        leader.curator.joinNode.bind(leader.curator),
        { protocolVersion },
      ),
    ).catch((e: unknown) => {
      // The cluster no longer takes this node back: its join key is unknown
      // (deleted), it is no longer UP (decommissioned), or it speaks a wire
      // protocol the curators do not serve (FAILED_PRECONDITION naming both). Any other refusal
      // (a curator's internal error) ends this run, not the node's membership.
      if (
        e instanceof ClusterRefusedError &&
        (hasCode(e.cause, status.PERMISSION_DENIED) || hasCode(e.cause, status.FAILED_PRECONDITION))
      )
        env.setState(common.ClusterState.DISOWNING);
      throw e;
    });
  try {
    const local = sealed.clusterUnlockKey.length > 0;
    if (local)
      ctx.logger.info("consensus member: mounting data with the sealed cluster unlock key");
    const clusterUnlockKey = local ? sealed.clusterUnlockKey : (await joinNode()).clusterUnlockKey;
    await storage.data.mountExisting({
      policy: dataPolicyOf(sealed.storagePolicy),
      nodeUnlockKey: sealed.nodeUnlockKey,
      clusterUnlockKey,
    });
    const credentials = await loadCredentials(storage.data.node.credentials);
    env.roleserver.provideJoinData(credentials, directory, { sealed, clusterUnlockKey });
    if (local) {
      env.setState(common.ClusterState.SPLIT, credentials);
      const answer = await joinNode();
      if (!answer.clusterUnlockKey.equals(clusterUnlockKey)) {
        ctx.logger.warn("JoinNode returned a cluster unlock key other than the sealed one");
      }
    }
    logProgress(ctx.logger, `rejoined the cluster as ${credentials.nodeId}`, {
      event: "cluster.enrolled",
      nodeId: credentials.nodeId,
      flow: "rejoin",
    });
    return credentials;
  } finally {
    connection.close();
  }
}
