/**
 * The curator's part of restoring a cluster from a backup
 * (`metropolis-node --recover-from`), run on the restored etcd before any
 * curator serves it (consensus's restoreMember calls it): the restoring
 * node becomes the cluster's one consensus member.
 *
 * Like bootstrapping, it takes the leadership briefly (the restore revoked
 * every lease of the old cluster, so the only candidate wins at once) and
 * writes everything in one transaction guarded by it and by "the node does
 * not exist yet": the node's record (UP, consensus member and Kubernetes
 * controller), its join key, its sealed cluster unlock key and its
 * certificate, issued by the cluster CA restored from the backup. Every other
 * record stays as it was backed up, except:
 *
 * - the consensus member role is taken from every other node: the restored
 *   etcd has one member, this node, and the nodes that were members are not
 *   members of it (their etcd data belongs to the old cluster); the owner
 *   gives the role again to those that come back;
 * - the claim of this node's address by another node is released: the
 *   operator restores onto this machine, so whoever held its address is gone.
 */
import type { Namespace } from "etcd3";
import { etcdCertificateKv } from "@metropolis/consensus";
import { nodeIdFromPublicKey, type SecretSealer } from "@metropolis/pki";
import { common, priv } from "@metropolis/proto";
import { guardNewCertificate, issueNodeCertificate, nodeCertificateEntry } from "./curator-pki";
import { FailedPreconditionError } from "./errors";
import { clusterUnlockKeyKey, joinKeyKey, nodeAddressKey, nodeKey } from "./keys";
import { clusterCa } from "./leader-context";
import { campaign, type CuratorEndpoint } from "./leadership";
import { canonicalAddress } from "./node-addresses";
import { encodeNode, listNodes } from "./node-record";

/** What {@link recoverCluster} needs of the restoring node. */
export interface RecoverParams {
  /** The node's raw Ed25519 identity key. */
  readonly nodePublicKey: Uint8Array;
  /** Its join key (32 bytes). */
  readonly joinPublicKey: Uint8Array;
  /** Its cluster unlock key (32 bytes), sealed in etcd like every node's. */
  readonly clusterUnlockKey: Uint8Array;
  /** The address it serves at: its certificate's IP SAN, and the address claim released. */
  readonly address: string;
  /** Its labels. */
  readonly labels?: ReadonlyMap<string, string>;
}

/** What {@link recoverCluster} did. */
export interface RecoverResult {
  readonly nodeId: string;
  /** The node's certificate and the cluster CA's (DER). */
  readonly nodeCertificate: Buffer;
  readonly caCertificate: Buffer;
  /** Every node record as restored (this node's included), with its state. */
  readonly nodes: ReadonlyArray<{ id: string; state: string }>;
  /** The nodes that held the consensus member role in the backup, and no longer do. */
  readonly formerMembers: readonly string[];
  /** The node whose claim of this node's address was released, if any. */
  readonly addressReleasedFrom?: string;
}

/** Makes the restoring node the restored cluster's consensus member; see the module comment. */
export async function recoverCluster(
  curator: { readonly kv: Namespace; readonly secrets: SecretSealer },
  self: CuratorEndpoint,
  params: RecoverParams,
  leaderTtlSeconds = 10,
): Promise<RecoverResult> {
  const { kv, secrets } = curator;
  const nodeId = nodeIdFromPublicKey(params.nodePublicKey);
  const ca = clusterCa(secrets);
  const existingCa = await ca.load(etcdCertificateKv(kv));
  if (existingCa === null) {
    throw new FailedPreconditionError(
      "the restored data has no cluster CA: it is not a cluster's backup",
    );
  }
  const authority = await ca.authority(etcdCertificateKv(kv));
  const candidacy = await campaign(kv, self, leaderTtlSeconds);
  try {
    const leadership = candidacy.leadership();
    const nodes = await listNodes(kv);
    if (nodes.some(({ id }) => id === nodeId)) {
      throw new FailedPreconditionError(`node ${nodeId} is in the backup already`);
    }
    const ipAddresses = [params.address];
    const certificate = await issueNodeCertificate(authority, params.nodePublicKey, ipAddresses);
    const entry = nodeCertificateEntry(ca, nodeId, params.nodePublicKey, ipAddresses);
    const node = priv.Node.fromPartial({
      publicKey: Buffer.from(params.nodePublicKey),
      joinKey: Buffer.from(params.joinPublicKey),
      state: common.NodeState.UP,
      roles: {
        consensusMember: common.NodeRoles_ConsensusMember.create(),
        kubernetesController: {},
      },
      labels: new Map(params.labels),
    });
    const txn = leadership.txn().and(nodeKey(nodeId), "Create", "==", 0);
    const putCertificate = guardNewCertificate(kv, txn, entry, certificate);
    const formerMembers: string[] = [];
    const puts = [
      kv.put(nodeKey(nodeId)).value(encodeNode(node)),
      kv.put(joinKeyKey(params.joinPublicKey)).value(Buffer.from(nodeId)),
      kv
        .put(clusterUnlockKeyKey(nodeId))
        .value(secrets.seal(clusterUnlockKeyKey(nodeId), params.clusterUnlockKey)),
      putCertificate,
    ];
    for (const other of nodes) {
      if (other.node.roles?.consensusMember === undefined) continue;
      formerMembers.push(other.id);
      txn.and(nodeKey(other.id), "Mod", "==", other.modRevision);
      const roles = { ...other.node.roles, consensusMember: undefined };
      puts.push(kv.put(nodeKey(other.id)).value(encodeNode({ ...other.node, roles })));
    }
    const addressKey = nodeAddressKey(canonicalAddress(params.address));
    const holder = (await kv.get(addressKey).exec()).kvs[0];
    const addressReleasedFrom = holder?.value.toString();
    if (holder) txn.and(addressKey, "Mod", "==", holder.mod_revision);
    txn.then(...puts, ...(holder ? [kv.delete().key(addressKey)] : []));
    if (!(await leadership.commit(txn))) {
      throw new FailedPreconditionError(
        "the restored cluster changed while it was being recovered (nobody else should write to it)",
      );
    }
    return {
      nodeId,
      nodeCertificate: certificate.der,
      caCertificate: authority.certificate.der,
      nodes: [
        ...nodes.map(({ id, node: n }) => ({ id, state: common.nodeStateToJSON(n.state) })),
        { id: nodeId, state: common.nodeStateToJSON(common.NodeState.UP) },
      ],
      formerMembers,
      addressReleasedFrom,
    };
  } finally {
    await candidacy.resign();
  }
}
