/**
 * The curator benchmark's cluster: one real etcd member with a cluster
 * bootstrapped in it, as the first node would, the owner's identity, and
 * node identities for the curators the scenarios start.
 */
import { randomBytes } from "node:crypto";
import { join } from "node:path";
import { etcdCertificateKv, keyringCopyKey, unwrapKeyring } from "@metropolis/consensus";
import {
  freePort,
  runTestMember,
  testNode,
  type TestMemberMode,
} from "@metropolis/consensus/testing";
import { bootstrapCluster, clusterCa, ownerCommonName, type TlsPem } from "@metropolis/curator";
import {
  generateKeyPair,
  nodeIdFromPublicKey,
  tlsMaterial,
  type CertificateAuthority,
} from "@metropolis/pki";

/** The etcd member, the cluster CA (with its key) and the identities the benchmark acts as. */
export interface Cluster {
  /**
   * The first node's ID: the cluster's one node that is an etcd member (with
   * the consensus member role). Members a benchmark adds beside it are not
   * nodes of the cluster.
   */
  memberNodeId: string;
  authority: CertificateAuthority;
  caPem: string;
  /** The etcd member's client socket, for curators in other processes. */
  socketPath: string;
  /**
   * The cluster secrets keyring (encoded, base64), for curators in other
   * processes: they open the CA key with it. A benchmark's shortcut on a
   * throwaway cluster; a real curator runs beside its member and uses its keyring.
   */
  keyring: string;
  /** The running consensus, for curators in this process. */
  consensus: Awaited<ReturnType<typeof runTestMember>>["status"];
  owner: TlsPem;
  stop(): Promise<void>;
}

/** A curator's identity: its node ID, TLS material and where it listens. */
export interface CuratorIdentity {
  nodeId: string;
  tls: TlsPem;
  host: string;
  port: number;
}

/**
 * Starts a one-member etcd and bootstraps a cluster in it with the given
 * election lease.
 * @param settings the member's settings other than a test member's (its
 * raft timings, say) @default {}
 */
export async function startCluster(
  leaderTtlSeconds: number,
  settings: TestMemberMode = {},
): Promise<Cluster> {
  const node = await testNode("bench-curator");
  const member = await runTestMember(node, { ...settings, bootstrap: true });
  const curatorClient = member.status.client.sub("curator");
  const kv = curatorClient.kv;
  const authority = await clusterCa(curatorClient.secrets).authority(etcdCertificateKv(kv));

  const owner = generateKeyPair();
  const boot = await bootstrapCluster(
    curatorClient,
    { nodeId: node.nodeId, host: "127.0.0.1", port: 1 },
    {
      nodePublicKey: node.publicKey,
      joinPublicKey: generateKeyPair().publicKey,
      clusterUnlockKey: randomBytes(32),
      ownerPublicKey: owner.publicKey,
    },
    leaderTtlSeconds,
  );
  if (!boot.caCertificate.equals(authority.certificate.der))
    throw new Error("the curator keeps its cluster CA elsewhere than this benchmark expects");

  const ownerCertificate = await authority.issueUserCertificate(ownerCommonName, owner.publicKey);
  return {
    memberNodeId: node.nodeId,
    authority,
    caPem: authority.certificate.toPem(),
    socketPath: join(node.storage.ephemeral.consensus.fullPath, "client.sock:0"),
    keyring: await memberKeyring(member.status, node),
    consensus: member.status,
    owner: tlsMaterial({
      certificate: ownerCertificate,
      privateKey: owner.privateKey,
      ca: authority.certificate,
    }),
    stop: async () => {
      await member.harness.cleanup({ timeoutMs: 20_000 }).catch(() => undefined);
      await node.remove();
    },
  };
}

/** The member's keyring, unwrapped from its copy with the node's key. */
async function memberKeyring(
  status: Cluster["consensus"],
  node: Awaited<ReturnType<typeof testNode>>,
): Promise<string> {
  const at = keyringCopyKey(node.nodeId);
  const wrapped = await status.client.kv.get(at).buffer();
  if (wrapped === null) throw new Error(`the member has no keyring copy at ${at}`);
  return unwrapKeyring(wrapped, node.privateKey, at).encode().toString("base64");
}

/** A curator's identity: a node key and a node certificate of the cluster CA naming its address. */
export async function curatorIdentity(cluster: Cluster, host: string): Promise<CuratorIdentity> {
  const keys = generateKeyPair();
  const certificate = await cluster.authority.issueNodeCertificate(keys.publicKey, {
    ipAddresses: [host],
  });
  const tls = tlsMaterial({
    certificate,
    privateKey: keys.privateKey,
    ca: cluster.authority.certificate,
  });
  return { nodeId: nodeIdFromPublicKey(keys.publicKey), tls, host, port: await freePort(host) };
}
