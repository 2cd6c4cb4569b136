/**
 * Reading certificates: from etcd, from a TLS peer, from a file. A certificate
 * is only accepted when both @peculiar/x509 (which gives us the fields) and
 * Node's OpenSSL-backed X509Certificate (which the TLS stack uses, and which
 * checks signatures) parse it, and when its key is Ed25519 — so a
 * {@link ParsedCertificate} is always one the rest of Metropolis can use.
 */
import { X509Certificate as NodeX509Certificate } from "node:crypto";
import type { ExtendedKeyUsageName, KeyUsageName } from "./certificate-templates";
import { isNodeId, nodeIdFromPublicKey, publicKeyFromSpki, publicKeyObject } from "./ed25519";
import {
  CertificateParseError,
  describeCause,
  InvalidKeyError,
  InvalidPemError,
  NodeIdentityError,
} from "./errors";
import { decodePem, encodePem, looksLikePem } from "./pem";
import { serialFromHex } from "./serial";
import { x509 } from "./x509-provider";

/** A certificate as DER bytes, PEM text, or already parsed. */
export type CertificateInput = Uint8Array | string | ParsedCertificate;

const EXTENDED_KEY_USAGE_NAMES: Readonly<Record<string, ExtendedKeyUsageName>> = {
  [x509.ExtendedKeyUsage.serverAuth]: "serverAuth",
  [x509.ExtendedKeyUsage.clientAuth]: "clientAuth",
};

const KEY_USAGE_FLAGS: ReadonlyArray<readonly [KeyUsageName, number]> = [
  ["digitalSignature", x509.KeyUsageFlags.digitalSignature],
  ["keyCertSign", x509.KeyUsageFlags.keyCertSign],
  ["cRLSign", x509.KeyUsageFlags.cRLSign],
];

/** An Ed25519 X.509 certificate and the fields Metropolis looks at. */
export class ParsedCertificate {
  /** The certificate's DER encoding, exactly as stored and sent. */
  readonly der: Buffer;
  /** The serial number. */
  readonly serial: bigint;
  /** Subject distinguished name (RFC 4514 text). */
  readonly subject: string;
  /** Issuer distinguished name (RFC 4514 text). */
  readonly issuer: string;
  /** The subject's common name, if it has one. */
  readonly commonName: string | undefined;
  /** DNS subject alternative names. */
  readonly dnsNames: readonly string[];
  /** IP address subject alternative names. */
  readonly ipAddresses: readonly string[];
  /** The raw 32-byte Ed25519 subject public key. */
  readonly publicKey: Buffer;
  /** Start of validity. */
  readonly notBefore: Date;
  /** End of validity. */
  readonly notAfter: Date;
  /** Whether basicConstraints marks the certificate as a CA. */
  readonly isCA: boolean;
  /** keyUsage bits the PKI knows about (others are ignored). */
  readonly keyUsage: readonly KeyUsageName[];
  /** extendedKeyUsage purposes: names for the known ones, OIDs for others. */
  readonly extendedKeyUsage: readonly (ExtendedKeyUsageName | string)[];
  readonly #node: NodeX509Certificate;

  /** Use {@link parseCertificate}; this constructor trusts its arguments. */
  private constructor(der: Buffer, peculiar: x509.X509Certificate, node: NodeX509Certificate) {
    this.der = der;
    this.#node = node;
    this.serial = serialFromHex(peculiar.serialNumber);
    this.subject = peculiar.subject;
    this.issuer = peculiar.issuer;
    this.commonName = peculiar.subjectName.getField("CN")[0];
    const names = peculiar.getExtension(x509.SubjectAlternativeNameExtension)?.names.items ?? [];
    this.dnsNames = names.filter((name) => name.type === "dns").map((name) => name.value);
    this.ipAddresses = names.filter((name) => name.type === "ip").map((name) => name.value);
    this.publicKey = publicKeyFromSpki(
      Buffer.from(peculiar.publicKey.rawData),
      "certificate public key",
    );
    this.notBefore = peculiar.notBefore;
    this.notAfter = peculiar.notAfter;
    this.isCA = peculiar.getExtension(x509.BasicConstraintsExtension)?.ca ?? false;
    const usageBits = peculiar.getExtension(x509.KeyUsagesExtension)?.usages ?? 0;
    this.keyUsage = KEY_USAGE_FLAGS.filter(([, bit]) => (usageBits & bit) !== 0).map(
      ([name]) => name,
    );
    const purposes = peculiar.getExtension(x509.ExtendedKeyUsageExtension)?.usages ?? [];
    this.extendedKeyUsage = purposes.map(String).map((oid) => EXTENDED_KEY_USAGE_NAMES[oid] ?? oid);
  }

