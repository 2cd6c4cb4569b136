/**
 * The certificates are only useful if OpenSSL (Node TLS, and through the same
 * library grpc-js) accepts them: real TLS 1.3 mutual-auth handshakes on
 * 127.0.0.1 between a node (server) and a user (client).
 */
import type { AddressInfo } from "node:net";
import { connect, createServer, type Server, type TLSSocket } from "node:tls";
import {
  CertificateAuthority,
  generateKeyPair,
  nodeIdFromPublicKey,
  tlsMaterial,
  type RevocationList,
  type TlsMaterial,
} from "@metropolis/pki";

interface Party {
  readonly material: TlsMaterial;
  readonly serial: bigint;
}

let ca: CertificateAuthority;
let node: Party;
let nodeId: string;
let user: Party;

beforeAll(async () => {
  ca = await CertificateAuthority.create();
  const nodeKey = generateKeyPair();
  nodeId = nodeIdFromPublicKey(nodeKey.publicKey);
  const nodeCert = await ca.issueNodeCertificate(nodeKey.publicKey, { ipAddresses: ["127.0.0.1"] });
  node = {
    material: tlsMaterial({
      certificate: nodeCert,
      privateKey: nodeKey.privateKey,
      ca: ca.certificate,
    }),
    serial: nodeCert.serial,
  };
  const userKey = generateKeyPair();
  const userCert = await ca.issueUserCertificate("owner", userKey.publicKey);
  user = {
    material: tlsMaterial({
      certificate: userCert,
      privateKey: userKey.privateKey,
      ca: ca.certificate,
    }),
    serial: userCert.serial,
  };
});

describe("TLS 1.3 with Ed25519 certificates", () => {
  it("completes a mutually authenticated handshake between a node and a user", async () => {
    await withServer(node.material, undefined, async (port, accepted) => {
      const socket = await connectTo(port, user.material);
      try {
        expect(socket.authorized).toBe(true);
        expect(socket.getProtocol()).toBe("TLSv1.3");
        expect(socket.getPeerCertificate().subject.CN).toBe(nodeId);
        const serverSide = await accepted;
        expect(serverSide.authorized).toBe(true);
        expect(serverSide.getPeerCertificate().subject.CN).toBe("owner");
        // Data flows both ways.
        serverSide.write("hello from node");
        const [reply] = (await onceData(socket)) as [Buffer];
        expect(reply.toString()).toBe("hello from node");
      } finally {
        socket.destroy();
      }
    });
  });

  it("rejects a client whose certificate comes from another CA", async () => {
    const other = await CertificateAuthority.create();
    const key = generateKeyPair();
    const foreign = tlsMaterial({
      certificate: await other.issueUserCertificate("intruder", key.publicKey),
      privateKey: key.privateKey,
      ca: ca.certificate,
    });
    await withServer(node.material, undefined, async (port, _accepted, refused) => {
      await expect(connectAndExchange(port, foreign)).rejects.toThrow();
      expect(await refused).toBe("UNABLE_TO_VERIFY_LEAF_SIGNATURE");
    });
  });

  it("rejects a revoked client when the server is given the CA's CRL", async () => {
    const crl: RevocationList = await ca.revoke(await ca.createCrl(), user.serial);
    await withServer(node.material, crl.toPem(), async (port, _accepted, refused) => {
      await expect(connectAndExchange(port, user.material)).rejects.toThrow();
      expect(await refused).toBe("CERT_REVOKED");
    });
    // The same client is accepted with the empty CRL.
    await withServer(node.material, (await ca.createCrl()).toPem(), async (port) => {
      await expect(connectAndExchange(port, user.material)).resolves.toBe("pong");
    });
  });
});

async function withServer(
  material: TlsMaterial,
  crl: string | undefined,
  body: (port: number, accepted: Promise<TLSSocket>, refused: Promise<string>) => Promise<void>,
): Promise<void> {
  let resolveAccepted: (socket: TLSSocket) => void = () => undefined;
  const accepted = new Promise<TLSSocket>((resolve) => (resolveAccepted = resolve));
  let resolveRefused: (reason: string) => void = () => undefined;
  const refused = new Promise<string>((resolve) => (resolveRefused = resolve));
  const sockets = new Set<TLSSocket>();
  const server: Server = createServer(
    {
      ...material,
      ...(crl ? { crl } : {}),
      requestCert: true,
      rejectUnauthorized: true,
      minVersion: "TLSv1.3",
    },
    (socket) => {
      sockets.add(socket);
      resolveAccepted(socket);
      socket.on("data", () => socket.write("pong"));
    },
  );
  // Node refuses an unauthorized client by closing the connection without an
  // alert; why it refused is only recorded on the server's socket.
  server.on("tlsClientError", (error, socket) =>
    resolveRefused(String(socket.authorizationError ?? error.message)),
  );
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  try {
    await body((server.address() as AddressInfo).port, accepted, refused);
  } finally {
    for (const socket of sockets) socket.destroy();
    await new Promise<void>((resolve) => server.close(() => resolve()));
  }
}

function connectTo(port: number, material: TlsMaterial): Promise<TLSSocket> {
  return new Promise((resolve, reject) => {
    const socket = connect({
      host: "127.0.0.1",
      port,
      servername: nodeId,
      ...material,
      rejectUnauthorized: true,
      minVersion: "TLSv1.3",
    });
    socket.once("secureConnect", () => resolve(socket));
    socket.once("error", reject);
  });
}

/**
 * Connects and sends "ping". In TLS 1.3 the server checks the client
 * certificate after the client considers the handshake done, so a refused
 * client only learns it when reading: resolves with the reply, rejects when
 * the server closes the connection instead.
 */
async function connectAndExchange(port: number, material: TlsMaterial): Promise<string> {
  const socket = await connectTo(port, material);
  try {
    socket.write("ping");
    const reply = await new Promise<string>((resolve, reject) => {
      socket.once("data", (data: Buffer) => resolve(data.toString()));
      socket.once("error", reject);
      socket.once("end", () => reject(new Error("server closed the connection")));
    });
    return reply;
  } finally {
    socket.destroy();
  }
}

function onceData(socket: TLSSocket): Promise<unknown[]> {
  return new Promise((resolve, reject) => {
    socket.once("data", (...args: unknown[]) => resolve(args));
    socket.once("error", reject);
  });
}
