/**
 * The certificate store on the in-memory kv (the etcd adapter passes the same
 * kv contract, and its own tests in packages/consensus run the store on real
 * etcd): layout, idempotence, the issuance race between two nodes,
 * corruption detection and revocation.
 */
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
  type CertificateKv,
  type IssuedCertificate,
} from "@metropolis/pki";
import { certificateKvContract, MemoryCertificateKv } from "@metropolis/pki/testing";
import { testSealer, TestSealerError } from "./test-sealer";

/** Seals the private keys of every store in these tests (consensus' keyring in production). */
const secrets = testSealer();

/** `value`, failing the test when there is none. */
function present<T>(value: T | null | undefined, what: string): T {
  if (value === null || value === undefined) throw new Error(`${what} is missing`);
  return value;
}

describe("MemoryCertificateKv keeps the kv contract", () => {
  it.each(certificateKvContract())("$name", ({ run }) =>
    run(async () => {
      const kv = new MemoryCertificateKv();
      return [kv, kv];
    }),
  );
});

describe("CertificateStore", () => {
  it("creates the CA with its CRL atomically, and ensure() is idempotent", async () => {
    const kv = new MemoryCertificateKv();
    const ca = new CertificateStore(secrets).ca("ca");

    const first = await ca.ensure(kv);
    expect(first.created).toBe(true);
    expect(first.certificate.commonName).toBe("Metropolis Cluster CA");
    expect(first.certificate.isCA).toBe(true);
    expect(first.ca.equals(first.certificate)).toBe(true);
    expect(kv.keys()).toEqual(["ca-crl.der", "issued/ca-cert.der", "keys/ca-privkey.bin"]);
    // Canonical key storage: the 32-byte seed.
    // The private key is stored sealed, never as is; it opens to the key.
    const storedKey = present(kv.get("keys/ca-privkey.bin"), "the stored key");
    expect(storedKey.includes(present(first.privateKey, "the CA key"))).toBe(false);
    expect(await secrets.open("keys/ca-privkey.bin", storedKey)).toEqual(first.privateKey);
    expect(first.privateKey).toHaveLength(32);
    expect(kv.get("issued/ca-cert.der")).toEqual(first.certificate.der);

    const again = await ca.ensure(kv);
    expect(again.created).toBe(false);
    expect(again.certificate.equals(first.certificate)).toBe(true);
    expect(again.privateKey).toEqual(first.privateKey);

    // Another node (its own store object) loads the same CA.
    const sameNamespace = await new CertificateStore(secrets).ca("ca").ensure(kv);
    expect(sameNamespace.certificate.equals(first.certificate)).toBe(true);

    const crl = await ca.crl(kv);
    expect(crl.entries).toEqual([]);
    expect(await crl.isIssuedBy(first.certificate)).toBe(true);
  });

  it("stores a node certificate at exactly issued/<name>-cert.der and keys/<name>-privkey.bin", async () => {
    const kv = new MemoryCertificateKv();
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
    expect(kv.keys()).toEqual([
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
    const kv = new MemoryCertificateKv();
    const store = new CertificateStore(secrets, "cluster-pki/");
    const ca = store.ca("ca");
    await store.certificate("owner", { issuer: ca, template: userTemplate("owner") }).ensure(kv);
    expect(kv.keys()).toEqual([
      "cluster-pki/ca-crl.der",
      "cluster-pki/issued/ca-cert.der",
      "cluster-pki/issued/owner-cert.der",
      "cluster-pki/keys/ca-privkey.bin",
      "cluster-pki/keys/owner-privkey.bin",
    ]);
  });

  it("keeps only the certificate of an external key, and refuses the name for another key", async () => {
    const kv = new MemoryCertificateKv();
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
    expect(kv.get("keys/node-privkey.bin")).toBeNull();
    expect(kv.get("issued/node-cert.der")).toEqual(issued.certificate.der);

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

  it("adopts a CA created before the kv existed, idempotently, and refuses a different one", async () => {
    const kv = new MemoryCertificateKv();
    const store = new CertificateStore(secrets);
    const bootstrapped = await CertificateAuthority.create({
      commonName: "Metropolis etcd peer CA",
    });
    const ca = store.ca("etcd-ca", { commonName: "Metropolis etcd peer CA" });

    const adopted = await ca.adopt(kv, bootstrapped);
    expect(adopted.created).toBe(true);
    expect(kv.keys()).toEqual([
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
   * Wraps each issuer's kv so that its writes are committed only after every
   * issuer has done its first read — the interleaving in which two nodes
   * both see "not issued yet" and both issue. The wrapper only orders calls;
   * all reads and writes go to the shared kv.
   */
  function raceAfterReads(parties: number): (kv: CertificateKv) => CertificateKv {
    let reads = 0;
    let release: () => void = () => undefined;
    const allRead = new Promise<void>((resolve) => (release = resolve));
    return (kv) => {
      let firstRead = true;
      return {
        async read(keys) {
          const result = await kv.read(keys);
          if (firstRead && ++reads === parties) release();
          firstRead = false;
          return result;
        },
        async createAll(absent, puts) {
          await allRead;
          return kv.createAll(absent, puts);
        },
        async replace(key, revision, value) {
          await allRead;
          return kv.replace(key, revision, value);
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
      ) => { ensure(kv: CertificateKv): Promise<IssuedCertificate> },
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
      const kv = new MemoryCertificateKv();
      const authority = await CertificateAuthority.create();
      const gate = raceAfterReads(2);
      // Two nodes: separate store objects, different fresh keys.
      const nodes = [generateKeyPair(), generateKeyPair()].map((key) => ({
        key,
        certificate: make(new CertificateStore(secrets), key.privateKey, authority),
      }));

      const outcomes = await Promise.allSettled(
        nodes.map((node) => node.certificate.ensure(gate(kv))),
      );

      const winners = nodes.flatMap((node, i) => {
        const outcome = outcomes[i];
        return outcome?.status === "fulfilled" ? [{ ...node, issued: outcome.value }] : [];
      });
      const losers = nodes.flatMap((node, i) => {
        const outcome = outcomes[i];
        return outcome?.status === "rejected" ? [{ ...node, error: outcome.reason }] : [];
      });
      expect(winners).toHaveLength(1);
      expect(losers).toHaveLength(1);
      const [winner] = winners;
      const [loser] = losers;
      expect(loser.error).toBeInstanceOf(ConcurrentIssuanceError);
      expect(loser.error).toMatchObject({ retryable: true });
      expect(winner.issued.created).toBe(true);

      // Whatever is stored is exactly the winner's certificate and key.
      const keyAt = `keys/${winner.issued.name}-privkey.bin`;
      const storedKey = present(kv.get(keyAt), keyAt);
      expect(await secrets.open(keyAt, storedKey)).toEqual(winner.issued.privateKey);
      expect(winner.issued.certificate.publicKey.equals(winner.key.publicKey)).toBe(true);

      // The loser retries and gets the winner's certificate.
      const retried = await loser.certificate.ensure(kv);
      expect(retried.created).toBe(false);
      expect(retried.certificate.equals(winner.issued.certificate)).toBe(true);
      expect(retried.privateKey).toEqual(winner.issued.privateKey);
    },
  );
});

describe("corruption", () => {
  it("a certificate without its key (or the reverse) is a CorruptedStoreError", async () => {
    const kv = new MemoryCertificateKv();
    const store = new CertificateStore(secrets);
    const authority = await CertificateAuthority.create();
    const spec = { issuer: authority, template: userTemplate("u") };
    const issued = await store.certificate("u", spec).ensure(kv);

    kv.delete("keys/u-privkey.bin");
    await expect(store.certificate("u", spec).ensure(kv)).rejects.toThrow(CorruptedStoreError);
    await expect(store.certificate("u", spec).ensure(kv)).rejects.toThrow(
      /half-written: issued\/u-cert.der exists but keys\/u-privkey.bin does not/,
    );

    kv.delete("issued/u-cert.der");
    kv.set(
      "keys/u-privkey.bin",
      secrets.seal("keys/u-privkey.bin", present(issued.privateKey, "the key")),
    );
    await expect(store.certificate("u", spec).ensure(kv)).rejects.toThrow(
      /keys\/u-privkey.bin exists but issued\/u-cert.der does not/,
    );
  });

  it("garbage or mismatched stored values are CorruptedStoreErrors naming the key", async () => {
    const kv = new MemoryCertificateKv();
    const store = new CertificateStore(secrets);
    const authority = await CertificateAuthority.create();
    const spec = { issuer: authority, template: userTemplate("u") };
    await store.certificate("u", spec).ensure(kv);

    const seal = (value: Uint8Array) => secrets.seal("keys/u-privkey.bin", value);
    kv.set("keys/u-privkey.bin", seal(generateKeyPair().privateKey));
    await expect(store.certificate("u", spec).ensure(kv)).rejects.toThrow(
      /keys\/u-privkey.bin does not hold the private key of issued\/u-cert.der/,
    );
    kv.set("keys/u-privkey.bin", seal(Buffer.alloc(64)));
    await expect(store.certificate("u", spec).ensure(kv)).rejects.toThrow(/holds 64 bytes/);
    kv.set("issued/u-cert.der", Buffer.from("garbage"));
    await expect(store.certificate("u", spec).ensure(kv)).rejects.toThrow(
      /issued\/u-cert.der does not hold a usable certificate: not a valid DER X.509 certificate/,
    );
  });

  it("never writes a private key as is, and refuses one that is not sealed for its key", async () => {
    const kv = new MemoryCertificateKv();
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
    const caKey = present((await ca.ensure(kv)).privateKey, "the CA key");
    // Every private key written went through the sealer; no stored value holds a seed.
    expect(sealer.sealed.sort()).toEqual(["keys/ca-privkey.bin", "keys/leaf-privkey.bin"]);
    for (const value of kv.keys().map((key) => present(kv.get(key), key))) {
      for (const seed of [caKey, Buffer.from(node.privateKey)]) {
        expect(value.includes(seed)).toBe(false);
        expect(value.includes(Buffer.from(seed.toString("hex")))).toBe(false);
        expect(value.includes(Buffer.from(seed.toString("base64")))).toBe(false);
      }
    }
    expect((await leaf.load(kv))?.privateKey).toEqual(issued.privateKey);

    // A raw seed put in its place is refused by the sealer, not used.
    kv.set("keys/leaf-privkey.bin", Buffer.from(node.privateKey));
    await expect(leaf.load(kv)).rejects.toThrow(TestSealerError);
    // So is the CA's sealed key moved to the leaf's place.
    kv.set("keys/leaf-privkey.bin", sealer.seal("keys/ca-privkey.bin", caKey));
    await expect(leaf.load(kv)).rejects.toThrow(/keys\/leaf-privkey.bin: authentication failed/);
  });

  it("a certificate whose issuing CA is missing is a CorruptedStoreError, and no CA is created", async () => {
    const kv = new MemoryCertificateKv();
    const store = new CertificateStore(secrets);
    const ca = store.ca("ca");
    const spec = { issuer: ca, template: userTemplate("u") };
    await store.certificate("u", spec).ensure(kv);
    kv.delete("keys/ca", { prefix: true });
    kv.delete("issued/ca", { prefix: true });
    await expect(store.certificate("u", spec).ensure(kv)).rejects.toThrow(
      /certificate "u" exists but its issuing CA "ca" does not/,
    );
    expect(kv.get("issued/ca-cert.der")).toBeNull();
  });
});

describe("revocation", () => {
  it("revoke() re-issues the stored CRL, and verify then rejects the certificate", async () => {
    const kv = new MemoryCertificateKv();
    const store = new CertificateStore(secrets);
    const ca = store.ca("ca");
    const node = await store
      .certificate("node", { issuer: ca, template: nodeTemplate() })
      .ensure(kv);
    const before = await ca.crl(kv);

    const crl = await ca.revoke(kv, node.certificate);
    expect(crl.isRevoked(node.certificate.serial)).toBe(true);
    expect(crl.crlNumber).toBe((before.crlNumber ?? 0n) + 1n);
    expect(kv.get("ca-crl.der")).toEqual(crl.der);

    const stored = await ca.crl(kv);
    await expect(verifyCertificate(node.certificate, node.ca, { crl: stored })).rejects.toThrow(
      CertificateRevokedError,
    );

    // Idempotent: revoking again changes nothing.
    const again = await ca.revoke(kv, node.certificate.serial);
    expect(again.der.equals(crl.der)).toBe(true);
  });

  it("concurrent revocations are all kept", async () => {
    const kv = new MemoryCertificateKv();
    const store = new CertificateStore(secrets);
    const ca = store.ca("ca");
    const serials: bigint[] = [];
    for (const name of ["a", "b", "c", "d"]) {
      const issued = await store
        .certificate(name, { issuer: ca, template: userTemplate(name) })
        .ensure(kv);
      serials.push(issued.certificate.serial);
    }
    const crlWrites: string[] = [];
    const counting: CertificateKv = {
      read: (keys) => kv.read(keys),
      createAll: (absent, puts) => kv.createAll(absent, puts),
      async replace(key, revision, value) {
        const replaced = await kv.replace(key, revision, value);
        crlWrites.push(replaced ? "replaced" : "conflict");
        return replaced;
      },
    };

    await Promise.all(serials.map((serial) => ca.revoke(counting, serial)));

    const crl = await ca.crl(kv);
    for (const serial of serials) expect(crl.isRevoked(serial)).toBe(true);
    expect(crl.entries).toHaveLength(4);
    // They did race: some compare-and-swaps lost, and were retried.
    expect(crlWrites.filter((w) => w === "replaced")).toHaveLength(4);
    expect(crlWrites).toContain("conflict");
  });
});
