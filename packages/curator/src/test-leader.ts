/**
 * A leading curator for tests of its gRPC services, on the bootstrapped test
 * cluster (test-cluster.ts): an election won in its curator namespace, a
 * LeaderContext over it, and a gRPC server on 127.0.0.1 serving whatever
 * services the test asks for over the curator's real mTLS.
 *
 *   const leader = await startLeader({ services: (ctx) => [[curator.CuratorService, curatorServer(ctx)]] });
 *   const client = await leader.client(curator.CuratorClient, "node");
 *   …
 *   await leader.stop();
 *
 * Used by the curator's service tests and by metroctl's: keep its API stable.
 */
import { Server, type ChannelCredentials, type Client, type ClientOptions } from "@grpc/grpc-js";
import winston from "winston";
import type { TestMember, TestNode } from "@metropolis/consensus/testing";
import { tlsMaterial } from "@metropolis/pki";
import type { common, priv } from "@metropolis/proto";
import { curatorClientCredentials, curatorServerCredentials } from "./credentials";
import { ClockSamples } from "./clock-samples";
import { ConsensusViews } from "./consensus-views";
import { HeartbeatTracker } from "./heartbeat-tracker";
import { readConfiguration } from "./management-configuration";
import { identifier } from "./identity";
import { nodeKey } from "./keys";
import type { LeaderContext } from "./leader-context";
import { campaign, type Candidacy } from "./leadership";
import type { ServiceEntry } from "./call-router";
import { NodeRecordMirror } from "./node-record-mirror";
import { encodeNode, findNode } from "./node-record";
import { followStoredRevocations, Revocations } from "./revocations";
import { serverLimits } from "./server-limits";
import {
  bootstrapTestCluster,
  type ClusterNode,
  type KeyPair,
  type PutNodeOptions,
} from "./test-cluster";

export type { ServiceEntry };

/** Options of {@link startLeader}. */
export interface LeaderFixtureOptions {
  /** The services to serve, built from the leader's context. Default: none. */
  services?: (ctx: LeaderContext) => readonly ServiceEntry[];
  /** Heartbeat timeout of the context's tracker (default 10 s). */
  heartbeatTimeoutMs?: number;
  /** The cluster configuration written at bootstrap (default: storage ENCRYPTED). */
  configuration?: common.ClusterConfiguration;
  /**
   * TTL of the leader's election lease, in seconds: a test of the lease
   * deadline stops renewing it (`candidacy.abandon()`) and waits it out.
   * @default 10
   */
  leaderTtlSeconds?: number;
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

/** A running leader and its bootstrapped cluster; see the module comment. */
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
  addNode(opts?: PutNodeOptions): Promise<ClusterNode>;
  /** Reads node `id` (undefined when absent). */
  getNode(id: string): Promise<priv.Node | undefined>;
  /** Rewrites node `id` with `update` applied (guarded by leadership). */
  updateNode(id: string, update: (node: priv.Node) => priv.Node): Promise<void>;
  /** Deletes node `id`'s record (guarded by leadership). */
  deleteNode(id: string): Promise<void>;
  /** Stops everything: clients, server, candidacy, etcd member, temp dirs. Idempotent. */
  stop(): Promise<void>;
}

/** Starts a leading curator with a bootstrapped cluster; see the module comment. */
export async function startLeader(opts: LeaderFixtureOptions = {}): Promise<LeaderFixture> {
  const cluster = await bootstrapTestCluster({
    name: "curator",
    configuration: opts.configuration,
  });
  try {
    const { node, member, authority, caPem, firstNode } = cluster;
    const { kv, secrets } = cluster.store;
    // The limits every server of the node core has (server-limits.ts).
    const server = new Server(serverLimits());
    // Force: a test may leave streams (Watch, Heartbeat) open, which a graceful shutdown would wait for.
    cluster.defer(async () => server.forceShutdown());
    // The server presents a node certificate of its own for the first node's key.
    const serverCertificate = await authority.issueNodeCertificate(firstNode.publicKey);
    const serverTls = tlsMaterial({
      certificate: serverCertificate,
      privateKey: firstNode.privateKey,
      ca: authority.certificate,
    });
    // Bound before the election, so that the election value names the real port.
    const port = await new Promise<number>((resolve, reject) =>
      server.bindAsync("127.0.0.1:0", curatorServerCredentials(serverTls), (err, p) =>
        err ? reject(err) : resolve(p),
      ),
    );
    const address = `127.0.0.1:${port}`;

    const candidacy = await campaign(
      kv,
      { nodeId: node.nodeId, host: "127.0.0.1", port },
      opts.leaderTtlSeconds ?? 10,
    );
    cluster.defer(() => candidacy.resign());
    const leadership = candidacy.leadership();
    const logger = winston.createLogger({
      silent: true,
      transports: [new winston.transports.Console({ silent: true })],
    });
    const caDer = cluster.caCertificate;
    const revocations = new Revocations(caDer);
    const following = new AbortController();
    cluster.defer(async () => following.abort());
    await followStoredRevocations(
      kv,
      cluster.clusterCa,
      revocations,
      following.signal,
      () => undefined,
    );
    const nodes = new NodeRecordMirror(kv, leadership, logger);
    cluster.defer(() => nodes.close());
    const ctx: LeaderContext = {
      self: candidacy.self,
      kv,
      secrets,
      leadership,
      nodes,
      consensus: member.status,
      clusterCa: cluster.clusterCa,
      heartbeats: new HeartbeatTracker(opts.heartbeatTimeoutMs),
      clocks: new ClockSamples(),
      consensusViews: new ConsensusViews(),
      logger,
      revocations,
      identify: identifier(caDer, revocations),
    };
    ctx.heartbeats.configure((await readConfiguration(ctx)).config);
    const owner = cluster.owner;

    for (const [definition, implementation] of opts.services?.(ctx) ?? [])
      server.addService(definition, implementation);

    const clients: Client[] = [];
    cluster.defer(async () => clients.forEach((c) => c.close()));

    const clientPem = async (identity: Exclude<ClientIdentity, "none">) => {
      if (identity === "node") return cluster.tls(firstNode.certificate, firstNode.privateKey);
      if (identity === "owner") return cluster.tls(owner.certificate, owner.privateKey);
      if ("node" in identity)
        return cluster.tls(identity.node.certificate, identity.node.privateKey);
      if ("tls" in identity) return identity.tls;
      return cluster.ephemeralTls(identity.ephemeral);
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
      owner,
      client: async (ctor, identity) => {
        const client = new ctor(address, await credentials(identity));
        clients.push(client);
        return client;
      },
      credentials,
      addNode: (nodeOpts) => cluster.putNode(leadership, nodeOpts),
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
      stop: cluster.stop,
    };
    return fixture;
  } catch (e) {
    await cluster.stop();
    throw e;
  }
}
