/**
 * The rogue of issue 11 (finding 1), played by the e2e test process itself:
 * a node enrolled the normal way — RegisterNode with the cluster's ticket
 * over a self-signed certificate, approved by the owner, CommitNode — so it
 * holds a genuine node certificate of the cluster, and no roles. Then it
 * attacks: it asks the curator to record it as running a curator, and it
 * serves a fake curator with its genuine certificate — CuratorLocal ("the
 * leader is me") and Curator (Watch answers that strip every node of its
 * roles, and crown the rogue the only consensus member).
 *
 * The fake curator counts every TCP connection it is offered (a plain
 * `net.Server` in front of each port, piping to the gRPC server, so that even
 * a client that gives up during the TLS handshake is counted) and every call
 * that reaches it, with the caller's certificate name.
 */
import { randomBytes } from "node:crypto";
import { readFile } from "node:fs/promises";
import { createConnection, createServer, type Server as NetServer, type Socket } from "node:net";
import { join } from "node:path";
import {
  Server,
  status,
  type ServerUnaryCall,
  type ServerWritableStream,
  type ServiceError,
} from "@grpc/grpc-js";
import {
  CuratorConnection,
  curatorServerCredentials,
  unaryCall,
  type CuratorAddress,
  type TlsPem,
} from "@metropolis/curator";
import {
  createEphemeralCertificate,
  encodePem,
  generateKeyPair,
  nodeIdFromPublicKey,
  tlsMaterial,
} from "@metropolis/pki";
import { api, common, curator, protocolVersion } from "@metropolis/proto";
import type { ClusterNode } from "../local-cluster/src/cluster-launcher";
import { curatorPort, E2eHarnessError, type E2eCluster } from "./e2e-cluster";

/** The curator port the rogue advertises in its status (issue 11's report). */
export const advertisedCuratorPort = 17835;

/** The rogue once enrolled: a node of the cluster in every respect but its roles. */
export interface RogueNode {
  nodeId: string;
  /** The address it reports and serves its fake curator on. */
  host: string;
  /** Its genuine node certificate and key, and the cluster CA (PEM). */
  tls: TlsPem;
  /** Its connection to the real curators, as the node it is. */
  connection: CuratorConnection;
}

/**
 * The members' curators, each bound to its node, as a node of the cluster
 * dials them. Built from the cluster's own nodes rather than the register
 * parameters' directory, so that this also holds for builds whose directory
 * does not mark consensus members.
 */
function memberCurators(members: readonly ClusterNode[]): CuratorAddress[] {
  return members.map((m) => ({ host: m.address, port: curatorPort, nodeId: m.id }));
}

/**
 * Enrols a rogue node at `host`: register parameters from the owner
 * (metroctl), RegisterNode with the ticket over a self-signed certificate,
 * `metroctl approve`, CommitNode. Resolves once it holds its node certificate.
 */
export async function enrolRogue(
  e2e: E2eCluster,
  members: readonly ClusterNode[],
  host: string,
): Promise<RogueNode> {
  const paramsPath = join(e2e.dir, "rogue-params.pb");
  await e2e.cluster.metroctlOk(["register-params", "-o", paramsPath]);
  const params = api.NodeParameters.decode(await readFile(paramsPath));
  if (params.cluster?.$case !== "clusterRegister") {
    throw new E2eHarnessError("metroctl register-params wrote no register parameters");
  }
  const { registerTicket, caCertificate } = params.cluster.clusterRegister;
  const ca = encodePem("CERTIFICATE", caCertificate);

  const keys = generateKeyPair();
  const nodeId = nodeIdFromPublicKey(keys.publicKey);
  const ephemeral = await createEphemeralCertificate(keys.privateKey);
  const ephemeralTls = tlsMaterial({
    certificate: ephemeral,
    privateKey: keys.privateKey,
    ca: ephemeral,
  });
  const enrolment = new CuratorConnection({
    endpoints: memberCurators(members),
    ca,
    identity: { cert: ephemeralTls.cert, key: ephemeralTls.key },
  });
  let nodeCertificate: Buffer;
  try {
    await enrolment.call((leader) =>
      unaryCall<curator.RegisterNodeRequest, curator.RegisterNodeResponse>(
        leader.curator.registerNode.bind(leader.curator),
        {
          registerTicket,
          joinKey: generateKeyPair().publicKey,
          labels: new Map([["purpose", "rogue"]]),
          protocolVersion,
        },
      ),
    );
    await e2e.cluster.metroctlOk(["approve", nodeId]);
    const committed = await enrolment.call((leader) =>
      unaryCall<curator.CommitNodeRequest, curator.CommitNodeResponse>(
        leader.curator.commitNode.bind(leader.curator),
        { clusterUnlockKey: randomBytes(32) },
      ),
    );
    nodeCertificate = committed.nodeCertificate;
  } finally {
    enrolment.close();
  }
  const tls = tlsMaterial({
    certificate: nodeCertificate,
    privateKey: keys.privateKey,
    ca: caCertificate,
  });
  return {
    nodeId,
    host,
    tls,
    connection: new CuratorConnection({
      endpoints: memberCurators(members),
      ca,
      identity: { cert: tls.cert, key: tls.key },
    }),
  };
}

