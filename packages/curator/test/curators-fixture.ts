/**
 * A real cluster control plane for tests that go through the front door: the
 * bootstrapped test cluster of `@metropolis/curator/testing` (one real etcd
 * member, the cluster bootstrapped the way a first node does it), and two
 * real `Curator`s (each under its own
 * supervisor, with its real listener, server limits and mTLS), the first
 * leading and the second following. Everything else is done over the API:
 * the owner escrows its certificate (AAA), fetches the register ticket
 * (Management), and nodes register, are approved and commit (Curator).
 *
 *   const cluster = await startCurators();
 *   const node = await cluster.addUpNode();
 *   const client = cluster.client(curator.CuratorClient, cluster.leader.address, node.tls);
 *   …
 *   await cluster.stop();
 */
import { randomBytes } from "node:crypto";
import { Client, type ChannelCredentials, type ServiceError } from "@grpc/grpc-js";
import type { Namespace } from "etcd3";
import { freePort, type TestMember } from "@metropolis/consensus/testing";
import {
  bootstrapTestCluster,
  newKeyPair,
  type KeyPair,
  type Tls,
} from "@metropolis/curator/testing";
import { nodeIdFromPublicKey, tlsMaterial } from "@metropolis/pki";
import { api, curator, protocolVersion } from "@metropolis/proto";
import type { TestHarness } from "@metropolis/supervisor/testing";
import { waitFor } from "@metropolis/event";
import { curatorClientCredentials } from "../src/credentials";
import { Curator } from "../src/curator";
import type { CuratorEndpoint } from "../src/leadership";

export type { Tls };

/** An Ed25519 key pair: raw 32-byte seed and public key. */
export type Keys = KeyPair;

/** A fresh key pair. */
export const newKeys = newKeyPair;

/** A node registered over the API (NEW, or STANDBY once approved). */
export interface RegisteredNode {
  nodeId: string;
  keys: Keys;
  join: Keys;
}

/** A node that committed: UP, with its node certificate. */
export interface UpNode extends RegisteredNode {
  /** Its node certificate and key, to call as this node. */
  tls: Tls;
  clusterUnlockKey: Buffer;
}

export interface RunningCurator {
  curator: Curator;
  harness: TestHarness;
  endpoint: CuratorEndpoint;
  /** "host:port". */
  address: string;
}

export interface CuratorsFixture {
  member: TestMember;
  /** The curator namespace of the cluster's etcd: read it, never write it. */
  kv: Namespace;
  leader: RunningCurator;
  /** Undefined when started with `{ follower: false }`. */
  follower: RunningCurator | undefined;
  /** The cluster CA certificate (PEM). */
  caPem: string;
  /** The bootstrap node: UP, consensus member; the leading curator runs as it. */
  firstNode: UpNode;
  /** The initial owner's key, and its certificate escrowed over AAA. */
  owner: { keys: Keys; tls: Tls };
  /** The register ticket, from Management.GetRegisterTicket. */
  ticket: Buffer;
  /** A self-signed certificate of `privateKey`, as registering nodes (and the owner, to escrow) present. */
  ephemeralTls(privateKey: Uint8Array): Promise<Tls>;
  /** Credentials towards this cluster's curators as `tls` (none: no client certificate). */
  credentials(tls: Tls | undefined): ChannelCredentials;
  /** A client of `address` as `tls`; closed by `stop()`. */
  client<T extends Client>(
    ctor: new (address: string, credentials: ChannelCredentials) => T,
    address: string,
    tls: Tls | undefined,
  ): T;
  /** The owner's Management client on the leader. */
  management: api.ManagementClient;
  /** Registers a fresh node (RegisterNode with the ticket): NEW. */
  registerNode(): Promise<RegisteredNode>;
  /** Approves node `nodeId` (Management.ApproveNode): STANDBY. */
  approve(nodeId: string): Promise<void>;
  /** Commits an approved node (CommitNode): UP, with its certificate. */
  commit(node: RegisteredNode): Promise<UpNode>;
  /** Registers, approves and commits a fresh node. */
  addUpNode(): Promise<UpNode>;
  /** Deletes node `nodeId` (Management.DeleteNode with both bypasses). */
  deleteNode(nodeId: string): Promise<void>;
  /** The etcd revision now: it moves with every write to the cluster's etcd. */
  revision(): Promise<string>;
  /** Stops clients, curators, the etcd member and removes temp dirs. Idempotent. */
  stop(): Promise<void>;
}

/** A unary call of a generated client as a promise. */
export function unary<Res>(
  start: (callback: (error: ServiceError | null, response?: Res) => void) => unknown,
): Promise<Res> {
  return new Promise((resolve, reject) =>
    start((error, response) =>
      error
        ? reject(error)
        : response === undefined
          ? reject(new Error("no response"))
          : resolve(response),
    ),
  );
}

