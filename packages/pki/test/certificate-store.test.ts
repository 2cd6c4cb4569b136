/**
 * The etcd-backed store against a real etcd: layout, idempotence, the
 * issuance race between two nodes, corruption detection and revocation.
 */
import type { Etcd3, Namespace } from "etcd3";
import {
  CertificateAuthority,
  CertificateConflictError,
  CertificateRevokedError,
  CertificateStore,
  ConcurrentIssuanceError,
  CorruptedStoreError,
  generateKeyPair,
  InvalidNameError,
  InvalidTemplateError,
  nodeIdFromPublicKey,
  nodeTemplate,
  tlsMaterial,
  UntrustedCertificateError,
  userTemplate,
  verifyCertificate,
  type EtcdKv,
  type IssuedCertificate,
} from "@metropolis/pki";
import { startEtcd, type EtcdServer } from "./etcd-server";
import { testSealer, TestSealerError } from "./test-sealer";

let etcd: EtcdServer;
let client: Etcd3;
let namespaceCounter = 0;
/** Seals the private keys of every store in these tests (consensus' keyring in production). */
const secrets = testSealer();

beforeAll(async () => {
  etcd = await startEtcd();
  client = etcd.client();
});

afterAll(async () => {
  await etcd?.stop();
});

/** A fresh namespace per test, the way consensus hands one to the curator. */
function freshNamespace(on: Etcd3 = client): { kv: Namespace; prefix: string } {
  const prefix = `namespaced:curator-pki-${++namespaceCounter}/`;
  return { kv: on.namespace(prefix), prefix };
}

async function keysIn(kv: Namespace): Promise<string[]> {
  return (await kv.getAll().keys()).sort();
}

