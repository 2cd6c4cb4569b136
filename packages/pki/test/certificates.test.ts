import "reflect-metadata";
import { webcrypto, X509Certificate } from "node:crypto";
import * as x509 from "@peculiar/x509";
import {
  CertificateAuthority,
  CertificateExpiredError,
  CertificateNotYetValidError,
  CertificateParseError,
  CertificateRevokedError,
  createEphemeralCertificate,
  CrlParseError,
  generateKeyPair,
  InvalidTemplateError,
  issueCertificate,
  KeyMismatchError,
  MissingPrivateKeyError,
  NodeIdentityError,
  nodeIdFromCertificate,
  nodeIdFromPublicKey,
  NotACertificateAuthorityError,
  nodeTemplate,
  parseCertificate,
  parseCrl,
  publicKeyToPem,
  SERIAL_LIMIT,
  tlsMaterial,
  UNLIMITED_NOT_AFTER,
  UntrustedCertificateError,
  UntrustedCrlError,
  userTemplate,
  verifyCertificate,
  WrongKeyTypeError,
} from "@metropolis/pki";

describe("cluster CA", () => {
  it("is a self-signed Ed25519 CA with keyCertSign and cRLSign that never expires", async () => {
    const ca = await CertificateAuthority.create();
    const cert = ca.certificate;
    expect(cert.commonName).toBe("Metropolis Cluster CA");
    expect(cert.subject).toBe("CN=Metropolis Cluster CA");
    expect(cert.issuer).toBe(cert.subject);
    expect(cert.isCA).toBe(true);
    expect([...cert.keyUsage].sort()).toEqual(["cRLSign", "keyCertSign"]);
    expect(cert.extendedKeyUsage).toEqual([]);
    expect(cert.notAfter.toISOString()).toBe("9999-12-31T23:59:59.000Z");
    expect(cert.isSignedBy(cert.publicKey)).toBe(true);

    const node = new X509Certificate(cert.der);
    expect(node.ca).toBe(true);
    expect(node.publicKey.asymmetricKeyType).toBe("ed25519");
    expect(node.verify(node.publicKey)).toBe(true);
    expect(node.subject).toBe("CN=Metropolis Cluster CA");
  });

  it("loads from certificate and key, and refuses a key that is not the CA's", async () => {
    const ca = await CertificateAuthority.create({ commonName: "Test CA" });
    const loaded = CertificateAuthority.load(ca.certificate.toPem(), ca.privateKey);
    expect(loaded.certificate.equals(ca.certificate)).toBe(true);
    expect(() =>
      CertificateAuthority.load(ca.certificate.der, generateKeyPair().privateKey),
    ).toThrow(KeyMismatchError);
  });

  it("refuses to sign with a certificate that is not a CA", async () => {
    const ca = await CertificateAuthority.create();
    const node = generateKeyPair();
    const leaf = await ca.issueNodeCertificate(node.publicKey);
    expect(() => CertificateAuthority.load(leaf, node.privateKey)).toThrow(
      NotACertificateAuthorityError,
    );
    await expect(
      issueCertificate(userTemplate("x"), generateKeyPair().publicKey, {
        certificate: leaf,
        privateKey: node.privateKey,
      }),
    ).rejects.toThrow(/is not a CA/);
  });
});

