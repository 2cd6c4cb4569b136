/**
 * Reading certificates: from etcd, from a TLS peer, from a file. A
 * certificate is accepted when Node's OpenSSL-backed X509Certificate (which
 * the TLS stack uses, and which checks signatures) parses it and its key is
 * Ed25519 — so a {@link ParsedCertificate} is always one the rest of
 * Metropolis can use.
 *
 * The fields every caller classification needs (serial, CN, key, validity,
 * CA flag, extended key usage) come from that parse. The rest — the subject
 * and issuer as RFC 4514 text, the subject alternative names and the key
 * usage bits, which Node does not expose — come from @peculiar/x509, parsed
 * on first use of one of them: that parse costs about ten times Node's
 * (1.7 ms against 0.2 ms here), and a curator that has just become leader
 * classifies every node's certificate at once. A certificate whose fields
 * @peculiar/x509 then cannot read throws {@link CertificateParseError} from
 * that first use.
 */
import { X509Certificate as NodeX509Certificate, type KeyObject } from "node:crypto";
// Loaded before X509Certificate.toLegacyObject() is first called: on Node 20
// that call loads _tls_common, which, if it comes first, leaves the tls
// module without createSecureContext for the whole process (a circular
// require). Importing tls here puts the two in the right order.
import "node:tls";
import type { ExtendedKeyUsageName, KeyUsageName } from "./certificate-templates";
import { isNodeId, nodeIdFromPublicKey, publicKeyObject, rawPublicKey } from "./ed25519";
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

/** A validity date as OpenSSL prints it ("Nov 24 23:50:29 2026 GMT"), as a Date. */
function certificateDate(text: string, field: string): Date {
  const date = new Date(text);
  if (Number.isNaN(date.getTime()))
    throw new Error(`${field} ${JSON.stringify(text)} is not a date`);
  return date;
}

/**
 * A certificate as DER bytes, PEM text, already parsed, or as Node's
 * X509Certificate (what a TLS socket's `getPeerX509Certificate()` gives:
 * taken as it is, not parsed again).
 */
export type CertificateInput = Uint8Array | string | ParsedCertificate | NodeX509Certificate;

const EXTENDED_KEY_USAGE_NAMES: Readonly<Record<string, ExtendedKeyUsageName>> = {
  [x509.ExtendedKeyUsage.serverAuth]: "serverAuth",
  [x509.ExtendedKeyUsage.clientAuth]: "clientAuth",
};

const KEY_USAGE_FLAGS: ReadonlyArray<readonly [KeyUsageName, number]> = [
  ["digitalSignature", x509.KeyUsageFlags.digitalSignature],
  ["keyCertSign", x509.KeyUsageFlags.keyCertSign],
  ["cRLSign", x509.KeyUsageFlags.cRLSign],
];

/** The fields only @peculiar/x509 reads, parsed on first use. */
interface PeculiarFields {
  subject: string;
  issuer: string;
  dnsNames: readonly string[];
  ipAddresses: readonly string[];
  keyUsage: readonly KeyUsageName[];
}

/**
 * Decodes `der` with one of the two parsers (`decode`) and reads fields of the
 * result (`read`); a failure of either is a CertificateParseError saying
 * which step failed (an InvalidKeyError from reading goes through as it is).
 */
function decodeDer<C, T>(
  der: Buffer,
  decode: (der: Buffer) => C,
  subjectOf: (cert: C) => string,
  read: (cert: C) => T,
): T {
  let cert: C;
  try {
    cert = decode(der);
  } catch (cause) {
    throw new CertificateParseError(
      `not a valid DER X.509 certificate (${der.length} bytes): ${describeCause(cause)}`,
      { cause },
    );
  }
  try {
    return read(cert);
  } catch (cause) {
    if (cause instanceof InvalidKeyError) throw cause;
    throw new CertificateParseError(
      `X.509 certificate ${subjectOf(cert)} has malformed fields: ${describeCause(cause)}`,
      { cause },
    );
  }
}

/** An Ed25519 X.509 certificate and the fields Metropolis looks at. */
export class ParsedCertificate {
  /** The certificate's DER encoding, exactly as stored and sent. */
  readonly der: Buffer;
  /** The serial number. */
  readonly serial: bigint;
  /** The subject's common name, if it has one (the first, if it has several). */
  readonly commonName: string | undefined;
  /** The subject's organizationalUnitName attributes (a scoped credential's role: access-role.ts). */
  readonly organizationalUnits: readonly string[];
  /** The raw 32-byte Ed25519 subject public key. */
  readonly publicKey: Buffer;
  /** Start of validity. */
  readonly notBefore: Date;
  /** End of validity. */
  readonly notAfter: Date;
  /** Whether basicConstraints marks the certificate as a CA. */
  readonly isCA: boolean;
  /** extendedKeyUsage purposes: names for the known ones, OIDs for others. */
  readonly extendedKeyUsage: readonly (ExtendedKeyUsageName | string)[];
  readonly #node: NodeX509Certificate;
  /**
   * The subject key as Node's KeyObject, kept: verifying a certificate
   * against this one (a CA's) would otherwise build one per verification —
   * half the cost of a new leader checking every node's certificate.
   */
  readonly #keyObject: KeyObject;
  #peculiar: PeculiarFields | undefined;