describe("CertificateStore", () => {
  it("creates the CA with its CRL atomically, and ensure() is idempotent", async () => {
    const { kv } = freshNamespace();
    const ca = new CertificateStore(secrets).ca("ca");

    const first = await ca.ensure(kv);
    expect(first.created).toBe(true);
    expect(first.certificate.commonName).toBe("Metropolis Cluster CA");
    expect(first.certificate.isCA).toBe(true);
    expect(first.ca.equals(first.certificate)).toBe(true);
    expect(await keysIn(kv)).toEqual(["ca-crl.der", "issued/ca-cert.der", "keys/ca-privkey.bin"]);
    // Canonical key storage: the 32-byte seed.
    // The private key is stored sealed, never as is; it opens to the key.
    const storedKey = (await kv.get("keys/ca-privkey.bin").buffer()) as Buffer;
    expect(storedKey.includes(first.privateKey as Buffer)).toBe(false);
    expect(await secrets.open("keys/ca-privkey.bin", storedKey)).toEqual(first.privateKey);
    expect(first.privateKey).toHaveLength(32);
    expect(await kv.get("issued/ca-cert.der").buffer()).toEqual(first.certificate.der);

    const again = await ca.ensure(kv);
    expect(again.created).toBe(false);
    expect(again.certificate.equals(first.certificate)).toBe(true);
    expect(again.privateKey).toEqual(first.privateKey);

    // Another node (its own client and store object) loads the same CA.
    const sameNamespace = await new CertificateStore(secrets)
      .ca("ca")
      .ensure(etcd.client().namespace(kv.prefix.toString()));
    expect(sameNamespace.certificate.equals(first.certificate)).toBe(true);

    const crl = await ca.crl(kv);
    expect(crl.entries).toEqual([]);
    expect(await crl.isIssuedBy(first.certificate)).toBe(true);
  });

  it("stores a node certificate at exactly issued/<name>-cert.der and keys/<name>-privkey.bin", async () => {
    const { kv } = freshNamespace();
    const store = new CertificateStore(secrets);
    const ca = store.ca("ca");
    const node = generateKeyPair();
    const nodeId = nodeIdFromPublicKey(node.publicKey);
    const certificate = store.certificate(nodeId, {
      issuer: ca,
      template: nodeTemplate({ ipAddresses: ["127.0.0.3"] }),
      key: { privateKey: node.privateKey },
    });

    const issued = await certificate.ensure(kv);
    expect(issued.created).toBe(true);
    expect(issued.certificate.commonName).toBe(nodeId);
    expect(issued.certificate.ipAddresses).toEqual(["127.0.0.3"]);
    expect(issued.privateKey).toEqual(node.privateKey);
    expect(await keysIn(kv)).toEqual([
      "ca-crl.der",
      "issued/ca-cert.der",
      `issued/${nodeId}-cert.der`,
      "keys/ca-privkey.bin",
      `keys/${nodeId}-privkey.bin`,
    ]);
    expect(certificate.keys).toEqual({
      certificate: `issued/${nodeId}-cert.der`,
      privateKey: `keys/${nodeId}-privkey.bin`,
      crl: `${nodeId}-crl.der`,
    });
    const caCert = (await ca.ensure(kv)).certificate;
    expect(issued.ca.equals(caCert)).toBe(true);
    await expect(verifyCertificate(issued.certificate, caCert)).resolves.toBeDefined();

    const material = tlsMaterial(issued);
    expect(material.ca).toBe(caCert.toPem());

    const reloaded = await certificate.ensure(kv);
    expect(reloaded.created).toBe(false);
    expect(reloaded.certificate.equals(issued.certificate)).toBe(true);
  });

  it("puts everything under its prefix when the kv is not namespaced", async () => {
    const { kv } = freshNamespace();
    const store = new CertificateStore(secrets, "cluster-pki/");
    const ca = store.ca("ca");
    await store.certificate("owner", { issuer: ca, template: userTemplate("owner") }).ensure(kv);
    expect(await keysIn(kv)).toEqual([
      "cluster-pki/ca-crl.der",
      "cluster-pki/issued/ca-cert.der",
      "cluster-pki/issued/owner-cert.der",
      "cluster-pki/keys/ca-privkey.bin",
      "cluster-pki/keys/owner-privkey.bin",
    ]);
  });

  it("keeps only the certificate of an external key, and refuses the name for another key", async () => {
    const { kv } = freshNamespace();
    const store = new CertificateStore(secrets);
    const ca = store.ca("ca");
    const node = generateKeyPair();
    const issued = await store
      .certificate("node", {
        issuer: ca,
        template: nodeTemplate(),
        key: { publicKey: node.publicKey },
      })
      .ensure(kv);
    expect(issued.privateKey).toBeNull();
    expect(issued.certificate.publicKey.equals(node.publicKey)).toBe(true);
    expect(await kv.get("keys/node-privkey.bin").buffer()).toBeNull();
    expect(await kv.get("issued/node-cert.der").buffer()).toEqual(issued.certificate.der);

    const again = await store
      .certificate("node", {
        issuer: ca,
        template: nodeTemplate(),
        key: { publicKey: node.publicKey },
      })
      .ensure(kv);
    expect(again.created).toBe(false);
    expect(again.certificate.equals(issued.certificate)).toBe(true);

    const other = store.certificate("node", {
      issuer: ca,
      template: nodeTemplate(),
      key: { publicKey: generateKeyPair().publicKey },
    });
    await expect(other.ensure(kv)).rejects.toThrow(CertificateConflictError);
  });

  it("adopts a CA created before etcd existed, idempotently, and refuses a different one", async () => {
    const { kv } = freshNamespace();
    const store = new CertificateStore(secrets);
    const bootstrapped = await CertificateAuthority.create({
      commonName: "Metropolis etcd peer CA",
    });
    const ca = store.ca("etcd-ca", { commonName: "Metropolis etcd peer CA" });

    const adopted = await ca.adopt(kv, bootstrapped);
    expect(adopted.created).toBe(true);
    expect(await keysIn(kv)).toEqual([
      "etcd-ca-crl.der",
      "issued/etcd-ca-cert.der",
      "keys/etcd-ca-privkey.bin",
    ]);
    const loaded = await ca.authority(kv);
    expect(loaded.certificate.equals(bootstrapped.certificate)).toBe(true);
    expect(loaded.privateKey).toEqual(bootstrapped.privateKey);
    expect(await (await ca.crl(kv)).isIssuedBy(bootstrapped.certificate)).toBe(true);

    expect((await ca.adopt(kv, bootstrapped)).created).toBe(false);
    await expect(ca.adopt(kv, await CertificateAuthority.create())).rejects.toThrow(
      CertificateConflictError,
    );

    // A leaf can only be adopted under a CA that signed it.
    const foreign = await (
      await CertificateAuthority.create()
    ).issueUserCertificate("u", generateKeyPair().publicKey);
    const leaf = store.certificate("u", {
      issuer: ca,
      template: userTemplate("u"),
      key: { publicKey: foreign.publicKey },
    });
    await expect(leaf.adopt(kv, { certificate: foreign, privateKey: null })).rejects.toThrow(
      UntrustedCertificateError,
    );
  });

  it("rejects bad names and CA templates outside store.ca()", () => {
    const store = new CertificateStore(secrets);
    expect(() => store.ca("../ca")).toThrow(InvalidNameError);
    expect(() => store.ca("")).toThrow(InvalidNameError);
    expect(() => new CertificateStore(secrets, "no-slash")).toThrow(
      /must be empty or end with "\/"/,
    );
    const selfSigned = { issuer: "self-signed" as const, template: userTemplate("x") };
    expect(() =>
      store.certificate("x", { ...selfSigned, key: { publicKey: generateKeyPair().publicKey } }),
    ).toThrow(InvalidTemplateError);
  });
});