describe("node certificates", () => {
  it("have CN and DNS SAN = node ID, extra SANs, server+client auth, and verify against the CA", async () => {
    const ca = await CertificateAuthority.create();
    const node = generateKeyPair();
    const nodeId = nodeIdFromPublicKey(node.publicKey);
    const cert = await ca.issueNodeCertificate(node.publicKey, {
      dnsNames: ["node.example"],
      ipAddresses: ["127.0.0.2", "::1"],
    });

    expect(cert.commonName).toBe(nodeId);
    expect(cert.dnsNames).toEqual([nodeId, "node.example"]);
    expect(cert.ipAddresses).toEqual(["127.0.0.2", "::1"]);
    expect([...cert.extendedKeyUsage].sort()).toEqual(["clientAuth", "serverAuth"]);
    expect(cert.keyUsage).toEqual(["digitalSignature"]);
    expect(cert.isCA).toBe(false);
    expect(cert.publicKey.equals(node.publicKey)).toBe(true);
    expect(cert.issuer).toBe(ca.certificate.subject);
    expect(cert.notAfter.getTime()).toBe(UNLIMITED_NOT_AFTER.getTime());
    expect(cert.notBefore.getTime()).toBeLessThan(Date.now());
    expect(nodeIdFromCertificate(cert.der)).toBe(nodeId);

    // It returns the verified certificate, parsed.
    const verified = await verifyCertificate(cert, ca.certificate);
    expect(verified.der).toEqual(cert.der);
    expect(nodeIdFromCertificate(verified)).toBe(nodeId);

    // Node's OpenSSL-backed parser agrees.
    const x509 = new X509Certificate(cert.toPem());
    const caX509 = new X509Certificate(ca.certificate.der);
    expect(x509.verify(caX509.publicKey)).toBe(true);
    expect(x509.checkIssued(caX509)).toBe(true);
    expect(x509.checkHost(nodeId)).toBe(nodeId);
    expect(x509.checkIP("127.0.0.2")).toBe("127.0.0.2");
    expect(x509.checkHost("metropolis-00000000000000000000000000000000")).toBeUndefined();
    expect(x509.keyUsage).toEqual(
      expect.arrayContaining(["1.3.6.1.5.5.7.3.1", "1.3.6.1.5.5.7.3.2"]),
    );
    expect(x509.ca).toBe(false);
  });

  it("reject invalid SANs with InvalidTemplateError", () => {
    expect(() => nodeTemplate({ ipAddresses: ["300.1.1.1"] })).toThrow(InvalidTemplateError);
    expect(() => nodeTemplate({ dnsNames: ["bad name"] })).toThrow(/not a valid DNS name/);
    expect(() => userTemplate("")).toThrow(/non-empty/);
  });
});

describe("user certificates", () => {
  it("are client-only, with CN = owner and no node identity", async () => {
    const ca = await CertificateAuthority.create();
    const owner = generateKeyPair();
    const cert = await ca.issueUserCertificate("owner", owner.publicKey);
    expect(cert.commonName).toBe("owner");
    expect(cert.extendedKeyUsage).toEqual(["clientAuth"]);
    expect(cert.dnsNames).toEqual([]);
    expect(cert.isCA).toBe(false);
    expect(new X509Certificate(cert.der).keyUsage).toEqual(["1.3.6.1.5.5.7.3.2"]);
    const verified = await verifyCertificate(cert.toPem(), ca.certificate.toPem());
    expect(verified.der).toEqual(cert.der);
    expect(verified.commonName).toBe("owner");
    expect(() => nodeIdFromCertificate(cert)).toThrow(NodeIdentityError);
  });

  it("escape their owner name rather than letting it inject DN attributes", async () => {
    const ca = await CertificateAuthority.create();
    const cert = await ca.issueUserCertificate("a,CN=admin", generateKeyPair().publicKey);
    expect(cert.commonName).toBe("a,CN=admin");
    expect(new X509Certificate(cert.der).subject).toBe("CN=a\\,CN=admin");
  });
});

describe("ephemeral certificates", () => {
  it("are self-signed by the node's own key, client-only, named by node ID", async () => {
    const node = generateKeyPair();
    const cert = await createEphemeralCertificate(node.privateKey);
    const nodeId = nodeIdFromPublicKey(node.publicKey);
    expect(cert.publicKey.equals(node.publicKey)).toBe(true);
    expect(cert.issuer).toBe(cert.subject);
    expect(cert.isSignedBy(node.publicKey)).toBe(true);
    expect(cert.extendedKeyUsage).toEqual(["clientAuth"]);
    expect(cert.isCA).toBe(false);
    expect(nodeIdFromCertificate(cert)).toBe(nodeId);
    expect(new X509Certificate(cert.der).verify(new X509Certificate(cert.der).publicKey)).toBe(
      true,
    );
    // Not trusted by any CA.
    const ca = await CertificateAuthority.create();
    await expect(verifyCertificate(cert, ca.certificate)).rejects.toThrow(
      UntrustedCertificateError,
    );
  });
});

