/**
 * A node's own certificate, read from its disk, and calls to a curator made
 * with it: for the e2e tests that check a node's certificate is refused once
 * the owner deleted or decommissioned the node (its certificate revoked).
 */
import { join } from "node:path";
import { Metadata, type ServiceError } from "@grpc/grpc-js";
import { readSealedConfiguration } from "@metropolis/cluster";
import { curatorClientCredentials } from "@metropolis/curator";
import { placeNodeRoot, type DataPolicy } from "@metropolis/localstorage";
import { common, curator } from "@metropolis/proto";
import { credentialsPem, loadCredentials } from "@metropolis/roleserve";
import type { ClusterNode } from "../local-cluster/src/cluster-launcher";
import { curatorPort, E2eHarnessError } from "./e2e-cluster";

/** A node's TLS credentials (PEM), as it presents them to curators. */
export interface NodeTls {
  cert: string;
  key: string;
  ca: string;
}

const dataPolicies: ReadonlyMap<common.StoragePolicy, DataPolicy> = new Map([
  [common.StoragePolicy.INSECURE, "insecure"],
  [common.StoragePolicy.ENCRYPTED, "encrypted"],
  [common.StoragePolicy.AUTHENTICATED_ENCRYPTED, "authenticated-encrypted"],
]);

/**
 * Node `node`'s own certificate and key, read from its disk as the node
 * reads them at start: its sealed configuration unsealed with its machine
 * key, then its data directory mounted with the sealed unlock keys. Only a
 * consensus member seals the cluster unlock key, so this is read while the
 * node is one.
 */
export async function nodeTls(node: ClusterNode): Promise<NodeTls> {
  const storage = placeNodeRoot(node.root);
  const sealed = await readSealedConfiguration(storage, join(node.root, "machine.key"));
  if (!sealed) throw new E2eHarnessError(`${node.name} has no sealed configuration`);
  if (sealed.clusterUnlockKey.length === 0) {
    throw new E2eHarnessError(`${node.name} seals no cluster unlock key: not a consensus member`);
  }
  const policy = dataPolicies.get(sealed.storagePolicy);
  if (!policy) throw new E2eHarnessError(`${node.name}: unknown storage policy`);
  await storage.data.mountExisting({
    policy,
    nodeUnlockKey: sealed.nodeUnlockKey,
    clusterUnlockKey: sealed.clusterUnlockKey,
  });
  try {
    const credentials = await loadCredentials(storage.data.node.credentials);
    if (credentials.nodeId !== node.id) {
      throw new E2eHarnessError(`${node.name}'s credentials are ${credentials.nodeId}'s`);
    }
    return credentialsPem(credentials);
  } finally {
    storage.data.unmount();
  }
}

/**
 * Curator.GetConsensusStatus on the curator of `at`, as the node whose
 * credentials are `tls`: resolves with "answered", or the gRPC status code
 * and details of the refusal.
 */
export async function consensusStatusAs(
  tls: NodeTls,
  at: ClusterNode,
): Promise<{ code: number; details: string } | "answered"> {
  const client = new curator.CuratorClient(
    `${at.address}:${curatorPort}`,
    curatorClientCredentials(tls.ca, tls, { nodeId: at.id }),
  );
  try {
    await new Promise<void>((resolve, reject) =>
      client.getConsensusStatus(
        {},
        new Metadata(),
        { deadline: Date.now() + 5000 },
        (e: ServiceError | null) => (e ? reject(e) : resolve()),
      ),
    );
    return "answered";
  } catch (e) {
    if (typeof e === "object" && e !== null && "code" in e && typeof e.code === "number") {
      return { code: e.code, details: "details" in e ? String(e.details) : "" };
    }
    throw e;
  } finally {
    client.close();
  }
}