describe("concurrent issuance", () => {
  /**
   * Wraps each issuer's kv so that its write transaction is committed only
   * after every issuer has done its read — the interleaving in which two
   * nodes both see "not issued yet" and both issue. The wrapper only orders
   * calls; all reads and writes go to the real etcd.
   */
  function raceAfterReads(parties: number): (kv: Namespace) => EtcdKv {
    let reads = 0;
    let release: () => void = () => undefined;
    const allRead = new Promise<void>((resolve) => (release = resolve));
    return (kv) => {
      let transactions = 0;
      return {
        get: (key) => kv.get(key),
        put: (key) => kv.put(key),
        if: (...args) => {
          const builder = kv.if(...args);
          const isRead = ++transactions === 1;
          const commit = builder.commit.bind(builder);
          builder.commit = async () => {
            if (!isRead) {
              await allRead;
              return commit();
            }
            const result = await commit();
            if (++reads === parties) release();
            return result;
          };
          return builder;
        },
      };
    };
  }

  const cases: Array<
    [
      string,
      (
        store: CertificateStore,
        key: Uint8Array,
        ca: CertificateAuthority,
      ) => { ensure(kv: EtcdKv): Promise<IssuedCertificate> },
    ]
  > = [
    [
      "a node certificate",
      (store, privateKey, ca) =>
        store.certificate("node", { issuer: ca, template: nodeTemplate(), key: { privateKey } }),
    ],
    ["the cluster CA itself", (store, privateKey) => store.ca("ca", { privateKey })],
  ];

  it.each(cases)(
    "of %s on two nodes: exactly one wins, the other gets ConcurrentIssuanceError, its retry loads the winner's",
    async (_what, make) => {
      const { prefix } = freshNamespace();
      const authority = await CertificateAuthority.create();
      const gate = raceAfterReads(2);
      // Two nodes: separate etcd clients, separate store objects, different fresh keys.
      const kvA = etcd.client().namespace(prefix);
      const kvB = etcd.client().namespace(prefix);
      const keyA = generateKeyPair();
      const keyB = generateKeyPair();
      const onA = make(new CertificateStore(secrets), keyA.privateKey, authority);
      const onB = make(new CertificateStore(secrets), keyB.privateKey, authority);

      const outcomes = await Promise.allSettled([onA.ensure(gate(kvA)), onB.ensure(gate(kvB))]);

      const winners = outcomes.filter((o) => o.status === "fulfilled");
      const losers = outcomes.filter((o) => o.status === "rejected");
      expect(winners).toHaveLength(1);
      expect(losers).toHaveLength(1);
      const loserError = (losers[0] as PromiseRejectedResult).reason as ConcurrentIssuanceError;
      expect(loserError).toBeInstanceOf(ConcurrentIssuanceError);
      expect(loserError.retryable).toBe(true);
      const winner = (winners[0] as PromiseFulfilledResult<IssuedCertificate>).value;
      expect(winner.created).toBe(true);

      // Whatever is stored is exactly the winner's certificate and key.
      const keyAt = `keys/${winner.name}-privkey.bin`;
      const storedKey = (await kvA.get(keyAt).buffer()) as Buffer;
      expect(await secrets.open(keyAt, storedKey)).toEqual(winner.privateKey);
      const winnerKey = outcomes[0]!.status === "fulfilled" ? keyA : keyB;
      expect(winner.certificate.publicKey.equals(winnerKey.publicKey)).toBe(true);

      // The loser retries (on its own client) and gets the winner's certificate.
      const loser = outcomes[0]!.status === "rejected" ? onA : onB;
      const loserKv = outcomes[0]!.status === "rejected" ? kvA : kvB;
      const retried = await loser.ensure(loserKv);
      expect(retried.created).toBe(false);
      expect(retried.certificate.equals(winner.certificate)).toBe(true);
      expect(retried.privateKey).toEqual(winner.privateKey);
    },
  );

  it("without forced interleaving, concurrent issuers always end up agreeing", async () => {
    const clients = [etcd.client(), etcd.client(), etcd.client()];
    const authority = await CertificateAuthority.create();
    for (let round = 0; round < 5; round++) {
      const { prefix } = freshNamespace();
      const store = new CertificateStore(secrets);
      const attempts = clients.map((c) =>
        store
          .certificate("node", { issuer: authority, template: nodeTemplate() })
          .ensure(c.namespace(prefix)),
      );
      const outcomes = await Promise.allSettled(attempts);
      const created = outcomes.filter((o) => o.status === "fulfilled" && o.value.created);
      expect(created).toHaveLength(1);
      for (const outcome of outcomes) {
        if (outcome.status === "rejected") {
          expect(outcome.reason).toBeInstanceOf(ConcurrentIssuanceError);
        }
      }
      const final = await Promise.all(
        clients.map((c) =>
          store
            .certificate("node", { issuer: authority, template: nodeTemplate() })
            .ensure(c.namespace(prefix)),
        ),
      );
      for (const result of final) {
        expect(result.certificate.equals(final[0]!.certificate)).toBe(true);
      }
    }
  });
});

