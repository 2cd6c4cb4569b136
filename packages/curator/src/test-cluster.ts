/**
 * The one bootstrapped test cluster that the curator's test kits build on: a
 * real one-member etcd (a consensus test member on a loopback address of its
 * own), a cluster bootstrapped in it the way a first node does it
 * (`bootstrapCluster`: CA, first node UP and consensus member, owner key),
 * and the owner's certificate issued by the cluster CA.
 *
 * What runs on top — an in-process leader serving chosen services
 * (`startLeader`), real `Curator`s (the curator's authz fixture, roleserve's
 * control plane) — is the kit's business: it registers its own cleanup with
 * `defer()`, and `stop()` undoes everything, the last started first.
 */
import { randomBytes } from "node:crypto";
import type { Namespace } from "etcd3";
import { etcdCertificateKv } from "@metropolis/consensus";
import {
  runTestMember,
  testNode,
  type TestMember,
  type TestNode,
} from "@metropolis/consensus/testing";
import {
  createEphemeralCertificate,
  generateKeyPair,
  nodeIdFromPublicKey,
  tlsMaterial,
  type CaCertificate,
  type CertificateAuthority,
  type SecretSealer,
} from "@metropolis/pki";
import { common, priv } from "@metropolis/proto";
import { testHarness, type TestHarness } from "@metropolis/supervisor/testing";
import { bootstrapCluster } from "./bootstrap";
import { Curator, type CuratorConfig } from "./curator";
import { guardNewCertificate, issueNodeCertificate, nodeCertificateEntry } from "./curator-pki";
import { ownerCommonName } from "./identity";
import { joinKeyKey, nodeKey } from "./keys";
import { clusterCa } from "./leader-context";
import type { Leadership } from "./leadership";
import { encodeNode } from "./node-record";
import { putClusterUnlockKey } from "./node-secrets";

/** An Ed25519 key pair (raw 32-byte seed and public key). */
export interface KeyPair {
  privateKey: Buffer;
  publicKey: Buffer;
}

/** A fresh Ed25519 key pair. */
export function newKeyPair(): KeyPair {
  const { privateKey, publicKey } = generateKeyPair();
  return { privateKey: Buffer.from(privateKey), publicKey: Buffer.from(publicKey) };
}

/** A node of the test cluster: its identity key, certificate and join/unlock keys. */
export interface ClusterNode extends KeyPair {
  nodeId: string;
  /** Node certificate (DER) issued by the cluster CA; empty unless the node is UP. */
  certificate: Buffer;
  join: KeyPair;
  /** Its cluster unlock key; empty unless the node is UP. */
  clusterUnlockKey: Buffer;
}

/** PEM client (or server) certificate and key. */
export interface Tls {
  cert: string;
  key: string;
}

/** Options of {@link bootstrapTestCluster}. */
export interface TestClusterOptions {
  /** Names the node's temp directory (default "curator"). */
  name?: string;
  /** The cluster configuration written at bootstrap (default: storage ENCRYPTED). */
  configuration?: common.ClusterConfiguration;
  /** Whether the first node's certificate names its loopback address as an IP SAN (default false). */
  addressInCertificate?: boolean;
}

/** What to create with {@link TestCluster.putNode}. */
export interface PutNodeOptions {
  /** Default UP (with a certificate and a cluster unlock key); NEW or STANDBY get neither. */
  state?: common.NodeState;
  roles?: common.NodeRoles;
  labels?: Map<string, string>;
  /** The node's key pair (default a fresh one): a consensus test member's, to give its member a record. */
  keys?: KeyPair;
  /** Its status (default none): an external address makes it dialable as an etcd peer. */
  status?: common.NodeStatus;
}

/** A bootstrapped cluster; see the module comment. */
export interface TestCluster {
  /** The first node's test node (identity, storage, loopback peer address). */
  node: TestNode;
  /** Its etcd member, running under a test supervisor. */
  member: TestMember;
  /** The curator's namespace of the cluster's etcd, and its secret sealer. */
  store: { readonly kv: Namespace; readonly secrets: SecretSealer };
  /** The cluster CA as stored in etcd, and as an authority that issues certificates. */
  clusterCa: CaCertificate;
  authority: CertificateAuthority;
  /** The cluster CA certificate, DER and PEM. */
  caCertificate: Buffer;
  caPem: string;
  /** The bootstrap node: UP, consensus member and Kubernetes controller; its key is the etcd member's. */
  firstNode: ClusterNode;
  /** The initial owner's key and its certificate (DER, CN=owner) as AAA Escrow would issue it. */
  owner: KeyPair & { certificate: Buffer };
  /** PEM material of `certificate` and `privateKey`, with the cluster CA. */
  tls(certificate: Uint8Array, privateKey: Uint8Array): Tls;
  /** A self-signed certificate of `privateKey`, as registering nodes (and an owner escrowing) present. */
  ephemeralTls(privateKey: Uint8Array): Promise<Tls>;
  /**
   * Creates a node record directly, guarded by `leadership` (a leader's
   * candidacy in this cluster): default UP, with a certificate.
   */
  putNode(leadership: Leadership, opts?: PutNodeOptions): Promise<ClusterNode>;
  /**
   * Starts a real `Curator` on this cluster's etcd member, under a test
   * supervisor of its own, without waiting for it: the caller waits for what
   * it needs (healthy, leading, following) and stops it with
   * `harness.cleanup()`.
   */
  runCurator(config: Omit<CuratorConfig, "consensus">): { curator: Curator; harness: TestHarness };
  /** Runs `step` at `stop()`, before the steps deferred earlier. */
  defer(step: () => Promise<unknown>): void;
  /** Undoes everything, the last started first: deferred steps, the etcd member, temp dirs. Idempotent. */
  stop(): Promise<void>;
}

