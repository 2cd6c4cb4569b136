/**
 * The node's credentials on its data directory: saved and loaded back, and
 * every file that does not hold what it should is refused with an error
 * naming that file (an operator with a broken node must not have to guess
 * which of its PEM files is the broken one).
 */
import { mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { FileCorruptedError, placeNodeRoot, type NodeRoot } from "@metropolis/localstorage";
import {
  CertificateAuthority,
  encodePem,
  generateKeyPair,
  nodeIdFromPublicKey,
  privateKeyToPem,
} from "@metropolis/pki";
import { CredentialsMismatchError } from "../src/errors";
import { loadCredentials, saveCredentials, type NodeCredentials } from "../src/node-credentials";

let dir: string;
let storage: NodeRoot;
let credentials: NodeCredentials;
let ca: CertificateAuthority;

beforeAll(async () => {
  ca = await CertificateAuthority.create();
});

beforeEach(async () => {
  dir = await mkdtemp(join(tmpdir(), "roleserve-credentials-"));
  storage = placeNodeRoot(dir);
  await storage.data.mountNew("encrypted");
  const node = generateKeyPair();
  credentials = {
    nodeId: nodeIdFromPublicKey(node.publicKey),
    privateKey: node.privateKey,
    certificate: (await ca.issueNodeCertificate(node.publicKey)).der,
    caCertificate: ca.certificate.der,
  };
  await saveCredentials(storage.data.node.credentials, credentials);
});

afterEach(async () => {
  await rm(dir, { recursive: true, force: true });
});

it("saves PEM certificates and an encrypted key, and loads them back", async () => {
  const loaded = await loadCredentials(storage.data.node.credentials);
  expect(loaded.nodeId).toBe(credentials.nodeId);
  expect(Buffer.from(loaded.privateKey)).toEqual(Buffer.from(credentials.privateKey));
  expect(Buffer.from(loaded.certificate)).toEqual(Buffer.from(credentials.certificate));
  expect(Buffer.from(loaded.caCertificate)).toEqual(Buffer.from(credentials.caCertificate));
});

describe("a corrupt file is refused, naming it", () => {
  const files = {
    "cert.pem": (s: NodeRoot) => s.data.node.credentials.certificate,
    "ca.pem": (s: NodeRoot) => s.data.node.credentials.caCertificate,
  };
  const contents: Array<[string, () => string]> = [
    ["garbage", () => "garbage, no PEM at all\n"],
    ["an empty file", () => ""],
    ["a private key", () => privateKeyToPem(generateKeyPair().privateKey)],
    [
      "a PEM certificate block that is not a certificate",
      () => encodePem("CERTIFICATE", Buffer.from("x")),
    ],
  ];
  describe.each(Object.entries(files))("%s", (_name, fileOf) => {
    it.each(contents)("holding %s", async (_what, content) => {
      const path = fileOf(storage).fullPath;
      await writeFile(path, content());
      const error = await loadCredentials(storage.data.node.credentials).catch((e: unknown) => e);
      expect(error).toBeInstanceOf(FileCorruptedError);
      expect((error as Error).message).toContain(path);
    });
  });

  it("cert-key.pem holding a key of the wrong length", async () => {
    const key = storage.data.node.credentials.key;
    await key.write(Buffer.alloc(7));
    const error = await loadCredentials(storage.data.node.credentials).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(FileCorruptedError);
    expect((error as Error).message).toContain(key.fullPath);
    expect((error as Error).message).toMatch(/32-byte seed, this file holds 7 bytes/);
  });
});

describe("files that do not belong together are refused, naming the directory", () => {
  it("a key that is not the certificate's", async () => {
    await storage.data.node.credentials.key.write(Buffer.from(generateKeyPair().privateKey));
    const error = await loadCredentials(storage.data.node.credentials).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(CredentialsMismatchError);
    expect((error as Error).message).toContain(storage.data.node.credentials.fullPath);
  });

  it("a certificate another CA issued", async () => {
    const other = await CertificateAuthority.create();
    await storage.data.node.credentials.caCertificate.write(Buffer.from(other.certificate.toPem()));
    const error = await loadCredentials(storage.data.node.credentials).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(CredentialsMismatchError);
    expect((error as Error).message).toContain(storage.data.node.credentials.fullPath);
  });
});
