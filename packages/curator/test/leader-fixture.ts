/**
 * A leading curator for tests of its gRPC services: a real one-member etcd
 * (consensus test member), an election won in its curator namespace, a
 * bootstrapped cluster (CA, first node UP, owner key), and a gRPC server on
 * 127.0.0.1 serving whatever services the test asks for over the curator's
 * real mTLS.
 *
 *   const leader = await startLeader({ services: (ctx) => [[curator.CuratorService, curatorServer(ctx)]] });
 *   const client = await leader.client(curator.CuratorClient, "node");
 *   …
 *   await leader.stop();
 *
 * Shared by the Curator and Management/AAA tests: keep its API stable.
 */
import { randomBytes } from "node:crypto";
import {
  Server,
  type ChannelCredentials,
  type Client,
  type ClientOptions,
  status,
  type ServiceError,
} from "@grpc/grpc-js";
import winston from "winston";
import {
  runTestMember,
  testNode,
  type TestMember,
  type TestNode,
} from "@metropolis/consensus/testing";
import { etcdCertificateKv } from "@metropolis/consensus";
import {
  createEphemeralCertificate,
  generateKeyPair,
  nodeIdFromPublicKey,
  tlsMaterial,
} from "@metropolis/pki";
import { common, priv } from "@metropolis/proto";
import { bootstrapNodeFinish } from "../src/bootstrap";
import { curatorClientCredentials, curatorServerCredentials } from "../src/credentials";
import {
  guardNewCertificate,
  issueNodeCertificate,
  nodeCertificateEntry,
} from "../src/curator-pki";
import { HeartbeatTracker } from "../src/heartbeat-tracker";
import { identifier, ownerCommonName } from "../src/identity";
import { joinKeyKey, nodeKey } from "../src/keys";
import { clusterCa, type LeaderContext } from "../src/leader-context";
import { campaign, type Candidacy } from "../src/leadership";
import { followStoredRevocations, Revocations } from "../src/revocations";
import type { ServiceEntry } from "../src/listener";
import { encodeNode, findNode } from "../src/node-record";
import { serverLimits } from "../src/server-limits";
import { putClusterUnlockKey } from "../src/node-secrets";

export type { ServiceEntry };

/** Expects `p` to fail with gRPC status `code` (and a message matching `message`). */
export async function expectCode(
  p: Promise<unknown>,
  code: status,
  message?: RegExp,
): Promise<void> {
  const error = await p.then(
    () => undefined,
    (e: unknown) => e as ServiceError,
  );
  expect(error).toBeDefined();
  expect(status[error!.code]).toBe(status[code]);
  if (message) expect(error!.details).toMatch(message);
}

export interface LeaderFixtureOptions {
  /** The services to serve, built from the leader's context. Default: none. */
  services?: (ctx: LeaderContext) => readonly ServiceEntry[];
  /** Heartbeat timeout of the context's tracker (default 10 s). */
  heartbeatTimeoutMs?: number;
  /** The cluster configuration written at bootstrap (default: storage ENCRYPTED). */
  configuration?: common.ClusterConfiguration;
}

/** An Ed25519 key pair (raw 32-byte seed and public key). */
export interface KeyPair {
  privateKey: Buffer;
  publicKey: Buffer;
}

/** A node of the test cluster: its identity key, certificate and join/unlock keys. */
export interface ClusterNode extends KeyPair {
  nodeId: string;
  /** Node certificate (DER) issued by the cluster CA; empty unless the node is UP. */
  certificate: Buffer;
  join: KeyPair;
  clusterUnlockKey: Buffer;
}

/**
 * Who a client presents itself as:
 * - "node": the first (bootstrap) node; `{ node }`: another node with a certificate;
 * - "owner": the owner's certificate (CN=owner, issued by the cluster CA);
 * - `{ ephemeral }`: a self-signed certificate of that private key (registering nodes, join keys, escrow);
 * - `{ tls }`: any PEM certificate and key;
 * - "none": no client certificate.
 */