describe("corruption", () => {
  it("a certificate without its key (or the reverse) is a CorruptedStoreError", async () => {
    const { kv } = freshNamespace();
    const store = new CertificateStore(secrets);
    const authority = await CertificateAuthority.create();
    const spec = { issuer: authority, template: userTemplate("u") };
    const issued = await store.certificate("u", spec).ensure(kv);

    await kv.delete().key("keys/u-privkey.bin");
    await expect(store.certificate("u", spec).ensure(kv)).rejects.toThrow(CorruptedStoreError);
    await expect(store.certificate("u", spec).ensure(kv)).rejects.toThrow(
      /half-written: issued\/u-cert.der exists but keys\/u-privkey.bin does not/,
    );

    await kv.delete().key("issued/u-cert.der");
    await kv
      .put("keys/u-privkey.bin")
      .value(secrets.seal("keys/u-privkey.bin", issued.privateKey as Buffer));
    await expect(store.certificate("u", spec).ensure(kv)).rejects.toThrow(
      /keys\/u-privkey.bin exists but issued\/u-cert.der does not/,
    );
  });

  it("garbage or mismatched stored values are CorruptedStoreErrors naming the key", async () => {
    const { kv } = freshNamespace();
    const store = new CertificateStore(secrets);
    const authority = await CertificateAuthority.create();
    const spec = { issuer: authority, template: userTemplate("u") };
    await store.certificate("u", spec).ensure(kv);

    const seal = (value: Uint8Array) => secrets.seal("keys/u-privkey.bin", value);
    await kv.put("keys/u-privkey.bin").value(seal(generateKeyPair().privateKey));
    await expect(store.certificate("u", spec).ensure(kv)).rejects.toThrow(
      /keys\/u-privkey.bin does not hold the private key of issued\/u-cert.der/,
    );
    await kv.put("keys/u-privkey.bin").value(seal(Buffer.alloc(64)));
    await expect(store.certificate("u", spec).ensure(kv)).rejects.toThrow(/holds 64 bytes/);
    await kv.put("issued/u-cert.der").value(Buffer.from("garbage"));
    await expect(store.certificate("u", spec).ensure(kv)).rejects.toThrow(
      /issued\/u-cert.der does not hold a usable certificate: not a valid DER X.509 certificate/,
    );
  });

  it("never writes a private key as is, and refuses one that is not sealed for its key", async () => {
    const { kv } = freshNamespace();
    const sealer = testSealer();
    const store = new CertificateStore(sealer);
    const ca = store.ca("ca");
    const node = generateKeyPair();
    const leaf = store.certificate("leaf", {
      issuer: ca,
      template: nodeTemplate(),
      key: { privateKey: node.privateKey },
    });
    const issued = await leaf.ensure(kv);
    const caKey = (await ca.ensure(kv)).privateKey as Buffer;
    // Every private key written went through the sealer; no stored value holds a seed.
    expect(sealer.sealed.sort()).toEqual(["keys/ca-privkey.bin", "keys/leaf-privkey.bin"]);
    const values = await kv.getAll().buffers();
    for (const value of Object.values(values)) {
      for (const seed of [caKey, Buffer.from(node.privateKey)]) {
        expect(value.includes(seed)).toBe(false);
        expect(value.includes(Buffer.from(seed.toString("hex")))).toBe(false);
        expect(value.includes(Buffer.from(seed.toString("base64")))).toBe(false);
      }
    }
    expect((await leaf.load(kv))?.privateKey).toEqual(issued.privateKey);

    // A raw seed put in its place is refused by the sealer, not used.
    await kv.put("keys/leaf-privkey.bin").value(Buffer.from(node.privateKey));
    await expect(leaf.load(kv)).rejects.toThrow(TestSealerError);
    // So is the CA's sealed key moved to the leaf's place.
    await kv.put("keys/leaf-privkey.bin").value(sealer.seal("keys/ca-privkey.bin", caKey));
    await expect(leaf.load(kv)).rejects.toThrow(/keys\/leaf-privkey.bin: authentication failed/);
  });

  it("a certificate whose issuing CA is missing is a CorruptedStoreError, and no CA is created", async () => {
    const { kv } = freshNamespace();
    const store = new CertificateStore(secrets);
    const ca = store.ca("ca");
    const spec = { issuer: ca, template: userTemplate("u") };
    await store.certificate("u", spec).ensure(kv);
    await kv.delete().prefix("keys/ca");
    await kv.delete().prefix("issued/ca");
    await expect(store.certificate("u", spec).ensure(kv)).rejects.toThrow(
      /certificate "u" exists but its issuing CA "ca" does not/,
    );
    expect(await kv.get("issued/ca-cert.der").buffer()).toBeNull();
  });
});