/** Starts the etcd member and bootstraps the cluster in it; see the module comment. */
export async function bootstrapTestCluster(opts: TestClusterOptions = {}): Promise<TestCluster> {
  const node = await testNode(opts.name ?? "curator");
  const cleanups: Array<() => Promise<unknown>> = [() => node.remove()];
  const stop = async () => {
    for (const step of cleanups.splice(0).reverse()) await step().catch(() => undefined);
  };
  try {
    const member = await runTestMember(node, { bootstrap: true });
    cleanups.push(() => member.harness.cleanup());
    const store = member.status.client.sub("curator");
    const { kv, secrets } = store;
    const ca = clusterCa(secrets);

    const firstKeys = {
      privateKey: Buffer.from(node.privateKey),
      publicKey: Buffer.from(node.publicKey),
    };
    const join = newKeyPair();
    const clusterUnlockKey = randomBytes(32);
    const owner = newKeyPair();
    const host = node.peer.host;
    // The endpoint only names the bootstrap's own short candidacy, resigned when it returns.
    const boot = await bootstrapCluster(
      store,
      { nodeId: node.nodeId, host, port: 1 },
      {
        nodePublicKey: firstKeys.publicKey,
        joinPublicKey: join.publicKey,
        clusterUnlockKey,
        ownerPublicKey: owner.publicKey,
        configuration: opts.configuration,
        ipAddresses: opts.addressInCertificate ? [host] : undefined,
      },
    );
    const authority = await ca.authority(etcdCertificateKv(kv));
    const caPem = authority.certificate.toPem();
    const ownerCertificate = (
      await authority.issueUserCertificate(ownerCommonName, owner.publicKey)
    ).der;
    const tls = (certificate: Uint8Array, privateKey: Uint8Array): Tls =>
      tlsMaterial({ certificate, privateKey, ca: authority.certificate });

    const putNode = async (
      leadership: Leadership,
      {
        state = common.NodeState.UP,
        roles = {},
        labels = new Map(),
        keys = newKeyPair(),
        status,
      }: PutNodeOptions = {},
    ): Promise<ClusterNode> => {
      const nodeId = nodeIdFromPublicKey(keys.publicKey);
      const nodeJoin = newKeyPair();
      const cuk = randomBytes(32);
      const up = state === common.NodeState.UP;
      const record = priv.Node.fromPartial({
        publicKey: keys.publicKey,
        joinKey: nodeJoin.publicKey,
        state,
        roles,
        labels,
        status,
      });
      const txn = leadership.txn().and(nodeKey(nodeId), "Create", "==", 0);
      const ops = [
        kv.put(nodeKey(nodeId)).value(encodeNode(record)),
        kv.put(joinKeyKey(nodeJoin.publicKey)).value(nodeId),
      ];
      let certificate: Buffer = Buffer.alloc(0);
      if (up) {
        const issued = await issueNodeCertificate(authority, keys.publicKey);
        ops.push(
          guardNewCertificate(kv, txn, nodeCertificateEntry(ca, nodeId, keys.publicKey), issued),
          putClusterUnlockKey(kv, secrets, nodeId, cuk),
        );
        certificate = issued.der;
      }
      if (!(await leadership.commit(txn.then(...ops))))
        throw new Error(`node ${nodeId} exists already`);
      return {
        nodeId,
        ...keys,
        certificate,
        join: nodeJoin,
        clusterUnlockKey: up ? cuk : Buffer.alloc(0),
      };
    };

    return {
      node,
      member,
      store,
      clusterCa: ca,
      authority,
      caCertificate: authority.certificate.der,
      caPem,
      firstNode: {
        nodeId: node.nodeId,
        ...firstKeys,
        certificate: boot.nodeCertificate,
        join,
        clusterUnlockKey,
      },
      owner: { ...owner, certificate: ownerCertificate },
      tls,
      ephemeralTls: async (privateKey) => {
        const certificate = await createEphemeralCertificate(privateKey);
        return tlsMaterial({ certificate, privateKey, ca: certificate });
      },
      putNode,
      runCurator: (config) => {
        const curator = new Curator({ ...config, consensus: member.status });
        const harness = testHarness(async (ctx) => {
          ctx.run("curator", curator.run);
          ctx.healthy();
          await ctx.untilAborted();
        });
        return { curator, harness };
      },
      defer: (step) => void cleanups.push(step),
      stop,
    };
  } catch (e) {
    await stop();
    throw e;
  }
}
