/**
 * CuratorConnection and a curator address whose certificate does not verify
 * against the cluster CA (issue 37): right after `takeownership`, metroctl's
 * calls failed with "self-signed certificate in certificate chain" where a
 * certificate the cluster CA vouches for was about to be served. Such a
 * refusal is retried like an unreachable curator, within the caller's
 * deadline; at the deadline the caller is told the certificate did not
 * verify (CuratorCertificateNotVerifiedError), and no call ever reaches the
 * party that presented it. Real grpc-js servers and TLS on 127.0.0.1.
 */
import { Server, type ServerWritableStream } from "@grpc/grpc-js";
import { createServer as createTlsServer, type Server as TlsServer } from "node:tls";
import { freePort } from "@metropolis/consensus/testing";
import {
  CertificateAuthority,
  createEphemeralCertificate,
  generateKeyPair,
  nodeIdFromPublicKey,
  tlsMaterial,
} from "@metropolis/pki";
import { api, curator } from "@metropolis/proto";
import {
  CuratorCertificateNotVerifiedError,
  CuratorConnection,
  NoLeaderError,
  unaryCall,
} from "../src/curator-client";
import { curatorServerCredentials, type TlsPem } from "../src/credentials";

const host = "127.0.0.1";

/**
 * A curator of node `nodeId` on `port`, serving with `tls`, that names the
 * curator on `leaderPort` (itself by default) as the leader, and answers
 * Management.GetClusterInfo; counts the GetClusterInfo calls that reached it.
 */
async function curatorOn(port: number, nodeId: string, tls: TlsPem, leaderPort = port) {
  const server = new Server();
  const reached = { calls: 0 };
  const local: curator.CuratorLocalServer = {
    getCurrentLeader: (
      call: ServerWritableStream<curator.GetCurrentLeaderRequest, curator.GetCurrentLeaderResponse>,
    ) => {
      call.write({ leaderNodeId: nodeId, leaderHost: host, leaderPort, thisNodeId: nodeId });
    },
    getCaCertificate: (_call, callback) => callback(null, { caCertificate: Buffer.alloc(0) }),
  };
  server.addService(curator.CuratorLocalService, local);
  server.addService(api.ManagementService, {
    getClusterInfo: (
      _call: unknown,
      callback: (e: null, res: api.GetClusterInfoResponse) => void,
    ) => {
      reached.calls++;
      callback(null, api.GetClusterInfoResponse.fromPartial({}));
    },
  });
  await new Promise<number>((resolve, reject) =>
    server.bindAsync(`${host}:${port}`, curatorServerCredentials(tls), (e, p) =>
      e ? reject(e) : resolve(p),
    ),
  );
  return { reached, stop: () => server.forceShutdown() };
}

/**
 * A TLS listener on `port` presenting `tls.cert` (as a curator would, TLS
 * 1.3 and h2), whose `refused` resolves at the first client that aborts the
 * handshake: the client did not accept the certificate.
 */
async function interimListener(port: number, tls: TlsPem) {
  let refusedOnce: () => void = () => undefined;
  const refused = new Promise<void>((resolve) => (refusedOnce = resolve));
  const server: TlsServer = createTlsServer({
    cert: tls.cert,
    key: tls.key,
    minVersion: "TLSv1.3",
    ALPNProtocols: ["h2"],
  });
  server.on("tlsClientError", () => refusedOnce());
  // A client that refuses the certificate after the server's half of the handshake.
  server.on("secureConnection", (socket) => {
    socket.on("error", () => refusedOnce());
    socket.on("close", () => refusedOnce());
  });
  await new Promise<void>((resolve) => server.listen(port, host, resolve));
  return {
    refused,
    close: () => new Promise<void>((resolve) => server.close(() => resolve())),
  };
}

/** Management.GetClusterInfo through `connection`, within `timeoutMs`. */
const clusterInfo = (connection: CuratorConnection, timeoutMs: number) =>
  connection.call(
    (leader) => unaryCall((req, cb) => leader.management.getClusterInfo(req, cb), {}),
    { timeoutMs },
  );

/** What `p` failed with (undefined when it succeeded). */
const failureOf = (p: Promise<unknown>): Promise<unknown> =>
  p.then(
    () => undefined,
    (e: unknown) => e,
  );

