/**
 * Register: this node joins an existing cluster for the first time. It
 * proves nothing yet but the ticket: it registers with a self-signed
 * certificate, sets up its storage with the policy the cluster asks for, and
 * commits every `commitIntervalMs` until the owner approves it (FOREIGN
 * until then; TRUSTED once approved). Only then is anything sealed.
 */
import { status } from "@grpc/grpc-js";
import { unaryCall } from "@metropolis/curator";
import {
  createEphemeralCertificate,
  generateKeyPair,
  nodeIdFromPublicKey,
  verifyCertificate,
} from "@metropolis/pki";
import { type api, common, type curator, priv, protocolVersion } from "@metropolis/proto";
import { saveCredentials, type NodeCredentials } from "@metropolis/roleserve";
import { logProgress } from "@metropolis/supervisor/node-progress";
import { callCluster, dialWithEphemeral, directoryEndpoints, hasCode } from "./cluster-dial";
import type { EnrolmentEnv } from "./enrolment-env";
import { ClusterRefusedError, EnrolmentError } from "./errors";
import { writeSealedConfiguration } from "./sealed-configuration";
import { dataPolicyOf } from "./storage-policy";

export async function registerNode(
  env: EnrolmentEnv,
  params: api.NodeParameters_ClusterRegister,
): Promise<NodeCredentials> {
  const { ctx, storage } = env;
  const directory = params.clusterDirectory!;
  const node = generateKeyPair();
  const join = generateKeyPair();
  const nodeId = nodeIdFromPublicKey(node.publicKey);
  env.setState(common.ClusterState.FOREIGN);
  const connection = dialWithEphemeral(
    directoryEndpoints(directory, env.curatorPort),
    params.caCertificate,
    await createEphemeralCertificate(node.privateKey),
    node.privateKey,
  );
  try {
    logProgress(ctx.logger, `registering as ${nodeId}`, {
      event: "cluster.enrolled",
      nodeId,
      flow: "register",
    });
    const registered = await callCluster(ctx, connection, "RegisterNode", (leader) =>
      unaryCall<curator.RegisterNodeRequest, curator.RegisterNodeResponse>(
        leader.curator.registerNode.bind(leader.curator),
        {
          registerTicket: params.registerTicket,
          joinKey: join.publicKey,
          labels: params.labels,
          protocolVersion,
        },
      ),
    );
    const keys = await storage.data.mountNew(dataPolicyOf(registered.storagePolicy));
    ctx.logger.info("registered; waiting for the owner to approve this node");
    let committed: { caCertificate: Buffer; nodeCertificate: Buffer } | undefined;
    while (!committed) {
      try {
        committed = await callCluster(ctx, connection, "CommitNode", (leader) =>
          unaryCall<curator.CommitNodeRequest, curator.CommitNodeResponse>(
            leader.curator.commitNode.bind(leader.curator),
            {
              clusterUnlockKey: keys.clusterUnlockKey,
            },
          ),
        );
      } catch (e) {
        // Not approved yet: the cluster says so with PERMISSION_DENIED.
        if (!(e instanceof ClusterRefusedError && hasCode(e.cause, status.PERMISSION_DENIED)))
          throw e;
        await ctx.sleep(env.commitIntervalMs);
      }
    }
    env.setState(common.ClusterState.TRUSTED);
    if (!committed.caCertificate.equals(params.caCertificate)) {
      throw new EnrolmentError(
        "CommitNode: the cluster returned a CA certificate other than the one in the node parameters",
      );
    }
    await verifyCertificate(committed.nodeCertificate, committed.caCertificate);
    const credentials: NodeCredentials = {
      nodeId,
      privateKey: node.privateKey,
      certificate: committed.nodeCertificate,
      caCertificate: committed.caCertificate,
    };
    await saveCredentials(storage.data.node.credentials, credentials);
    await storage.esp.metropolis.clusterDirectory.write(directory);
    const sealed = priv.SealedConfiguration.fromPartial({
      nodeUnlockKey: keys.nodeUnlockKey,
      joinKey: join.privateKey,
      clusterCa: committed.caCertificate,
      storagePolicy: registered.storagePolicy,
    });
    await writeSealedConfiguration(storage, env.machineKeyPath, sealed);
    env.roleserver.provideRegisterData(credentials, directory, {
      sealed,
      clusterUnlockKey: keys.clusterUnlockKey,
    });
    return credentials;
  } finally {
    connection.close();
  }
}