describe("serials", () => {
  it("are positive, below 2^127 and distinct", async () => {
    const ca = await CertificateAuthority.create();
    const key = generateKeyPair().publicKey;
    const serials = [ca.certificate.serial];
    for (let i = 0; i < 50; i++) serials.push((await ca.issueNodeCertificate(key)).serial);
    for (const serial of serials) {
      expect(serial).toBeGreaterThan(0n);
      expect(serial).toBeLessThan(SERIAL_LIMIT);
    }
    expect(new Set(serials).size).toBe(serials.length);
    // And what OpenSSL reads is the same number.
    const cert = await ca.issueNodeCertificate(key);
    expect(BigInt("0x" + new X509Certificate(cert.der).serialNumber)).toBe(cert.serial);
  });
});

describe("verification", () => {
  it("rejects a certificate from another CA", async () => {
    const ca = await CertificateAuthority.create();
    const other = await CertificateAuthority.create();
    const cert = await other.issueNodeCertificate(generateKeyPair().publicKey);
    await expect(verifyCertificate(cert, ca.certificate)).rejects.toThrow(
      UntrustedCertificateError,
    );
    await expect(verifyCertificate(cert, ca.certificate)).rejects.toThrow(
      /is not signed by CA CN=Metropolis Cluster CA/,
    );
  });

  it("rejects a verifying certificate that is not a CA", async () => {
    const ca = await CertificateAuthority.create();
    const leaf = await ca.issueNodeCertificate(generateKeyPair().publicKey);
    await expect(verifyCertificate(leaf, leaf)).rejects.toThrow(NotACertificateAuthorityError);
  });

  it("checks validity at the given time", async () => {
    const ca = await CertificateAuthority.create();
    const cert = await ca.issueNodeCertificate(generateKeyPair().publicKey, {
      notBefore: new Date("2030-01-01T00:00:00Z"),
      notAfter: new Date("2031-01-01T00:00:00Z"),
    });
    await expect(
      verifyCertificate(cert, ca.certificate, { at: new Date("2029-12-31T23:59:59Z") }),
    ).rejects.toThrow(CertificateNotYetValidError);
    await expect(
      verifyCertificate(cert, ca.certificate, { at: new Date("2031-01-01T00:00:01Z") }),
    ).rejects.toThrow(CertificateExpiredError);
    await expect(
      verifyCertificate(cert, ca.certificate, { at: new Date("2030-06-01T00:00:00Z") }),
    ).resolves.toBeDefined();
  });
});

describe("CRL", () => {
  it("is signed by the CA, numbered, and makes verify reject revoked certificates", async () => {
    const ca = await CertificateAuthority.create();
    const revoked = await ca.issueNodeCertificate(generateKeyPair().publicKey);
    const kept = await ca.issueNodeCertificate(generateKeyPair().publicKey);

    const empty = await ca.createCrl();
    expect(empty.entries).toEqual([]);
    expect(empty.crlNumber).toBe(1n);
    expect(await empty.isIssuedBy(ca.certificate)).toBe(true);
    await expect(verifyCertificate(revoked, ca.certificate, { crl: empty })).resolves.toBeDefined();

    const crl = await ca.revoke(empty, revoked.serial);
    expect(crl.crlNumber).toBe(2n);
    expect(crl.isRevoked(revoked.serial)).toBe(true);
    expect(crl.revocationOf(revoked.serial)?.reason).toBe("cessationOfOperation");
    expect(await ca.revoke(crl, revoked.serial)).toBe(crl);

    // Survives DER and PEM round trips.
    const parsed = parseCrl(crl.toPem());
    expect(parsed.der.equals(crl.der)).toBe(true);
    expect(parsed.isRevoked(revoked.serial)).toBe(true);
    expect(parseCrl(crl.der).crlNumber).toBe(2n);

    const rejection = verifyCertificate(revoked, ca.certificate, { crl: crl.der });
    await expect(rejection).rejects.toThrow(CertificateRevokedError);
    await expect(rejection).rejects.toThrow(/was revoked at/);
    await expect(verifyCertificate(kept, ca.certificate, { crl })).resolves.toBeDefined();
  });

  it("from another CA is refused", async () => {
    const ca = await CertificateAuthority.create();
    const other = await CertificateAuthority.create();
    const cert = await ca.issueNodeCertificate(generateKeyPair().publicKey);
    const foreign = await other.createCrl();
    expect(await foreign.isIssuedBy(ca.certificate)).toBe(false);
    await expect(verifyCertificate(cert, ca.certificate, { crl: foreign })).rejects.toThrow(
      UntrustedCrlError,
    );
    await expect(ca.revoke(foreign, cert.serial)).rejects.toThrow(UntrustedCrlError);
  });
});

