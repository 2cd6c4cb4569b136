/**
 * parseCertificate reads the fields callers are classified by from Node's
 * parse, and the rest from @peculiar/x509 on first use: the two must agree
 * on every certificate the cluster makes, or a caller would be classified
 * differently from what the rest of the PKI believes about its certificate.
 */
import "reflect-metadata";
import { execFileSync } from "node:child_process";
import { X509Certificate } from "node:crypto";
import { join } from "node:path";
import * as x509 from "@peculiar/x509";
import {
  CertificateAuthority,
  createEphemeralCertificate,
  generateKeyPair,
  parseCertificate,
  publicKeyFromSpki,
} from "@metropolis/pki";

const ekuNames: Record<string, string> = {
  [x509.ExtendedKeyUsage.serverAuth]: "serverAuth",
  [x509.ExtendedKeyUsage.clientAuth]: "clientAuth",
};

/** The fields Node's parse gives ParsedCertificate, as @peculiar/x509 reads them. */
function peculiarView(der: Uint8Array) {
  const cert = new x509.X509Certificate(der);
  return {
    serial: BigInt("0x" + cert.serialNumber),
    commonName: cert.subjectName.getField("CN")[0],
    publicKey: publicKeyFromSpki(Buffer.from(cert.publicKey.rawData)),
    notBefore: cert.notBefore,
    notAfter: cert.notAfter,
    isCA: cert.getExtension(x509.BasicConstraintsExtension)?.ca ?? false,
    extendedKeyUsage: Array.from(
      cert.getExtension(x509.ExtendedKeyUsageExtension)?.usages ?? [],
      (oid) => ekuNames[String(oid)] ?? String(oid),
    ),
    selfIssued: cert.subject === cert.issuer,
  };
}

describe("parseCertificate", () => {
  it("agrees with @peculiar/x509 on every kind of certificate the cluster makes", async () => {
    const ca = await CertificateAuthority.create();
    const node = generateKeyPair();
    const owner = generateKeyPair();
    const ephemeral = generateKeyPair();
    const certificates = {
      ca: ca.certificate.der,
      node: (await ca.issueNodeCertificate(node.publicKey, { ipAddresses: ["127.0.0.9"] })).der,
      owner: (await ca.issueUserCertificate("owner", owner.publicKey)).der,
      ephemeral: (await createEphemeralCertificate(ephemeral.privateKey)).der,
    };
    for (const [kind, der] of Object.entries(certificates)) {
      const parsed = parseCertificate(der);
      const view = peculiarView(der);
      expect({ kind, ...view }).toEqual({
        kind,
        serial: parsed.serial,
        commonName: parsed.commonName,
        publicKey: parsed.publicKey,
        notBefore: parsed.notBefore,
        notAfter: parsed.notAfter,
        isCA: parsed.isCA,
        extendedKeyUsage: parsed.extendedKeyUsage,
        selfIssued: parsed.isSelfIssued(),
      });
    }
    // And the fields read lazily are still there, and right.
    const parsedNode = parseCertificate(certificates.node);
    expect(parsedNode.ipAddresses).toEqual(["127.0.0.9"]);
    expect(parsedNode.issuer).toBe(ca.certificate.subject);
    expect(parseCertificate(certificates.ephemeral).isSelfIssued()).toBe(true);
    expect(parsedNode.isSelfIssued()).toBe(false);
  });

  it("takes a certificate Node parsed (a TLS peer's) as it is, and chains it like its DER", async () => {
    const ca = await CertificateAuthority.create();
    const other = await CertificateAuthority.create();
    const der = (await ca.issueNodeCertificate(generateKeyPair().publicKey)).der;
    const node = new X509Certificate(der);
    const parsed = parseCertificate(node);
    expect(parsed.der.equals(Buffer.from(der))).toBe(true);
    expect(parsed.serial).toBe(parseCertificate(der).serial);
    expect(parsed.commonName).toBe(parseCertificate(der).commonName);
    // Its CA's kept key verifies it; another CA's does not.
    expect(parsed.chainsTo(parseCertificate(ca.certificate.der))).toBe(true);
    expect(parsed.chainsTo(parseCertificate(other.certificate.der))).toBe(false);
  });

  it("leaves the tls module whole in a process that parses a certificate before loading tls", async () => {
    // Node 20's X509Certificate.toLegacyObject(), called first, breaks
    // require("tls") for the whole process; parse-certificate.ts loads tls
    // first. A fresh process, since jest's has loaded tls long ago.
    const der = Buffer.from((await CertificateAuthority.create()).certificate.der);
    const pki = join(__dirname, "..", "dist", "index.js");
    const script = `
      const { parseCertificate } = require(${JSON.stringify(pki)});
      parseCertificate(Buffer.from(${JSON.stringify(der.toString("base64"))}, "base64"));
      process.stdout.write(typeof require("node:tls").createSecureContext);
    `;
    expect(execFileSync(process.execPath, ["-e", script], { encoding: "utf8" })).toBe("function");
  });
});
