/**
 * The last step of bootstrapping a cluster, run by the first node once its
 * curator leads: create the cluster CA, issue the node's own certificate, and
 * record the node (UP, consensus member and Kubernetes controller), its join
 * key, the initial owner's key and the cluster configuration.
 *
 * All records go in one transaction guarded by leadership and by "none of
 * them exists yet", so a cluster is bootstrapped exactly once and never half.
 * A retry with the same inputs (the node crashed after the commit but before
 * it learned the outcome) finds everything in place and returns the same
 * certificates; different inputs are refused, since a cluster cannot be
 * bootstrapped twice.
 *
 * The secrets among the records (the node's cluster unlock key, the CA's
 * private key) are sealed with the cluster secrets keyring; a retry compares
 * the unlock key it finds by its opened value, since two seals of the same
 * key never look alike.
 */
import type { Namespace } from "etcd3";
import { common, priv } from "@metropolis/proto";
import { etcdCertificateKv, readAtOneRevision } from "@metropolis/consensus";
import { nodeIdFromPublicKey, type ParsedCertificate, type SecretSealer } from "@metropolis/pki";
import { FailedPreconditionError, InvalidArgumentError } from "./errors";
import { validateClusterConfiguration } from "./management-configuration";
import {
  clusterConfigurationKey,
  clusterUnlockKeyKey,
  initialOwnerKey,
  joinKeyKey,
  nodeKey,
} from "./keys";
import { clusterCa } from "./leader-context";
import { checkLabelCount, validateLabels } from "./labels";
import { campaign, type CuratorEndpoint, type Leadership } from "./leadership";
import { decodeNode, encodeNode } from "./node-record";
import { guardNewCertificate, issueNodeCertificate, nodeCertificateEntry } from "./curator-pki";

/** What bootstrapping needs of the leader: its namespace, that namespace's sealer and its write guard. */
export interface BootstrapContext {
  readonly kv: Namespace;
  readonly secrets: SecretSealer;
  readonly leadership: Leadership;
}

export interface BootstrapParams {
  /** The first node's ID; checked against `nodePublicKey` when given. */
  readonly nodeId?: string;
  /** The first node's raw Ed25519 identity key (32 bytes). */
  readonly nodePublicKey: Uint8Array;
  /** The first node's join key (32 bytes), which it later uses to rejoin. */
  readonly joinPublicKey: Uint8Array;
  /** The first node's cluster unlock key (32 bytes), handed back on JoinNode. */
  readonly clusterUnlockKey: Uint8Array;
  /** The initial owner's raw Ed25519 key: AAA Escrow issues the owner certificate to its holder. */
  readonly ownerPublicKey: Uint8Array;
  /** The cluster configuration; default: storage policy ENCRYPTED. */
  readonly configuration?: common.ClusterConfiguration;
  /** IP SANs for the node certificate (addresses it serves at). */
  readonly ipAddresses?: readonly string[];
  /** The first node's labels (from its node parameters); validated like UpdateNodeLabels. */
  readonly labels?: ReadonlyMap<string, string>;
}

export interface BootstrapResult {
  readonly nodeId: string;
  /** The first node's certificate (DER), issued by the cluster CA. */
  readonly nodeCertificate: Buffer;
  /** The cluster CA certificate (DER). */
  readonly caCertificate: Buffer;
  /** False when an earlier call with the same inputs had already done everything. */
  readonly created: boolean;
}

const KEY_LENGTH = 32;

/** The default configuration: storage encrypted. */
export const defaultClusterConfiguration: common.ClusterConfiguration = {
  storagePolicy: common.StoragePolicy.ENCRYPTED,
  heartbeatTimeoutMs: 0,
};

function checkKey(name: string, key: Uint8Array): Buffer {
  if (!(key instanceof Uint8Array) || key.length !== KEY_LENGTH) {
    throw new InvalidArgumentError(
      `${name} must be ${KEY_LENGTH} bytes, got ${key?.length ?? "none"}`,
    );
  }
  return Buffer.from(key);
}