/** Starts the cluster; see the module comment. Without a follower when `opts.follower` is false. */
export async function startCurators(opts: { follower?: boolean } = {}): Promise<CuratorsFixture> {
  const cluster = await bootstrapTestCluster({ name: "authz", addressInCertificate: true });
  const stop = cluster.stop;
  try {
    const { node, member, caPem } = cluster;
    const kv = cluster.store.kv;
    const host = node.peer.host;
    const leaderEndpoint = {
      nodeId: node.nodeId,
      host,
      port: await freePort(host),
    };
    const ownerKeys: Keys = {
      privateKey: cluster.owner.privateKey,
      publicKey: cluster.owner.publicKey,
    };
    const firstKeys: Keys = {
      privateKey: cluster.firstNode.privateKey,
      publicKey: cluster.firstNode.publicKey,
    };
    const firstTls = cluster.tls(cluster.firstNode.certificate, firstKeys.privateKey);

    const startCurator = async (
      endpoint: CuratorEndpoint,
      tls: Tls,
      role: "leader" | "follower",
    ): Promise<RunningCurator> => {
      const { curator: running, harness } = cluster.runCurator({
        nodeId: endpoint.nodeId,
        tls: { ...tls, ca: caPem },
        host: endpoint.host,
        port: endpoint.port,
      });
      cluster.defer(() => harness.cleanup({ timeoutMs: 10_000 }));
      await harness.waitFor("root.curator", "healthy", { timeoutMs: 30_000 });
      // The leader announces itself once it serves; a follower once it knows the leader.
      const expected = role === "leader" ? endpoint.nodeId : leaderEndpoint.nodeId;
      await waitFor(running.leader, (l) => l?.nodeId === expected, AbortSignal.timeout(30_000));
      return { curator: running, harness, endpoint, address: `${endpoint.host}:${endpoint.port}` };
    };
    const leader = await startCurator(leaderEndpoint, firstTls, "leader");

    const clients: Client[] = [];
    cluster.defer(async () => clients.forEach((c) => c.close()));
    const credentials = (tls: Tls | undefined) => curatorClientCredentials(caPem, tls);
    const client = <T extends Client>(
      ctor: new (address: string, credentials: ChannelCredentials) => T,
      address: string,
      tls: Tls | undefined,
    ): T => {
      const made = new ctor(address, credentials(tls));
      clients.push(made);
      return made;
    };
    const ephemeralTls = cluster.ephemeralTls;

    // The owner escrows its certificate, as metroctl does.
    const escrowClient = client(
      api.AAAClient,
      leader.address,
      await ephemeralTls(ownerKeys.privateKey),
    );
    const escrowed = await unary<api.EscrowResponse>((cb) =>
      escrowClient.escrow({ publicKey: ownerKeys.publicKey }, cb),
    );
    escrowClient.close();
    const ownerTls = tlsMaterial({
      certificate: escrowed.userCertificate,
      privateKey: ownerKeys.privateKey,
      ca: escrowed.caCertificate,
    });
    const management = client(api.ManagementClient, leader.address, ownerTls);
    const ticket = (
      await unary<api.GetRegisterTicketResponse>((cb) => management.getRegisterTicket({}, cb))
    ).ticket;

    const registerNode = async (): Promise<RegisteredNode> => {
      const keys = newKeys();
      const join = newKeys();
      const c = client(curator.CuratorClient, leader.address, await ephemeralTls(keys.privateKey));
      try {
        await unary((cb) =>
          c.registerNode(
            { registerTicket: ticket, joinKey: join.publicKey, labels: new Map(), protocolVersion },
            cb,
          ),
        );
      } finally {
        c.close();
      }
      return { nodeId: nodeIdFromPublicKey(keys.publicKey), keys, join };
    };
    const approve = async (nodeId: string) => {
      await unary((cb) => management.approveNode({ node: { $case: "id", id: nodeId } }, cb));
    };
    const commit = async (registered: RegisteredNode): Promise<UpNode> => {
      const clusterUnlockKey = randomBytes(32);
      const c = client(
        curator.CuratorClient,
        leader.address,
        await ephemeralTls(registered.keys.privateKey),
      );
      try {
        const res = await unary<curator.CommitNodeResponse>((cb) =>
          c.commitNode({ clusterUnlockKey }, cb),
        );
        const tls = tlsMaterial({
          certificate: res.nodeCertificate,
          privateKey: registered.keys.privateKey,
          ca: res.caCertificate,
        });
        return { ...registered, tls, clusterUnlockKey };
      } finally {
        c.close();
      }
    };
    const addUpNode = async () => {
      const registered = await registerNode();
      await approve(registered.nodeId);
      return commit(registered);
    };

    // The follower runs as a node of the cluster, as every curator does.
    let follower: RunningCurator | undefined;
    if (opts.follower !== false) {
      const followerNode = await addUpNode();
      follower = await startCurator(
        { nodeId: followerNode.nodeId, host, port: await freePort(host) },
        followerNode.tls,
        "follower",
      );
    }

    return {
      member,
      kv,
      leader,
      follower,
      caPem,
      firstNode: {
        nodeId: node.nodeId,
        keys: firstKeys,
        join: cluster.firstNode.join,
        tls: firstTls,
        clusterUnlockKey: cluster.firstNode.clusterUnlockKey,
      },
      owner: { keys: ownerKeys, tls: ownerTls },
      ticket,
      ephemeralTls,
      credentials,
      client,
      management,
      registerNode,
      approve,
      commit,
      addUpNode,
      deleteNode: async (nodeId) => {
        await unary((cb) =>
          management.deleteNode(
            { node: { $case: "id", id: nodeId }, bypassHasRoles: true, bypassNodeUp: true },
            cb,
          ),
        );
      },
      revision: async () => (await kv.get("/").exec()).header.revision,
      stop,
    };
  } catch (e) {
    await stop();
    throw e;
  }
}
