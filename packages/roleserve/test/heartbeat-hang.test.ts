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
import { HeartbeatTimeoutError } from "../src/errors";
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

describe("heartbeatWorker", () => {
  it("gives up a leader that stops answering, with HeartbeatTimeoutError", async () => {
    const host = "127.0.0.1";
    const port = await freePort(host);
    const ca = await CertificateAuthority.create();
    const serverIdentity = await credentialsFrom(ca, host);
    const stop = new AbortController();
    let received = 0;
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
      heartbeat: (
        call: ServerDuplexStream<curator.HeartbeatRequest, curator.HeartbeatResponse>,
      ) => {
        call.on("data", () => {
          received++;
          // Answers the first heartbeat only; then hangs with the stream open.
          if (received === 1) call.write({ health: common.NodeHealth.HEALTHY });
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
    try {
      const values = new RoleserveValues();
      values.curatorConnection.set({ credentials: node, connection });
      const ctx = new MockContext("root.heartbeat");
      const error = await heartbeatWorker(values, { intervalMs: 50, replyTimeoutMs: 300 })(
        ctx,
      ).then(
        () => undefined,
        (e: unknown) => e,
      );
      expect(error).toBeInstanceOf(HeartbeatTimeoutError);
      expect(ctx.state).toBe("healthy");
      expect(received).toBe(2);
    } finally {
      connection.close();
      stop.abort();
      server.forceShutdown();
    }
  });
});
