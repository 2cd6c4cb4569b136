/**
 * identify() of a call whose client has already gone: grpc-js's
 * getAuthContext() reads the certificate of the call's TLS socket, which is
 * null once the client closed it, and throws. The scale simulator's nodes hit
 * that under load (every such call answered INTERNAL, logged as a curator
 * bug); the caller is anonymous now, refused like any caller without a
 * certificate.
 */
import { TLSSocket } from "node:tls";
import { Server, type ServerUnaryCall } from "@grpc/grpc-js";
import { freePort } from "@metropolis/consensus/testing";
import { CertificateAuthority, generateKeyPair, tlsMaterial } from "@metropolis/pki";
import { curatorClientCredentials, curatorServerCredentials } from "../src/credentials";
import {
  identifier,
  identify,
  IdentityCache,
  requireEphemeral,
  requireNode,
  requireOwner,
  type Caller,
  type HasAuthContext,
} from "../src/identity";
import { askWho, WhoClient, whoService } from "./raw-services";

it("says what a refused caller presented with the article its kind takes", () => {
  const publicKey = Buffer.alloc(32);
  const node: Caller = { kind: "node", nodeId: "metropolis-00", publicKey };
  expect(() => requireOwner(node)).toThrow(
    "this call needs the owner's certificate, not a node certificate",
  );
  expect(() => requireEphemeral({ kind: "owner", publicKey })).toThrow(
    "this call needs a self-signed node certificate, not an owner certificate",
  );
  expect(() => requireOwner({ kind: "ephemeral", publicKey })).toThrow(
    "this call needs the owner's certificate, not an ephemeral certificate",
  );
  expect(() => requireNode({ kind: "owner", publicKey })).toThrow(
    "this call needs a node certificate, not an owner certificate",
  );
});

it("takes a call whose TLS socket is gone for an anonymous caller", async () => {
  const ca = await CertificateAuthority.create();
  const gone: HasAuthContext = {
    getAuthContext: () => {
      // What grpc-js throws: `getPeerCertificate()` returned null.
      throw new TypeError("Cannot read properties of null (reading 'raw')");
    },
  };
  await expect(identify(gone, ca.certificate)).resolves.toEqual({ kind: "anonymous" });
});

it("knows a caller it learnt while following when it leads, without reading its certificate again", async () => {
  const host = "127.0.41.3";
  const ca = await CertificateAuthority.create();
  const issued = async () => {
    const keys = generateKeyPair();
    const certificate = await ca.issueNodeCertificate(keys.publicKey, { ipAddresses: [host] });
    return tlsMaterial({ certificate, privateKey: keys.privateKey, ca: ca.certificate });
  };
  const [serverTls, nodeTls] = [await issued(), await issued()];
  const caDer = Buffer.from(ca.certificate.der);
  // What the server does with each call: set by each phase below.
  let handle: (call: HasAuthContext) => Promise<string> = async () => "";
  const server = new Server();
  server.addService(whoService, {
    who: (call: ServerUnaryCall<Buffer, Buffer>, done: (e: Error | null, b?: Buffer) => void) => {
      handle(call).then(
        (answer) => done(null, Buffer.from(answer)),
        (e: Error) => done(e),
      );
    },
  });
  const port = await freePort(host);
  await new Promise<void>((resolve, reject) =>
    server.bindAsync(`${host}:${port}`, curatorServerCredentials(serverTls), (e) =>
      e ? reject(e) : resolve(),
    ),
  );
  const client = new WhoClient(
    `${host}:${port}`,
    curatorClientCredentials(ca.certificate.toPem(), nodeTls),
  );
  const ask = () => askWho(client);
  const named = (caller: Awaited<ReturnType<ReturnType<typeof identifier>>>) =>
    caller.kind === "node" ? caller.nodeId : caller.kind;
  const reads = jest.spyOn(TLSSocket.prototype, "getPeerX509Certificate");
  try {
    const cache = new IdentityCache(caDer);
    // Following: the node asks who leads, and the curator learns who it is.
    handle = async (call) => {
      await cache.learn(call);
      return "follower";
    };
    expect(await ask()).toBe("follower");
    expect(reads).toHaveBeenCalledTimes(1);
    // Leading, with the curator's cache: the same connection is known.
    const leading = identifier(cache);
    handle = async (call) => named(await leading(call));
    const nodeId = await ask();
    expect(nodeId).toMatch(/^metropolis-/);
    expect(reads).toHaveBeenCalledTimes(1);
    // Control: an identifier with a cache of its own (one per leadership,
    // as before) reads and classifies the certificate again.
    const fresh = identifier(caDer);
    handle = async (call) => named(await fresh(call));
    expect(await ask()).toBe(nodeId);
    expect(reads).toHaveBeenCalledTimes(2);
  } finally {
    reads.mockRestore();
    client.close();
    server.forceShutdown();
  }
});