/** Creates the cluster's first records; see the module comment. */
export async function bootstrapNodeFinish(
  ctx: BootstrapContext,
  params: BootstrapParams,
): Promise<BootstrapResult> {
  const publicKey = checkKey("node public key", params.nodePublicKey);
  const joinKey = checkKey("join key", params.joinPublicKey);
  const cuk = checkKey("cluster unlock key", params.clusterUnlockKey);
  const ownerKey = checkKey("owner public key", params.ownerPublicKey);
  const nodeId = nodeIdFromPublicKey(publicKey);
  if (params.nodeId !== undefined && params.nodeId !== nodeId) {
    throw new InvalidArgumentError(
      `node ID ${params.nodeId} does not belong to the node public key (${nodeId})`,
    );
  }
  const labels = new Map(params.labels);
  validateLabels(labels);
  checkLabelCount(labels);
  const configuration = common.ClusterConfiguration.fromPartial(
    params.configuration ?? defaultClusterConfiguration,
  );
  validateClusterConfiguration(configuration, "configuration");
  const ca = clusterCa(ctx.secrets);
  const authority = await ca.authority(etcdCertificateKv(ctx.kv));
  const entry = nodeCertificateEntry(ca, nodeId, publicKey, params.ipAddresses);

  const node: priv.Node = priv.Node.fromPartial({
    publicKey,
    joinKey,
    state: common.NodeState.UP,
    roles: { consensusMember: common.NodeRoles_ConsensusMember.create(), kubernetesController: {} },
    labels,
  });
  const owner = Buffer.from(priv.InitialOwner.encode({ publicKey: ownerKey }).finish());
  const config = Buffer.from(common.ClusterConfiguration.encode(configuration).finish());
  const writes: Array<[string, Buffer]> = [
    [nodeKey(nodeId), encodeNode(node)],
    [joinKeyKey(joinKey), Buffer.from(nodeId)],
    [initialOwnerKey, owner],
    [clusterConfigurationKey, config],
    [clusterUnlockKeyKey(nodeId), ctx.secrets.seal(clusterUnlockKeyKey(nodeId), cuk)],
  ];

  const existing = await readExisting(
    ctx.kv,
    writes.map(([key]) => key),
  );
  if (existing.every((value) => value === undefined)) {
    const certificate = await issueNodeCertificate(authority, publicKey, params.ipAddresses);
    const txn = ctx.leadership.txn();
    for (const [key] of writes) txn.and(key, "Create", "==", 0);
    const putCertificate = guardNewCertificate(ctx.kv, txn, entry, certificate);
    txn.then(...writes.map(([key, value]) => ctx.kv.put(key).value(value)), putCertificate);
    if (await ctx.leadership.commit(txn)) {
      return result(nodeId, certificate, authority.certificate, true);
    }
    // A concurrent retry of ours got there first: judge what it wrote below.
  }

  const found = await readExisting(
    ctx.kv,
    writes.map(([key]) => key),
  );
  const storedCuk = found[4];
  const sameCuk =
    storedCuk !== undefined &&
    (await ctx.secrets.open(clusterUnlockKeyKey(nodeId), storedCuk)).equals(cuk);
  checkSame(nodeId, node, writes, found, sameCuk);
  const stored = await entry.load(etcdCertificateKv(ctx.kv));
  if (stored === null) {
    throw new FailedPreconditionError(
      `cluster is bootstrapped but node ${nodeId} has no certificate in the store`,
    );
  }
  return result(nodeId, stored.certificate, authority.certificate, false);
}

function result(
  nodeId: string,
  certificate: ParsedCertificate,
  ca: ParsedCertificate,
  created: boolean,
): BootstrapResult {
  return { nodeId, nodeCertificate: certificate.der, caCertificate: ca.der, created };
}

async function readExisting(kv: Namespace, keys: string[]): Promise<Array<Buffer | undefined>> {
  // One revision, so that the four reads see one state.
  const found = await readAtOneRevision(kv, keys);
  return found.map((entry) => (entry ? Buffer.from(entry.value) : undefined));
}

/**
 * Accepts an earlier bootstrap only if it recorded the same identity: node
 * key, join key, unlock key (`sameCuk`: compared opened, by the caller),
 * owner and configuration. The node record's state, roles and status may
 * have moved on since, which is not a conflict.
 */
function checkSame(
  nodeId: string,
  node: priv.Node,
  writes: Array<[string, Buffer]>,
  found: Array<Buffer | undefined>,
  sameCuk: boolean,
): void {
  const [storedNode, storedJoin, storedOwner, storedConfig] = found;
  const differs: string[] = [];
  if (storedNode === undefined) differs.push(`node ${nodeId} is missing`);
  else {
    const n = decodeNode(nodeId, storedNode);
    if (!Buffer.from(n.publicKey).equals(Buffer.from(node.publicKey)))
      differs.push("node public key");
    if (!Buffer.from(n.joinKey).equals(Buffer.from(node.joinKey))) differs.push("join key");
  }
  if (!sameCuk) differs.push("cluster unlock key");
  if (storedJoin === undefined || !storedJoin.equals(writes[1][1]))
    differs.push("join key mapping");
  if (storedOwner === undefined || !storedOwner.equals(writes[2][1])) differs.push("initial owner");
  if (storedConfig === undefined || !storedConfig.equals(writes[3][1]))
    differs.push("cluster configuration");
  if (differs.length > 0) {
    throw new FailedPreconditionError(
      `cluster is already bootstrapped differently (${differs.join(", ")}); refusing to bootstrap it again`,
    );
  }
}

/**
 * Bootstraps a cluster from its first node, before any curator runs:
 * bootstrapping is a leader's write, so this takes the leadership briefly
 * (the only candidate of a new cluster wins at once), runs
 * {@link bootstrapNodeFinish}, and leaves the election to the curators.
 * `curator` is the curator namespace's client (`client.sub("curator")`): its
 * kv and its sealer.
 */
export async function bootstrapCluster(
  curator: { readonly kv: Namespace; readonly secrets: SecretSealer },
  self: CuratorEndpoint,
  params: BootstrapParams,
  leaderTtlSeconds = 10,
): Promise<BootstrapResult> {
  const { kv, secrets } = curator;
  const candidacy = await campaign(kv, self, leaderTtlSeconds);
  try {
    return await bootstrapNodeFinish({ kv, secrets, leadership: candidacy.leadership() }, params);
  } finally {
    await candidacy.resign();
  }
}
