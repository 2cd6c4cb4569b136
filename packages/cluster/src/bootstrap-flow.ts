/**
 * Bootstrap: this node creates a new cluster. Everything local happens here
 * (storage, keys, directory, sealed configuration); the cluster itself (etcd,
 * CA, first records) is created by the roleserver's control plane, which this
 * flow then waits for.
 */
import { generateKeyPair, nodeIdFromPublicKey } from "@metropolis/pki";
import { api, common, priv } from "@metropolis/proto";
import { waitFor } from "@metropolis/event";
import { logProgress } from "@metropolis/supervisor/node-progress";
import type { NodeCredentials } from "@metropolis/roleserve";
import type { EnrolmentEnv } from "./enrolment-env";
import { writeSealedConfiguration } from "./sealed-configuration";
import { dataPolicyOf } from "./storage-policy";
import { EnrolmentError } from "./errors";
import { validateClusterConfiguration } from "@metropolis/curator";

/** The storage policy of a new cluster whose parameters name none. */
const defaultStoragePolicy = common.StoragePolicy.ENCRYPTED;

export async function bootstrapCluster(
  env: EnrolmentEnv,
  params: api.NodeParameters_ClusterBootstrap,
): Promise<NodeCredentials> {
  const { ctx, storage } = env;
  // The initial configuration's policy, checked before anything is formatted:
  // this node's data partition is the first to follow it.
  const requested = params.initialClusterConfiguration?.storagePolicy;
  const bootstrapStoragePolicy =
    requested === undefined || requested === common.StoragePolicy.UNSPECIFIED
      ? defaultStoragePolicy
      : requested;
  if (params.initialClusterConfiguration) {
    try {
      validateClusterConfiguration(
        common.ClusterConfiguration.fromPartial({
          ...params.initialClusterConfiguration,
          storagePolicy: bootstrapStoragePolicy,
        }),
        "initial_cluster_configuration",
      );
    } catch (e) {
      throw new EnrolmentError(
        `the bootstrap parameters' ${e instanceof Error ? e.message : String(e)}`,
      );
    }
  }
  const keys = await storage.data.mountNew(dataPolicyOf(bootstrapStoragePolicy));
  const node = generateKeyPair();
  const join = generateKeyPair();
  const nodeId = nodeIdFromPublicKey(node.publicKey);
  logProgress(ctx.logger, `bootstrapping a new cluster as ${nodeId}`, {
    event: "cluster.enrolled",
    nodeId,
    flow: "bootstrap",
  });
  await storage.esp.metropolis.clusterDirectory.write({
    nodes: [
      {
        id: nodeId,
        publicKey: node.publicKey,
        addresses: [{ host: env.address }],
        consensusMember: true,
      },
    ],
  });
  // The first node is a consensus member from the start, so its sealed
  // configuration keeps the cluster unlock key (see priv.SealedConfiguration).
  const sealed = priv.SealedConfiguration.fromPartial({
    nodeUnlockKey: keys.nodeUnlockKey,
    joinKey: join.privateKey,
    storagePolicy: bootstrapStoragePolicy,
    clusterUnlockKey: keys.clusterUnlockKey,
  });
  await writeSealedConfiguration(storage, env.machineKeyPath, sealed);
  env.roleserver.provideBootstrapData(
    {
      nodePrivateKey: node.privateKey,
      joinPublicKey: join.publicKey,
      ownerPublicKey: params.ownerPublicKey,
      labels: params.labels,
      configuration: params.initialClusterConfiguration,
    },
    { sealed, clusterUnlockKey: keys.clusterUnlockKey },
  );
  const { credentials } = await waitFor(
    env.roleserver.values.curatorConnection,
    () => true,
    ctx.signal,
  );
  return credentials;
}
