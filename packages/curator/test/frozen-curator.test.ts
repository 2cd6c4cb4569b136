/**
 * A curator whose process hangs keeps its TCP connection open; only HTTP/2
 * keepalive notices that nobody is there any more. The curator here is a
 * real gRPC server in its own process (built code), frozen with SIGSTOP
 * while a client holds a Heartbeat stream open on it.
 */
import { spawn, type ChildProcess } from "node:child_process";
import { once } from "node:events";
import { join } from "node:path";
import { status, type ServiceError } from "@grpc/grpc-js";
import { freePort } from "@metropolis/consensus/testing";
import {
  CertificateAuthority,
  generateKeyPair,
  nodeIdFromPublicKey,
  tlsMaterial,
} from "@metropolis/pki";
import type { curator } from "@metropolis/proto";
import { eventually } from "@metropolis/supervisor/testing";
import { CuratorConnection } from "../src/curator-client";

/** Built code of a package of this repository (npm test builds before it runs jest). */
const dist = (dir: string) => join(__dirname, "..", "..", "..", dir, "dist");

/** The frozen curator: CuratorLocal naming itself leader, and Heartbeat answering every beat. */
const serverScript = `
const grpc = require(require.resolve("@grpc/grpc-js", { paths: [${JSON.stringify(dist("packages/curator"))}] }));
const { curator, common } = require(${JSON.stringify(dist("proto"))});
const { curatorServerCredentials } = require(${JSON.stringify(dist("packages/curator"))});
const { host, port, nodeId, cert, key, ca } = JSON.parse(process.env.FROZEN_CURATOR);
const server = new grpc.Server();
server.addService(curator.CuratorLocalService, {
  getCurrentLeader: (call) => call.write({ leaderNodeId: nodeId, leaderHost: host, leaderPort: port }),
  getCACertificate: (call, cb) => cb({ code: grpc.status.UNIMPLEMENTED }),
});
server.addService(curator.CuratorService, {
  heartbeat: (call) => call.on("data", () => call.write({ health: common.NodeHealth.HEALTHY })),
});
server.bindAsync(host + ":" + port, curatorServerCredentials({ cert, key, ca }), (e) => {
  if (e) throw e;
  process.stdout.write("serving\\n");
});
`;

describe("CuratorConnection keepalive", () => {
  let child: ChildProcess | undefined;
  afterEach(async () => {
    if (child && child.exitCode === null && child.signalCode === null) {
      child.kill("SIGCONT");
      child.kill("SIGKILL");
      await once(child, "exit");
    }
  });

  it("fails an open stream on a curator that stopped answering", async () => {
    const host = "127.0.0.1";
    const port = await freePort(host);
    const ca = await CertificateAuthority.create();
    const issue = async () => {
      const keys = generateKeyPair();
      const certificate = await ca.issueNodeCertificate(keys.publicKey, { ipAddresses: [host] });
      const tls = tlsMaterial({ certificate, privateKey: keys.privateKey, ca: ca.certificate });
      return { nodeId: nodeIdFromPublicKey(keys.publicKey), ...tls };
    };
    const server = await issue();
    child = spawn(process.execPath, ["-e", serverScript], {
      env: { ...process.env, FROZEN_CURATOR: JSON.stringify({ host, port, ...server }) },
      stdio: ["ignore", "pipe", "inherit"],
    });
    await once(child.stdout!, "data");

    const client = await issue();
    const connection = new CuratorConnection({
      endpoints: [{ host, port }],
      ca: server.ca,
      identity: client,
      keepalive: { timeMs: 200, timeoutMs: 500 },
    });
    try {
      const errors: ServiceError[] = [];
      const stream = await connection.call(async (leader) => {
        const call = leader.curator.heartbeat();
        call.on("error", (e: ServiceError) => errors.push(e));
        const answered = once(call, "data") as Promise<[curator.HeartbeatResponse]>;
        call.write({});
        await answered;
        return call;
      });
      // Alive: beats are still answered.
      const again = once(stream, "data");
      stream.write({});
      await again;
      expect(errors).toEqual([]);

      child.kill("SIGSTOP");
      const failed = await eventually(() => errors[0], "the stream to fail on the frozen curator");
      expect(failed.code).toBe(status.UNAVAILABLE);
    } finally {
      connection.close();
    }
  });
});
