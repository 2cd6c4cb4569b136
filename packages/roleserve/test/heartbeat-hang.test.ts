/**
 * A curator leader that hangs keeps its connection open: only a deadline on
 * the heartbeat's answer notices it. The curator here is a real gRPC server
 * over real mTLS that stops answering after the first heartbeat, as a
 * frozen leader process would.
 */
import { Server, type ServerDuplexStream } from "@grpc/grpc-js";
import { freePort } from "@metropolis/consensus/testing";
import {
  CuratorConnection,
  curatorLocalServer,
  curatorServerCredentials,
} from "@metropolis/curator";
import { MemoryValue } from "@metropolis/event";
import { CertificateAuthority, generateKeyPair, nodeIdFromPublicKey } from "@metropolis/pki";
import { common, curator } from "@metropolis/proto";
import { MockContext } from "@metropolis/supervisor/testing";
import winston from "winston";
import { CuratorStreamError, HeartbeatTimeoutError } from "../src/errors";
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
 * connection to it.
 */
async function hangingLeader(answered: number) {
  const host = "127.0.0.1";
  const port = await freePort(host);
  const ca = await CertificateAuthority.create();
  const serverIdentity = await credentialsFrom(ca, host);
  const stop = new AbortController();
  const heartbeats = { received: 0 };
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
    heartbeats,
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