export type ClientIdentity =
  | "node"
  | "owner"
  | "none"
  | { node: Pick<ClusterNode, "privateKey" | "certificate"> }
  | { ephemeral: Uint8Array }
  | { tls: { cert: string; key: string } };

/** A grpc-js generated client class (e.g. `curator.CuratorClient`, `api.ManagementClient`). */
export type ClientConstructor<T extends Client> = new (
  address: string,
  credentials: ChannelCredentials,
  options?: Partial<ClientOptions>,
) => T;

export interface LeaderFixture {
  ctx: LeaderContext;
  node: TestNode;
  member: TestMember;
  candidacy: Candidacy;
  /** Where the services listen: "127.0.0.1:<port>". */
  address: string;
  /** The cluster CA certificate, DER and PEM. */
  caCertificate: Buffer;
  caPem: string;
  /** The bootstrap node (UP, consensus member and Kubernetes controller); its key is the etcd member's. */
  firstNode: ClusterNode;
  /** The initial owner's key and certificate (DER, CN=owner). */
  owner: KeyPair & { certificate: Buffer };
  /** A client of the served services as `identity`; closed by `stop()`. */
  client<T extends Client>(ctor: ClientConstructor<T>, identity: ClientIdentity): Promise<T>;
  /** Client credentials for `identity` (for clients the fixture should not own). */
  credentials(identity: ClientIdentity): Promise<ChannelCredentials>;
  /**
   * Creates a node record directly (guarded by leadership), default UP with a
   * certificate; `state` NEW or STANDBY gives no certificate.
   */
  addNode(opts?: {
    state?: common.NodeState;
    roles?: common.NodeRoles;
    labels?: Map<string, string>;
  }): Promise<ClusterNode>;
  /** Reads node `id` (undefined when absent). */
  getNode(id: string): Promise<priv.Node | undefined>;
  /** Rewrites node `id` with `update` applied (guarded by leadership). */
  updateNode(id: string, update: (node: priv.Node) => priv.Node): Promise<void>;
  /** Deletes node `id`'s record (guarded by leadership). */
  deleteNode(id: string): Promise<void>;
  /** Stops everything: clients, server, candidacy, etcd member, temp dirs. Idempotent. */
  stop(): Promise<void>;
}

export function newKeyPair(): KeyPair {
  const { privateKey, publicKey } = generateKeyPair();
  return { privateKey: Buffer.from(privateKey), publicKey: Buffer.from(publicKey) };
}