describe("revocation", () => {
  it("revoke() re-issues the stored CRL, and verify then rejects the certificate", async () => {
    const { kv } = freshNamespace();
    const store = new CertificateStore(secrets);
    const ca = store.ca("ca");
    const node = await store
      .certificate("node", { issuer: ca, template: nodeTemplate() })
      .ensure(kv);
    const before = await ca.crl(kv);

    const crl = await ca.revoke(kv, node.certificate);
    expect(crl.isRevoked(node.certificate.serial)).toBe(true);
    expect(crl.crlNumber).toBe((before.crlNumber ?? 0n) + 1n);
    expect(await kv.get("ca-crl.der").buffer()).toEqual(crl.der);

    const stored = await ca.crl(kv);
    await expect(verifyCertificate(node.certificate, node.ca, { crl: stored })).rejects.toThrow(
      CertificateRevokedError,
    );

    // Idempotent: revoking again changes nothing.
    const again = await ca.revoke(kv, node.certificate.serial);
    expect(again.der.equals(crl.der)).toBe(true);
  });

  it("concurrent revocations from two nodes are all kept", async () => {
    const { prefix } = freshNamespace();
    const store = new CertificateStore(secrets);
    const ca = store.ca("ca");
    const kvA = etcd.client().namespace(prefix);
    const kvB = etcd.client().namespace(prefix);
    const serials = await Promise.all(
      ["a", "b", "c", "d"].map(async (name) => {
        const issued = await store
          .certificate(name, { issuer: ca, template: userTemplate(name) })
          .ensure(kvA)
          .catch((error: unknown) => {
            // The four issuances race for the CA; the losers simply retry.
            if (error instanceof ConcurrentIssuanceError) {
              return store
                .certificate(name, { issuer: ca, template: userTemplate(name) })
                .ensure(kvA);
            }
            throw error;
          });
        return issued.certificate.serial;
      }),
    );

    await Promise.all(serials.map((serial, i) => ca.revoke(i % 2 === 0 ? kvA : kvB, serial)));

    const crl = await ca.crl(kvA);
    for (const serial of serials) expect(crl.isRevoked(serial)).toBe(true);
    expect(crl.entries).toHaveLength(4);
  });
});
