/**
 * The durable peer PKI files (`data/etcd/peer_pki`) are read back on every
 * start from disk, and handed to etcd through the ephemeral directory. A
 * broken one must fail the member with an error naming that file, not with
 * etcd's own complaint about a copy somewhere else (or a TLS failure later).
 */
import { writeFile } from "node:fs/promises";
import { TestMembers, type TestNode } from "@metropolis/consensus/testing";
import { FileCorruptedError, type File } from "@metropolis/localstorage";

const fixture = new TestMembers();
afterEach(() => fixture.cleanup());

/** A member bootstrapped and stopped, so that its next start reads its files from disk. */
async function stoppedMember(name: string): Promise<TestNode> {
  const node = await fixture.node(name);
  await fixture.stop(await fixture.run(node, { bootstrap: true }));
  node.storage = await node.reopen();
  return node;
}

/** Starts the member from disk; resolves with the error its consensus service died of. */
async function deathOnRestart(node: TestNode): Promise<Error | undefined> {
  const { harness: h } = fixture.start(node, {}, { expectDeath: (dn) => dn === "root.consensus" });
  const death = await h.nextTransition((t) => t.dn === "root.consensus" && t.to === "dead", {
    timeoutMs: 20_000,
  });
  return death.error;
}

it.each<[string, (node: TestNode) => File<Buffer>, string]>([
  ["cert.pem holding garbage", (n) => n.storage.data.etcd.peerPKI.certificate, "garbage\n"],
  ["ca.pem holding garbage", (n) => n.storage.data.etcd.peerPKI.caCertificate, "garbage\n"],
  [
    "cert.pem holding a PEM block that is not a certificate",
    (n) => n.storage.data.etcd.peerPKI.certificate,
    "-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----\n",
  ],
])("a peer PKI file %s fails the member, naming the file", async (_what, fileOf, content) => {
  const node = await stoppedMember("peer-pki");
  const path = fileOf(node).fullPath;
  await writeFile(path, content);
  const error = await deathOnRestart(node);
  expect(error).toBeInstanceOf(FileCorruptedError);
  expect(error?.message).toContain(path);
});

it("a peer key that does not decode fails the member, naming the file", async () => {
  const node = await stoppedMember("peer-key");
  const key = node.storage.data.etcd.peerPKI.key;
  // Encrypted and authenticated as a secret file, but not a PKCS#8 key inside.
  await key.write(Buffer.from("-----BEGIN PRIVATE KEY-----\nAAAA\n-----END PRIVATE KEY-----\n"));
  const error = await deathOnRestart(node);
  expect(error).toBeInstanceOf(FileCorruptedError);
  expect(error?.message).toContain(key.fullPath);
});
