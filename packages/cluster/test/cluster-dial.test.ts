/**
 * The retry policy of enrolment calls: which failures mean "the cluster
 * cannot be reached right now" (retried for ever) and which are the
 * cluster's answer (final: the node stops, or gives up on its cluster).
 */
import { createServer, type Server as NetServer, type Socket } from "node:net";
import {
  Metadata,
  Server,
  status,
  type sendUnaryData,
  type ServerUnaryCall,
  type ServerWritableStream,
  type ServiceError,
} from "@grpc/grpc-js";
import { curatorServerCredentials, NoLeaderError, unaryCall } from "@metropolis/curator";
import {
  CertificateAuthority,
  createEphemeralCertificate,
  generateKeyPair,
  nodeIdFromPublicKey,
  tlsMaterial,
} from "@metropolis/pki";
import { curator } from "@metropolis/proto";
import { MockContext } from "@metropolis/supervisor/testing";
import { callCluster, dialWithEphemeral, isUnreachable } from "../src/cluster-dial";
import { EnrolmentAnswerTimeoutError } from "../src/errors";

function grpcError(code: status, details: string): ServiceError {
  return Object.assign(new Error(`${code} ${status[code]}: ${details}`), {
    code,
    details,
    metadata: new Metadata(),
  });
}

describe("isUnreachable", () => {
  it.each([
    ["UNAVAILABLE", status.UNAVAILABLE, "No connection established"],
    ["DEADLINE_EXCEEDED", status.DEADLINE_EXCEEDED, "Deadline exceeded"],
    ["UNIMPLEMENTED", status.UNIMPLEMENTED, "a follower answered"],
    // Found by the chaos run: a channel closed under a JoinNode call while the
    // leader changed made a restarted node give up on its cluster.
    ["CANCELLED", status.CANCELLED, "Call cancelled"],
  ])("retries %s (%s)", (_name, code, details) => {
    expect(isUnreachable(grpcError(code, details))).toBe(true);
  });

  it.each([
    ["PERMISSION_DENIED", status.PERMISSION_DENIED, "wrong ticket"],
    ["NOT_FOUND", status.NOT_FOUND, "unknown node"],
    ["FAILED_PRECONDITION", status.FAILED_PRECONDITION, "node is decommissioned"],
    ["INVALID_ARGUMENT", status.INVALID_ARGUMENT, "label too long"],
    ["ABORTED", status.ABORTED, "conflict"],
  ])("takes %s (%s) as the cluster's answer", (_name, code, details) => {
    expect(isUnreachable(grpcError(code, details))).toBe(false);
  });

  it("never retries a certificate the node's CA does not verify", () => {
    const forged = grpcError(status.UNAVAILABLE, "unable to verify the first certificate");
    expect(isUnreachable(forged)).toBe(false);
  });

  it("retries when the leader did not answer an attempt in time", () => {
    expect(isUnreachable(new EnrolmentAnswerTimeoutError("JoinNode", "metropolis-00", 500))).toBe(
      true,
    );
  });

  it("retries when no curator names a leader", () => {
    const noLeader = new NoLeaderError(
      [],
      grpcError(status.DEADLINE_EXCEEDED, "Deadline exceeded"),
    );
    expect(isUnreachable(noLeader)).toBe(true);
  });
});

/**
 * A curator names a leader whose machine is gone (after a power cut of the
 * whole cluster, the last leader's election key outlives it until its lease
 * expires): a TCP port that takes the connection and never says a word, so
 * that the TLS handshake, on which grpc-js sets no timeout, never ends — as
 * a machine that drops every packet never lets the connection begin. The
 * enrolment call must give that leader up and find the real one.
 */