/**
 * `rogue` reports `nodeStatus` for itself to the real curator leader;
 * resolves to the refusal, or undefined when the curator accepted it.
 */
export async function reportStatus(
  rogue: RogueNode,
  nodeStatus: Partial<common.NodeStatus>,
): Promise<ServiceError | undefined> {
  return rogue.connection
    .call((leader) =>
      unaryCall<curator.UpdateNodeStatusRequest, curator.UpdateNodeStatusResponse>(
        leader.curator.updateNodeStatus.bind(leader.curator),
        {
          nodeId: rogue.nodeId,
          status: common.NodeStatus.fromPartial({
            version: "rogue",
            bootId: randomBytes(8).toString("hex"),
            ...nodeStatus,
          }),
        },
      ),
    )
    .then(
      () => undefined,
      (e: ServiceError) => e,
    );
}

/**
 * The first answer of a Curator.Watch of `kind` through `connection`: a
 * node's record (nodeInCluster), or the backlog's first message.
 */
export async function watchOnce(
  connection: CuratorConnection,
  kind: curator.WatchRequest["kind"],
): Promise<curator.WatchResponse> {
  return connection.call(
    (leader) =>
      new Promise<curator.WatchResponse>((resolve, reject) => {
        const call = leader.curator.watch({ kind }, { deadline: Date.now() + 10_000 });
        call.once("data", (response: curator.WatchResponse) => {
          call.removeAllListeners("error");
          call.on("error", () => undefined); // the cancel below reports CANCELLED
          call.cancel();
          resolve(response);
        });
        call.once("error", reject);
        call.once("end", () => reject(new E2eHarnessError("Watch ended without an answer")));
      }),
    { timeoutMs: 15_000 },
  );
}

/** One call that reached the fake curator. */
export interface FakeCuratorCall {
  method: string;
  /** The CN of the caller's certificate (a node ID, `owner`), or `(none)`. */
  caller: string;
}

/** One TCP connection offered to the fake curator. */
export interface FakeCuratorConnection {
  port: number;
  from: string;
}

/** A running fake curator: what it saw, and how to stop it. */
export interface FakeCurator {
  readonly connections: FakeCuratorConnection[];
  readonly calls: FakeCuratorCall[];
  /** Forgets what it saw so far (after the test's own checks of it). */
  reset(): void;
  /** Stops the listeners and the gRPC server, and cuts every open connection. */
  stop(): Promise<void>;
}

/** The CN of the client certificate of `call`, or `(none)`. */
function callerOf(call: Pick<ServerUnaryCall<unknown, unknown>, "getAuthContext">): string {
  const cn = call.getAuthContext().sslPeerCertificate?.subject?.CN;
  return cn === undefined ? "(none)" : String(cn);
}

/**
 * Serves a fake curator as `rogue`, with its genuine certificate, on
 * `rogue.host` at each of `ports`:
 * - CuratorLocal.GetCurrentLeader: "the leader is me", at the advertised port;
 * - Curator.Watch(nodeInCluster): the caller's record (from `records`) with no roles;
 * - Curator.Watch(nodesInCluster): every record with no roles, but the rogue a consensus member;
 * - every other Curator method: answered (OK or UNIMPLEMENTED), and counted.
 */