/** Starts a leading curator with a bootstrapped cluster; see the module comment. */
export async function startLeader(opts: LeaderFixtureOptions = {}): Promise<LeaderFixture> {
  const node = await testNode("curator");
  const cleanups: Array<() => Promise<unknown>> = [() => node.remove()];
  const cleanup = async () => {
    for (const step of cleanups.splice(0).reverse()) await step().catch(() => undefined);
  };
  try {
    const member = await runTestMember(node, { bootstrap: true });
    cleanups.push(() => member.harness.cleanup());
    const kv = member.status.client.sub("curator").kv;
    const secrets = member.status.client.sub("curator").secrets;

    // Bind first, so that the election value names the real port. The
    // server therefore presents a node certificate of its own for the first
    // node's key, issued before bootstrap (which needs the leadership).
    // The limits every server of the node core has (server-limits.ts).
    const server = new Server(serverLimits());
    // Force: a test may leave streams (Watch, Heartbeat) open, which a graceful shutdown would wait for.
    cleanups.push(async () => server.forceShutdown());
    const ca = clusterCa(secrets);
    const authority = await ca.authority(etcdCertificateKv(kv));
    const caPem = authority.certificate.toPem();
    const firstNodeKeys = {
      privateKey: Buffer.from(node.privateKey),
      publicKey: Buffer.from(node.publicKey),
    };
    const serverCertificate = await authority.issueNodeCertificate(firstNodeKeys.publicKey);
    const serverTls = tlsMaterial({
      certificate: serverCertificate,
      privateKey: firstNodeKeys.privateKey,
      ca: authority.certificate,
    });
    const port = await new Promise<number>((resolve, reject) =>
      server.bindAsync("127.0.0.1:0", curatorServerCredentials(serverTls), (err, p) =>
        err ? reject(err) : resolve(p),
      ),
    );
    const address = `127.0.0.1:${port}`;

    const candidacy = await campaign(kv, { nodeId: node.nodeId, host: "127.0.0.1", port }, 10);
    cleanups.push(() => candidacy.resign());
    const leadership = candidacy.leadership();
    const logger = winston.createLogger({
      silent: true,
      transports: [new winston.transports.Console({ silent: true })],
    });
    const caDer = authority.certificate.der;
    const revocations = new Revocations(caDer);
    const following = new AbortController();
    cleanups.push(async () => following.abort());
    await followStoredRevocations(kv, ca, revocations, following.signal, () => undefined);
    const ctx: LeaderContext = {
      self: candidacy.self,
      kv,
      secrets,
      leadership,
      consensus: member.status,
      clusterCa: ca,
      heartbeats: new HeartbeatTracker(opts.heartbeatTimeoutMs),
      logger,
      revocations,
      identify: identifier(caDer, revocations),
    };

    const join = newKeyPair();
    const clusterUnlockKey = randomBytes(32);
    const owner = newKeyPair();
    const boot = await bootstrapNodeFinish(ctx, {
      nodePublicKey: firstNodeKeys.publicKey,
      joinPublicKey: join.publicKey,
      clusterUnlockKey,
      ownerPublicKey: owner.publicKey,
      configuration: opts.configuration,
    });
    const firstNode: ClusterNode = {
      nodeId: node.nodeId,
      ...firstNodeKeys,
      certificate: boot.nodeCertificate,
      join,
      clusterUnlockKey,
    };
    const ownerCertificate = (
      await authority.issueUserCertificate(ownerCommonName, owner.publicKey)
    ).der;

    for (const [definition, implementation] of opts.services?.(ctx) ?? [])
      server.addService(definition, implementation);

    const clients: Client[] = [];
    cleanups.push(async () => clients.forEach((c) => c.close()));

    const pemOf = (certificate: Uint8Array, privateKey: Uint8Array) =>
      tlsMaterial({ certificate, privateKey, ca: authority.certificate });
    const clientPem = async (identity: Exclude<ClientIdentity, "none">) => {
      if (identity === "node") return pemOf(firstNode.certificate, firstNode.privateKey);
      if (identity === "owner") return pemOf(ownerCertificate, owner.privateKey);
      if ("node" in identity) return pemOf(identity.node.certificate, identity.node.privateKey);
      if ("tls" in identity) return identity.tls;
      const certificate = await createEphemeralCertificate(identity.ephemeral);
      return tlsMaterial({ certificate, privateKey: identity.ephemeral, ca: certificate });
    };
    const credentials = async (identity: ClientIdentity): Promise<ChannelCredentials> =>
      curatorClientCredentials(caPem, identity === "none" ? undefined : await clientPem(identity));
    const fixture: LeaderFixture = {
      ctx,
      node,
      member,
      candidacy,
      address,
      caCertificate: caDer,
      caPem,
      firstNode,
      owner: { ...owner, certificate: ownerCertificate },
      client: async (ctor, identity) => {
        const client = new ctor(address, await credentials(identity));
        clients.push(client);
        return client;
      },
      credentials,
      addNode: async ({ state = common.NodeState.UP, roles = {}, labels = new Map() } = {}) => {
        const keys = newKeyPair();
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
      },
      getNode: async (id) => (await findNode(kv, id))?.node,
      updateNode: async (id, update) => {
        for (;;) {
          const found = await findNode(kv, id);
          if (!found) throw new Error(`node ${id} not found`);
          const txn = leadership
            .txn()
            .and(nodeKey(id), "Mod", "==", found.modRevision)
            .then(kv.put(nodeKey(id)).value(encodeNode(update(found.node))));
          if (await leadership.commit(txn)) return;
        }
      },
      deleteNode: async (id) => {
        await leadership.commit(leadership.txn().then(kv.delete().key(nodeKey(id))));
      },
      stop: cleanup,
    };
    return fixture;
  } catch (e) {
    await cleanup();
    throw e;
  }
}