describe("CuratorConnection and a curator certificate that does not verify against the CA", () => {
  let ca: CertificateAuthority;
  let nodeId: string;
  /** The node's certificate of the cluster CA. */
  let nodeTls: TlsPem;
  /** The node's key in a certificate of a self-signed CA that is not the cluster's, sent with it. */
  let selfSignedChain: TlsPem;
  /** The node's key in a self-signed certificate. */
  let selfSigned: TlsPem;

  beforeAll(async () => {
    ca = await CertificateAuthority.create();
    const interimCa = await CertificateAuthority.create();
    const keys = generateKeyPair();
    nodeId = nodeIdFromPublicKey(keys.publicKey);
    const ipAddresses = [host];
    nodeTls = tlsMaterial({
      certificate: await ca.issueNodeCertificate(keys.publicKey, { ipAddresses }),
      privateKey: keys.privateKey,
      ca: ca.certificate,
    });
    const interim = tlsMaterial({
      certificate: await interimCa.issueNodeCertificate(keys.publicKey, { ipAddresses }),
      privateKey: keys.privateKey,
      ca: interimCa.certificate,
    });
    // Its chain sent whole: "self-signed certificate in certificate chain".
    selfSignedChain = { ...interim, cert: interim.cert + interim.ca };
    const ephemeral = await createEphemeralCertificate(keys.privateKey);
    selfSigned = tlsMaterial({
      certificate: ephemeral,
      privateKey: keys.privateKey,
      ca: ephemeral,
    });
  });

  it("reaches the curator once its address presents a certificate of the CA, within its deadline", async () => {
    const port = await freePort(host);
    const interim = await interimListener(port, selfSignedChain);
    // An operator's client: a bare address, as metroctl dials.
    const connection = new CuratorConnection({
      endpoints: [{ host, port }],
      ca: ca.certificate.toPem(),
    });
    const started = performance.now();
    const timeoutMs = 20_000;
    let served: Awaited<ReturnType<typeof curatorOn>> | undefined;
    try {
      const call = clusterInfo(connection, timeoutMs);
      const outcome = failureOf(call);
      // The client has been refused the interim certificate: the curator restarts on the same
      // port with its node certificate.
      await interim.refused;
      await interim.close();
      served = await curatorOn(port, nodeId, nodeTls);
      expect(await outcome).toBeUndefined();
      expect(performance.now() - started).toBeLessThan(timeoutMs);
      expect(served.reached.calls).toBe(1);
    } finally {
      connection.close();
      await interim.close().catch(() => undefined);
      served?.stop();
    }
  });

  it.each([
    [
      "a self-signed CA's chain",
      () => selfSignedChain,
      /self-signed certificate in certificate chain/,
    ],
    ["a self-signed certificate", () => selfSigned, /certificate/],
  ])(
    "fails at its deadline, saying the certificate did not verify, where %s is presented for good",
    async (_what, tls, refusal) => {
      const port = await freePort(host);
      const untrusted = await curatorOn(port, nodeId, tls());
      const connection = new CuratorConnection({
        endpoints: [{ host, port }],
        ca: ca.certificate.toPem(),
      });
      const timeoutMs = 2_000;
      try {
        const started = performance.now();
        const error = await failureOf(clusterInfo(connection, timeoutMs));
        const tookMs = performance.now() - started;
        expect(error).toBeInstanceOf(CuratorCertificateNotVerifiedError);
        // Whoever handles a NoLeaderError handles it.
        expect(error).toBeInstanceOf(NoLeaderError);
        expect(String(error)).toMatch(/did not verify against the cluster CA/);
        expect(String(error)).toMatch(refusal);
        // Retried until the deadline, not failed at the first refusal; and not long past it
        // (the search for the leader may end up to one backoff, 1.5 s at most, after it).
        expect(tookMs).toBeGreaterThanOrEqual(timeoutMs - 50);
        expect(tookMs).toBeLessThan(timeoutMs + 2_500);
        expect(untrusted.reached.calls).toBe(0);
      } finally {
        connection.close();
        untrusted.stop();
      }
    },
  );

  it("fails the same way when the leader a verified curator names presents one", async () => {
    const leaderPort = await freePort(host);
    const untrusted = await curatorOn(leaderPort, nodeId, selfSignedChain);
    const honestPort = await freePort(host);
    const honest = await curatorOn(honestPort, nodeId, nodeTls, leaderPort);
    const connection = new CuratorConnection({
      endpoints: [{ host, port: honestPort }],
      ca: ca.certificate.toPem(),
    });
    const timeoutMs = 2_000;
    try {
      const started = performance.now();
      const error = await failureOf(clusterInfo(connection, timeoutMs));
      const tookMs = performance.now() - started;
      expect(error).toBeInstanceOf(CuratorCertificateNotVerifiedError);
      expect(String(error)).toMatch(/did not verify against the cluster CA/);
      expect(tookMs).toBeGreaterThanOrEqual(timeoutMs - 50);
      expect(untrusted.reached.calls + honest.reached.calls).toBe(0);
    } finally {
      connection.close();
      untrusted.stop();
      honest.stop();
    }
  });
});
