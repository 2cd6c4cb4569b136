/**
 * etcd as pki's CertificateKv, on a real etcd: the adapter keeps the same kv
 * contract as the in-memory one pki's tests use, a certificate store on it
 * puts exactly the namespaced keys the layout promises (private keys sealed
 * with the namespace's keyring), a guard added through the kv's `if` (the
 * curator leader's) stops every write but no read, and concurrent issuers and
 * revokers on separate clients end up agreeing.
 */
import type { Etcd3 } from "etcd3";
import {
  ClusterSecrets,
  ConsensusClient,
  etcdCertificateKv,
  isSealedSecret,
  SecretKeyring,
} from "@metropolis/consensus";
import {
  CertificateAuthority,
  CertificateStore,
  ConcurrentIssuanceError,
  generateKeyPair,
  nodeIdFromPublicKey,
  nodeTemplate,
  userTemplate,
} from "@metropolis/pki";
import { certificateKvContract } from "@metropolis/pki/testing";
import { startEtcdCluster, type EtcdCluster } from "../src/etcd-test-cluster";

let cluster: EtcdCluster;
let root: Etcd3;
let namespaces = 0;

beforeAll(async () => {
  cluster = await startEtcdCluster(1);
  root = cluster.client();
});

afterAll(async () => {
  await cluster?.stop();
});

/** A fresh namespace, as consensus hands one out: `namespaced:<name>/`. */
function freshPrefix(): string {
  return `namespaced:pki-${++namespaces}/`;
}

/** A consensus client confined to a fresh namespace, sealing with a keyring of its own. */
function freshClient(): ConsensusClient {
  const secrets = new ClusterSecrets();
  secrets.apply(SecretKeyring.generate(), 1n);
  return ConsensusClient.root(root, secrets).sub(`pki-${++namespaces}`);
}

describe("etcdCertificateKv keeps the kv contract", () => {
  it.each(certificateKvContract())("$name", ({ run }) =>
    run(async () => {
      // Two nodes: each its own etcd client on the same namespace.
      const prefix = freshPrefix();
      return [
        etcdCertificateKv(cluster.client().namespace(prefix)),
        etcdCertificateKv(cluster.client().namespace(prefix)),
      ];
    }),
  );
});

it("keeps a store's certificates at the namespaced layout, private keys sealed for their full key", async () => {
  const client = freshClient();
  const kv = etcdCertificateKv(client.kv);
  const store = new CertificateStore(client.secrets, "cluster-pki/");
  const ca = store.ca("ca");
  const node = generateKeyPair();
  const nodeId = nodeIdFromPublicKey(node.publicKey);
  const external = await store
    .certificate(nodeId, {
      issuer: ca,
      template: nodeTemplate(),
      key: { publicKey: node.publicKey },
    })
    .ensure(kv);
  const owner = await store
    .certificate("owner", { issuer: ca, template: userTemplate("owner") })
    .ensure(kv);

  const stored = await root.getAll().prefix(client.prefix).buffers();
  const at = (key: string) => `${client.prefix}cluster-pki/${key}`;
  expect(Object.keys(stored).sort()).toEqual([
    at("ca-crl.der"),
    at("issued/ca-cert.der"),
    at(`issued/${nodeId}-cert.der`),
    at("issued/owner-cert.der"),
    at("keys/ca-privkey.bin"),
    at("keys/owner-privkey.bin"),
  ]);
  expect(stored[at(`issued/${nodeId}-cert.der`)]).toEqual(external.certificate.der);
  expect(stored[at("issued/owner-cert.der")]).toEqual(owner.certificate.der);
  const sealedOwnerKey = stored[at("keys/owner-privkey.bin")];
  expect(sealedOwnerKey !== undefined && isSealedSecret(sealedOwnerKey)).toBe(true);
  expect(
    await client.secrets.open(
      "cluster-pki/keys/owner-privkey.bin",
      sealedOwnerKey ?? Buffer.alloc(0),
    ),
  ).toEqual(owner.privateKey);
  // The CA's key is sealed too: its seed appears nowhere in the namespace.
  const caKey = (await ca.load(kv))?.privateKey ?? null;
  expect(caKey).toHaveLength(32);
  for (const value of Object.values(stored)) {
    expect(caKey !== null && value.includes(caKey)).toBe(false);
  }
});

it("honours a guard added through the kv's if: no write commits, reads still answer", async () => {
  const namespace = root.namespace(freshPrefix());
  const store = new CertificateStore(freshClient().secrets);
  const ca = store.ca("ca");
  const unguarded = etcdCertificateKv(namespace);
  await ca.ensure(unguarded);
  const crlBefore = await namespace.get("ca-crl.der").buffer();

  // The guard of a deposed leader: its election key is gone.
  const guarded = etcdCertificateKv({
    get: namespace.get.bind(namespace),
    put: namespace.put.bind(namespace),
    if: (key, column, cmp, value) =>
      namespace.if("leader/gone", "Create", ">", 0).and(key, column, cmp, value),
  });
  expect((await ca.load(guarded))?.created).toBe(false);
  const leaf = store.certificate("leaf", { issuer: ca, template: userTemplate("leaf") });
  await expect(leaf.ensure(guarded)).rejects.toThrow(ConcurrentIssuanceError);
  expect(await namespace.get("issued/leaf-cert.der").buffer()).toBeNull();
  await expect(ca.revoke(guarded, 42n)).rejects.toThrow(/changed under each of 10 attempts/);
  expect(await namespace.get("ca-crl.der").buffer()).toEqual(crlBefore);
});

it("concurrent issuers on separate clients end up agreeing, exactly one of them issuing", async () => {
  const clients = [cluster.client(), cluster.client(), cluster.client()];
  const authority = await CertificateAuthority.create();
  const store = new CertificateStore(freshClient().secrets);
  const certificate = store.certificate("node", { issuer: authority, template: nodeTemplate() });
  for (let round = 0; round < 5; round++) {
    const prefix = freshPrefix();
    const kvs = clients.map((c) => etcdCertificateKv(c.namespace(prefix)));
    const outcomes = await Promise.allSettled(kvs.map((kv) => certificate.ensure(kv)));
    const created = outcomes.filter((o) => o.status === "fulfilled" && o.value.created);
    expect(created).toHaveLength(1);
    const errors = outcomes.flatMap((o) => (o.status === "rejected" ? [o.reason] : []));
    for (const error of errors) expect(error).toBeInstanceOf(ConcurrentIssuanceError);

    const final = await Promise.all(kvs.map((kv) => certificate.ensure(kv)));
    const [first] = final;
    for (const result of final) expect(result.certificate.equals(first.certificate)).toBe(true);
  }
});

it("revocations from two clients at once are all kept in the CRL", async () => {
  const prefix = freshPrefix();
  const [kvA, kvB] = [cluster.client(), cluster.client()].map((c) =>
    etcdCertificateKv(c.namespace(prefix)),
  );
  const ca = new CertificateStore(freshClient().secrets).ca("ca");
  const authority = await ca.authority(kvA);
  const issued = await Promise.all(
    [1, 2, 3, 4].map(() => authority.issueUserCertificate("u", generateKeyPair().publicKey)),
  );

  await Promise.all(
    issued.map((certificate, i) => ca.revoke(i % 2 === 0 ? kvA : kvB, certificate)),
  );

  const crl = await ca.crl(kvB);
  expect(crl.entries).toHaveLength(4);
  for (const certificate of issued) expect(crl.isRevoked(certificate.serial)).toBe(true);
});
