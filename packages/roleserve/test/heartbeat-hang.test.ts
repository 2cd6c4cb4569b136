/**
 * A curator leader that hangs keeps its connection open: only a deadline on
 * the heartbeat's answer notices it. The curator here is a real gRPC server
 * over real mTLS that stops answering after the first heartbeat, as a
 * frozen leader process would.
 */
import { Server, type ServerDuplexStream, type ServerWritableStream } from "@grpc/grpc-js";
import { freePort } from "@metropolis/consensus/testing";
import {
  CuratorConnection,
  curatorLocalServer,
  curatorServerCredentials,
} from "@metropolis/curator";
import { MemoryValue } from "@metropolis/event";
import { CertificateAuthority, generateKeyPair, nodeIdFromPublicKey } from "@metropolis/pki";
import { common, curator } from "@metropolis/proto";
import { eventually, MockContext } from "@metropolis/supervisor/testing";
import winston from "winston";
import { openWatch } from "../src/curator-calls";
import { CuratorStreamError, HeartbeatTimeoutError, LeaderGivenUpError } from "../src/errors";
import { heartbeatWorker } from "../src/heartbeat";
import { credentialsPem, type NodeCredentials } from "../src/node-credentials";
import { RoleserveValues } from "../src/values";

async function credentialsFrom(ca: CertificateAuthority, host: string): Promise<NodeCredentials> {
  const keys = generateKeyPair();
  return {
    nodeId: nodeIdFromPublicKey(keys.publicKey),
    privateKey: keys.privateKey,
    certificate: (await ca.issueNodeCertificate(keys.publicKey, { ipAddresses: [host] })).der,
    caCertificate: ca.certificate.der,
  };
}

/**
 * A curator leader (real gRPC, real mTLS) that answers the first `answered`
 * heartbeats of a stream and then hangs with the stream open, and a node's
 * connection to it. A Watch on it gets its first message and nothing more
 * (with `watchAnswered` false, not even that).
 */
async function hangingLeader(answered: number, watchAnswered = true) {
  const host = "127.0.0.1";
  const port = await freePort(host);
  const ca = await CertificateAuthority.create();
  const serverIdentity = await credentialsFrom(ca, host);
  const stop = new AbortController();
  const heartbeats = { received: 0 };
  const watches = { opened: 0 };
  const server = new Server();
  server.addService(
    curator.CuratorLocalService,
    curatorLocalServer({
      nodeId: serverIdentity.nodeId,
      leader: new MemoryValue({ nodeId: serverIdentity.nodeId, host, port }),
      caCertificate: credentialsPem(serverIdentity).ca,
      logger: winston.createLogger({ silent: true }),
      signal: stop.signal,
    }),
  );
  const hanging: Partial<curator.CuratorServer> = {
    heartbeat: (call: ServerDuplexStream<curator.HeartbeatRequest, curator.HeartbeatResponse>) => {
      call.on("data", () => {
        heartbeats.received++;
        if (heartbeats.received <= answered) call.write({ health: common.NodeHealth.HEALTHY });
      });
    },
    watch: (call: ServerWritableStream<curator.WatchRequest, curator.WatchResponse>) => {
      watches.opened++;
      if (watchAnswered) call.write(curator.WatchResponse.fromPartial({}));
    },
  };
  server.addService(curator.CuratorService, hanging as curator.CuratorServer);
  await new Promise<void>((resolve, reject) =>
    server.bindAsync(
      `${host}:${port}`,
      curatorServerCredentials(credentialsPem(serverIdentity)),
      (e) => (e ? reject(e) : resolve()),
    ),
  );
  const node = await credentialsFrom(ca, host);
  const tls = credentialsPem(node);
  const connection = new CuratorConnection({
    endpoints: [{ host, port, nodeId: serverIdentity.nodeId }],
    ca: tls.ca,
    identity: tls,
  });
  const values = new RoleserveValues();
  values.curatorConnection.set({ credentials: node, connection });
  return {
    values,
    connection,
    serverNodeId: serverIdentity.nodeId,
    heartbeats,
    watches,
    close: () => {
      connection.close();
      stop.abort();
      server.forceShutdown();
    },
  };
}