describe("bad input", () => {
  it("garbage DER is a CertificateParseError", () => {
    expect(() => parseCertificate(Buffer.from("definitely not DER"))).toThrow(
      CertificateParseError,
    );
    expect(() => parseCertificate(Buffer.from("definitely not DER"))).toThrow(
      /not a valid DER X.509 certificate \(18 bytes\)/,
    );
    expect(() => parseCertificate(Buffer.alloc(0))).toThrow(/empty/);
    expect(() => parseCrl(Buffer.from([0x30, 0x03, 0x02, 0x01, 0x01]))).toThrow(CrlParseError);
  });

  it("garbage PEM is a CertificateParseError naming the problem", () => {
    expect(() => parseCertificate("hello")).toThrow(/found no PEM block/);
    expect(() => parseCertificate(publicKeyToPem(generateKeyPair().publicKey))).toThrow(
      /expected a PEM "CERTIFICATE" block, found "PUBLIC KEY"/,
    );
    expect(() =>
      parseCertificate("-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n"),
    ).toThrow(CertificateParseError);
  });

  it("a certificate with a non-Ed25519 key is a WrongKeyTypeError", async () => {
    const rsaCertificate = await makeRsaCertificate();
    expect(() => parseCertificate(rsaCertificate)).toThrow(WrongKeyTypeError);
    expect(() => parseCertificate(rsaCertificate)).toThrow(
      /certificate public key is of key type rsa/,
    );
    // Also when Node parsed it already (a TLS peer's certificate).
    expect(() => parseCertificate(new X509Certificate(rsaCertificate))).toThrow(WrongKeyTypeError);
  });

  it("TLS material needs the certificate's own private key", async () => {
    const ca = await CertificateAuthority.create();
    const node = generateKeyPair();
    const cert = await ca.issueNodeCertificate(node.publicKey);
    const material = tlsMaterial({
      certificate: cert,
      privateKey: node.privateKey,
      ca: ca.certificate,
    });
    expect(material.cert).toMatch(/^-----BEGIN CERTIFICATE-----/);
    expect(material.key).toMatch(/^-----BEGIN PRIVATE KEY-----/);
    expect(material.ca).toBe(ca.certificate.toPem());
    expect(() =>
      tlsMaterial({
        certificate: cert,
        privateKey: generateKeyPair().privateKey,
        ca: ca.certificate,
      }),
    ).toThrow(KeyMismatchError);
    expect(() => tlsMaterial({ certificate: cert, privateKey: null, ca: ca.certificate })).toThrow(
      MissingPrivateKeyError,
    );
  });
});

/** An RSA certificate, made with @peculiar/x509 directly (the PKI itself refuses to). */
async function makeRsaCertificate(): Promise<Buffer> {
  const algorithm = {
    name: "RSASSA-PKCS1-v1_5",
    hash: "SHA-256",
    publicExponent: new Uint8Array([1, 0, 1]),
    modulusLength: 1024,
  };
  const keys = await webcrypto.subtle.generateKey(algorithm, false, ["sign", "verify"]);
  const cert = await x509.X509CertificateGenerator.createSelfSigned(
    { name: "CN=rsa", keys, signingAlgorithm: algorithm },
    webcrypto,
  );
  // Sanity check that it really is RSA, so the test proves what it claims.
  expect(new X509Certificate(Buffer.from(cert.rawData)).publicKey.asymmetricKeyType).toBe("rsa");
  return Buffer.from(cert.rawData);
}