  /** Use {@link parseCertificate}; this constructor trusts its arguments. */
  private constructor(der: Buffer, node: NodeX509Certificate) {
    this.der = der;
    this.#node = node;
    this.serial = serialFromHex(node.serialNumber);
    const subject = node.toLegacyObject().subject;
    const cn = subject?.CN;
    this.commonName = Array.isArray(cn) ? cn[0] : cn;
    const ou = subject?.OU;
    this.organizationalUnits = ou === undefined ? [] : Array.isArray(ou) ? ou : [ou];
    this.#keyObject = node.publicKey;
    this.publicKey = rawPublicKey(this.#keyObject, "certificate public key");
    this.notBefore = certificateDate(node.validFrom, "notBefore");
    this.notAfter = certificateDate(node.validTo, "notAfter");
    this.isCA = node.ca;
    this.extendedKeyUsage = (node.keyUsage ?? []).map(
      (oid) => EXTENDED_KEY_USAGE_NAMES[oid] ?? oid,
    );
  }

  /** Subject distinguished name (RFC 4514 text). */
  get subject(): string {
    return this.peculiar().subject;
  }
  /** Issuer distinguished name (RFC 4514 text). */
  get issuer(): string {
    return this.peculiar().issuer;
  }
  /** DNS subject alternative names. */
  get dnsNames(): readonly string[] {
    return this.peculiar().dnsNames;
  }
  /** IP address subject alternative names. */
  get ipAddresses(): readonly string[] {
    return this.peculiar().ipAddresses;
  }
  /** keyUsage bits the PKI knows about (others are ignored). */
  get keyUsage(): readonly KeyUsageName[] {
    return this.peculiar().keyUsage;
  }

  private peculiar(): PeculiarFields {
    this.#peculiar ??= decodeDer(
      this.der,
      (der) => new x509.X509Certificate(der),
      (cert) => cert.subject,
      (cert) => {
        const names = cert.getExtension(x509.SubjectAlternativeNameExtension)?.names.items ?? [];
        const usageBits = cert.getExtension(x509.KeyUsagesExtension)?.usages ?? 0;
        return {
          subject: cert.subject,
          issuer: cert.issuer,
          dnsNames: names.filter((name) => name.type === "dns").map((name) => name.value),
          ipAddresses: names.filter((name) => name.type === "ip").map((name) => name.value),
          keyUsage: KEY_USAGE_FLAGS.filter(([, bit]) => (usageBits & bit) !== 0).map(
            ([name]) => name,
          ),
        };
      },
    );
    return this.#peculiar;
  }

  /** @internal Parses DER; see {@link parseCertificate} for the public entry point. */
  static fromDer(der: Buffer): ParsedCertificate {
    return decodeDer(
      der,
      (bytes) => new NodeX509Certificate(bytes),
      (node) => node.subject.replace(/\n/g, ", "),
      (node) => new ParsedCertificate(der, node),
    );
  }

  /** @internal Reads a certificate Node has parsed; see {@link parseCertificate}. */
  static fromNode(node: NodeX509Certificate): ParsedCertificate {
    const der = node.raw;
    return decodeDer(
      der,
      () => node,
      (cert) => cert.subject.replace(/\n/g, ", "),
      (cert) => new ParsedCertificate(der, cert),
    );
  }

  /**
   * True when the certificate names itself as its issuer (its subject and
   * issuer names are equal): a self-signed certificate, if its own key also
   * verifies it ({@link isSignedBy}). Does not parse with @peculiar/x509.
   */
  isSelfIssued(): boolean {
    // Not checkIssued(self): OpenSSL also requires keyCertSign of an issuer,
    // which a self-signed leaf (a registering node's) does not have.
    return this.#node.subject === this.#node.issuer;
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
    let key: KeyObject;
    try {
      key = publicKeyObject(publicKey);
    } catch {
      return false;
    }
    return this.#verifiesWith(key);
  }

  #verifiesWith(key: KeyObject): boolean {
    try {
      return this.#node.verify(key);
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
    return this.isIssuedBy(ca) && this.#verifiesWith(ca.#keyObject);
  }

  /** True when the certificate is valid for host name `name` (as TLS checks it). */
  matchesHost(name: string): boolean {
    return this.#node.checkHost(name) !== undefined;
  }
}

/**
 * Parses an Ed25519 X.509 certificate from DER bytes or PEM text (a
 * `Uint8Array` holding PEM text is accepted too), or reads one Node parsed
 * already (a TLS peer's `getPeerX509Certificate()`). Throws
 * {@link CertificateParseError} for anything that is not a certificate and
 * {@link WrongKeyTypeError} for a certificate whose key is not Ed25519.
 */
export function parseCertificate(input: CertificateInput): ParsedCertificate {
  if (input instanceof ParsedCertificate) return input;
  if (input instanceof NodeX509Certificate) return ParsedCertificate.fromNode(input);
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