/** Runs the worker (heartbeats every 50 ms, answers awaited 300 ms, the first one 600 ms) until it fails. */
async function failure(values: RoleserveValues, ctx: MockContext): Promise<unknown> {
  const opts = { intervalMs: 50, replyTimeoutMs: 300, firstReplyTimeoutMs: 600 };
  return heartbeatWorker(
    values,
    opts,
  )(ctx).then(
    () => undefined,
    (e: unknown) => e,
  );
}

describe("heartbeatWorker", () => {
  it("gives up a leader that stops answering, with HeartbeatTimeoutError", async () => {
    const leader = await hangingLeader(1);
    try {
      const ctx = new MockContext("root.heartbeat");
      expect(await failure(leader.values, ctx)).toBeInstanceOf(HeartbeatTimeoutError);
      expect(ctx.state).toBe("healthy");
      expect(leader.heartbeats.received).toBe(2);
    } finally {
      leader.close();
    }
  });

  it("gives the leader up with the node's other streams on it, whose users look for the next", async () => {
    const leader = await hangingLeader(1);
    const stop = new AbortController();
    try {
      // Another worker's stream on the same leader, open and answered.
      const { stream: watch, leader: watched } = await openWatch(
        leader.connection,
        { $case: "nodeInCluster", nodeInCluster: { nodeId: "node-x" } },
        stop.signal,
      );
      let ended: unknown = "still open";
      watch.ended.catch((e: unknown) => (ended = e));
      const heartbeatFailure = await failure(leader.values, new MockContext("root.heartbeat"));
      expect(heartbeatFailure).toBeInstanceOf(HeartbeatTimeoutError);
      // Given up, as unresponsive: the connection's users are told...
      expect(watched.dropped.aborted).toBe(true);
      expect(watched.dropped.reason).toBe(heartbeatFailure);
      // ...and the Watch ended with it, in the same turn, saying why,
      // where only the connection's keepalive (tens of seconds) ended it.
      expect(ended).toBeInstanceOf(CuratorStreamError);
      const why = ended instanceof CuratorStreamError ? ended.cause : undefined;
      expect(why).toBeInstanceOf(LeaderGivenUpError);
      expect(why).toMatchObject({ leaderNodeId: leader.serverNodeId, cause: heartbeatFailure });
    } finally {
      stop.abort();
      leader.close();
    }
  });

  it("opens a stream again, rather than failing, when its leader is given up before it answered", async () => {
    // The curator here names itself and answers that question: the search
    // after the drop finds it again (it was only slow), and the Watch is
    // opened there once more.
    const leader = await hangingLeader(1, false);
    const stop = new AbortController();
    const kind = { $case: "nodeInCluster" as const, nodeInCluster: { nodeId: "node-x" } };
    const opening = openWatch(leader.connection, kind, stop.signal).catch((e: unknown) => e);
    try {
      await eventually(() => leader.watches.opened === 1, "the watch opened");
      const given = await leader.connection.call(async (clients) => clients);
      leader.connection.leaderUnresponsive(given, new Error("another worker's heartbeat"));
      await eventually(() => leader.watches.opened === 2, "the watch opened again");
    } finally {
      stop.abort();
      await opening;
      leader.close();
    }
  });

  it("gives up a leader that never answers the first heartbeat of its stream", async () => {
    const leader = await hangingLeader(0);
    try {
      const ctx = new MockContext("root.heartbeat");
      const error = await failure(leader.values, ctx);
      expect(error).toBeInstanceOf(CuratorStreamError);
      // Given up at the first answer's own deadline, not the later answers'.
      expect(String(error)).toContain("no first message within 600 ms");
      expect(ctx.state).not.toBe("healthy");
      expect(leader.heartbeats.received).toBe(1);
    } finally {
      leader.close();
    }
  });
});