  /** @internal Parses DER; see {@link parseCertificate} for the public entry point. */
  static fromDer(der: Buffer): ParsedCertificate {
    let peculiar: x509.X509Certificate;
    let node: NodeX509Certificate;
    try {
      peculiar = new x509.X509Certificate(der);
      node = new NodeX509Certificate(der);
    } catch (cause) {
      throw new CertificateParseError(
        `not a valid DER X.509 certificate (${der.length} bytes): ${describeCause(cause)}`,
        { cause },
      );
    }
    try {
      return new ParsedCertificate(der, peculiar, node);
    } catch (cause) {
      if (cause instanceof InvalidKeyError) throw cause;
      throw new CertificateParseError(
        `X.509 certificate ${peculiar.subject} has malformed fields: ${describeCause(cause)}`,
        { cause },
      );
    }
  }

  /** The certificate as PEM (`CERTIFICATE`). */
  toPem(): string {
    return encodePem("CERTIFICATE", this.der);
  }

  /** True when both hold the same DER bytes. */
  equals(other: ParsedCertificate): boolean {
    return this.der.equals(other.der);
  }

  /** True when the certificate's signature verifies with the raw Ed25519 `publicKey`. */
  isSignedBy(publicKey: Uint8Array): boolean {
    try {
      return this.#node.verify(publicKeyObject(publicKey));
    } catch {
      return false;
    }
  }

  /**
   * True when OpenSSL considers `ca` this certificate's issuer: the issuer
   * name equals `ca`'s subject and key identifiers and usages allow it. The
   * signature is checked separately by {@link isSignedBy}.
   */
  isIssuedBy(ca: ParsedCertificate): boolean {
    return this.#node.checkIssued(ca.#node);
  }

  /**
   * True when `ca` issued this certificate: it is the issuer OpenSSL would
   * pick ({@link isIssuedBy}) and its key verifies the signature
   * ({@link isSignedBy}). The one chain check of the package: verification,
   * the certificate store and revocation all use it. Says nothing about
   * validity dates or revocation (see `verifyCertificate`).
   */
  chainsTo(ca: ParsedCertificate): boolean {
    return this.isIssuedBy(ca) && this.isSignedBy(ca.publicKey);
  }

  /** True when the certificate is valid for host name `name` (as TLS checks it). */
  matchesHost(name: string): boolean {
    return this.#node.checkHost(name) !== undefined;
  }
}

/**
 * Parses an Ed25519 X.509 certificate from DER bytes or PEM text (a
 * `Uint8Array` holding PEM text is accepted too). Throws
 * {@link CertificateParseError} for anything that is not a certificate and
 * {@link WrongKeyTypeError} for a certificate whose key is not Ed25519.
 */
export function parseCertificate(input: CertificateInput): ParsedCertificate {
  if (input instanceof ParsedCertificate) return input;
  let der: Buffer;
  try {
    if (typeof input === "string") {
      der = decodePem(input, "CERTIFICATE");
    } else if (input instanceof Uint8Array) {
      der = looksLikePem(input)
        ? decodePem(Buffer.from(input).toString("latin1"), "CERTIFICATE")
        : Buffer.from(input);
    } else {
      throw new CertificateParseError(
        `a certificate must be DER bytes or PEM text, got ${typeof input}`,
      );
    }
  } catch (cause) {
    if (cause instanceof InvalidPemError) {
      throw new CertificateParseError(`not a PEM certificate: ${cause.message}`, { cause });
    }
    throw cause;
  }
  if (der.length === 0) throw new CertificateParseError("certificate is empty (0 bytes)");
  return ParsedCertificate.fromDer(der);
}

/**
 * The node ID a certificate speaks for: its CN, after checking that the CN is
 * a node ID and is the node ID of the certificate's own key (so a certificate
 * for key A can never claim node B). Throws {@link NodeIdentityError}
 * otherwise, e.g. for a user certificate.
 */
export function nodeIdFromCertificate(input: CertificateInput): string {
  const certificate = parseCertificate(input);
  const { commonName } = certificate;
  if (commonName === undefined || !isNodeId(commonName)) {
    throw new NodeIdentityError(
      `certificate ${certificate.subject} is not a node certificate: its CN is not a node ID`,
    );
  }
  const expected = nodeIdFromPublicKey(certificate.publicKey);
  if (commonName !== expected) {
    throw new NodeIdentityError(
      `certificate claims node ${commonName} but its public key belongs to node ${expected}`,
    );
  }
  return commonName;
}