export async function serveFakeCurator(
  rogue: RogueNode,
  ports: readonly number[],
  records: readonly curator.Node[],
): Promise<FakeCurator> {
  const calls: FakeCuratorCall[] = [];
  const connections: FakeCuratorConnection[] = [];
  const seen = (method: string, call: Parameters<typeof callerOf>[0]) =>
    calls.push({ method, caller: callerOf(call) });
  const stripped = (node: curator.Node): curator.Node => ({ ...node, roles: {} });
  const crowned = (node: curator.Node): curator.Node =>
    node.id === rogue.nodeId
      ? {
          ...node,
          roles: { consensusMember: common.NodeRoles_ConsensusMember.fromPartial({}) },
          status: common.NodeStatus.fromPartial({
            externalAddress: rogue.host,
            runningCurator: { port: advertisedCuratorPort },
          }),
        }
      : stripped(node);
  const recordOf = (id: string): curator.Node =>
    stripped(
      records.find((r) => r.id === id) ?? {
        id,
        publicKey: Buffer.alloc(0),
        state: common.NodeState.UP,
        labels: new Map(),
      },
    );
  const unimplemented =
    (method: string) =>
    (call: ServerUnaryCall<unknown, unknown>, cb: (e: Partial<ServiceError>) => void) => {
      seen(method, call);
      cb({ code: status.UNIMPLEMENTED, details: "rogue" });
    };

  const local: curator.CuratorLocalServer = {
    getCurrentLeader: (
      call: ServerWritableStream<curator.GetCurrentLeaderRequest, curator.GetCurrentLeaderResponse>,
    ) => {
      seen("CuratorLocal.GetCurrentLeader", call);
      // Kept open, like a real curator's answer stream.
      call.write({
        leaderNodeId: rogue.nodeId,
        leaderHost: rogue.host,
        leaderPort: advertisedCuratorPort,
        thisNodeId: rogue.nodeId,
      });
    },
    getCaCertificate: (call, callback) => {
      seen("CuratorLocal.GetCaCertificate", call);
      callback(null, { caCertificate: Buffer.alloc(0) });
    },
  };
  const fake: curator.CuratorServer = {
    watch: (call) => {
      seen("Curator.Watch", call);
      const kind = call.request.kind;
      call.write({
        nodes:
          kind?.$case === "nodeInCluster"
            ? [recordOf(kind.nodeInCluster.nodeId)]
            : records.map(crowned),
        nodeTombstones: [],
        progress:
          kind?.$case === "nodesInCluster"
            ? curator.WatchResponse_Progress.LAST_BACKLOGGED
            : curator.WatchResponse_Progress.UNSPECIFIED,
        revision: 0,
        nodeCount: kind?.$case === "nodesInCluster" ? records.length : 0,
        resumed: false,
        etcdClusterId: "",
      });
    },
    updateNodeStatus: (call, callback) => {
      seen("Curator.UpdateNodeStatus", call);
      callback(null, {});
    },
    heartbeat: (call) => {
      seen("Curator.Heartbeat", call);
      call.on("data", () => call.write({ health: common.NodeHealth.HEALTHY }));
      call.on("end", () => call.end());
      call.on("error", () => undefined);
    },
    registerNode: unimplemented("Curator.RegisterNode"),
    commitNode: unimplemented("Curator.CommitNode"),
    joinNode: unimplemented("Curator.JoinNode"),
    getConsensusStatus: unimplemented("Curator.GetConsensusStatus"),
    watchRevocations: (call) => {
      seen("Curator.WatchRevocations", call);
      call.emit("error", { code: status.UNIMPLEMENTED, details: "rogue" });
    },
  };

  const server = new Server();
  server.addService(curator.CuratorLocalService, local);
  server.addService(curator.CuratorService, fake);
  const listeners: NetServer[] = [];
  const sockets = new Set<Socket>();
  const stop = async () => {
    for (const socket of sockets) socket.destroy();
    await Promise.all(
      listeners.map((l) => new Promise<void>((resolve) => l.close(() => resolve()))),
    );
    server.forceShutdown();
  };
  try {
    const grpcPort = await new Promise<number>((resolve, reject) =>
      server.bindAsync(`${rogue.host}:0`, curatorServerCredentials(rogue.tls), (e, p) =>
        e ? reject(e) : resolve(p),
      ),
    );
    for (const port of ports) {
      const listener = createServer((socket) => {
        connections.push({ port, from: `${socket.remoteAddress}:${socket.remotePort}` });
        const upstream = createConnection({ host: rogue.host, port: grpcPort });
        for (const s of [socket, upstream]) {
          sockets.add(s);
          s.on("error", () => undefined);
          s.on("close", () => {
            sockets.delete(s);
            socket.destroy();
            upstream.destroy();
          });
        }
        socket.pipe(upstream).pipe(socket);
      });
      listeners.push(listener);
      await new Promise<void>((resolve, reject) => {
        listener.once("error", reject);
        listener.listen(port, rogue.host, () => resolve());
      });
    }
  } catch (e) {
    await stop();
    throw e;
  }
  return {
    connections,
    calls,
    reset: () => {
      connections.splice(0);
      calls.splice(0);
    },
    stop,
  };
}