describe("callCluster", () => {
  const host = "127.0.0.1";
  let ca: CertificateAuthority;
  let curatorServer: Server;
  let silent: NetServer;
  const sockets: Socket[] = [];
  let live: { nodeId: string; port: number };
  let gone: { nodeId: string; port: number };
  /** Questions who leads the live curator was asked: the first is answered with the gone leader. */
  let questions = 0;
  /** JoinNode calls the live curator answered. */
  let joins = 0;

  beforeAll(async () => {
    ca = await CertificateAuthority.create();
    const keys = generateKeyPair();
    const certificate = await ca.issueNodeCertificate(keys.publicKey, { ipAddresses: [host] });
    const tls = tlsMaterial({ certificate, privateKey: keys.privateKey, ca: ca.certificate });
    const liveId = nodeIdFromPublicKey(keys.publicKey);

    silent = createServer((socket) => sockets.push(socket));
    await new Promise<void>((resolve) => silent.listen(0, host, resolve));
    const silentAddress = silent.address();
    if (silentAddress === null || typeof silentAddress === "string") {
      throw new Error("the silent server has no TCP address");
    }
    gone = { nodeId: nodeIdFromPublicKey(generateKeyPair().publicKey), port: silentAddress.port };

    curatorServer = new Server();
    curatorServer.addService(curator.CuratorLocalService, {
      getCurrentLeader: (call: ServerWritableStream<unknown, curator.GetCurrentLeaderResponse>) => {
        const leader = ++questions === 1 ? gone : live;
        call.write(
          curator.GetCurrentLeaderResponse.fromPartial({
            leaderNodeId: leader.nodeId,
            leaderHost: host,
            leaderPort: leader.port,
            thisNodeId: liveId,
          }),
        );
      },
    });
    curatorServer.addService(curator.CuratorService, {
      joinNode: (
        _call: ServerUnaryCall<curator.JoinNodeRequest, curator.JoinNodeResponse>,
        callback: sendUnaryData<curator.JoinNodeResponse>,
      ) => {
        joins++;
        callback(null, curator.JoinNodeResponse.fromPartial({ clusterUnlockKey: cuk }));
      },
    });
    const port = await new Promise<number>((resolve, reject) =>
      curatorServer.bindAsync(`${host}:0`, curatorServerCredentials(tls), (e, p) =>
        e ? reject(e) : resolve(p),
      ),
    );
    live = { nodeId: liveId, port };
  });

  afterAll(async () => {
    curatorServer?.forceShutdown();
    for (const socket of sockets) socket.destroy();
    await new Promise<void>((resolve) => (silent ? silent.close(() => resolve()) : resolve()));
  });

  const cuk = Buffer.alloc(32, 7);

  it("gives up a named leader that never answers, and joins through the live one", async () => {
    const joinKey = generateKeyPair().privateKey;
    const connection = dialWithEphemeral(
      [{ host, port: live.port, nodeId: live.nodeId }],
      ca.certificate.der,
      await createEphemeralCertificate(joinKey),
      joinKey,
    );
    const ctx = new MockContext("root.enrolment");
    try {
      const answer = await callCluster(
        ctx,
        connection,
        "JoinNode",
        (leader) =>
          unaryCall<curator.JoinNodeRequest, curator.JoinNodeResponse>(
            leader.curator.joinNode.bind(leader.curator),
            curator.JoinNodeRequest.fromPartial({}),
          ),
        { answerTimeoutMs: 500 },
      );
      expect(answer.clusterUnlockKey.equals(cuk)).toBe(true);
    } finally {
      connection.close();
      ctx.abort();
    }
    // It went to the gone leader first, was told nothing, and said why it retried.
    expect(sockets.length).toBeGreaterThan(0);
    expect(questions).toBeGreaterThanOrEqual(2);
    expect(joins).toBe(1);
    expect(ctx.lines.map((l) => `${l.level} ${l.message}`)).toContainEqual(
      `warn JoinNode: cluster unreachable (JoinNode: leader ${gone.nodeId} did not answer within 500 ms); retrying in 250 ms`,
    );
  }, 20_000);
});
