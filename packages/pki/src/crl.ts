/**
 * Certificate revocation lists. Certificates never expire (see issuance.ts),
 * so the CA's CRL is the only way a certificate stops being valid: removing a
 * node or a user revokes its serial, and every verifier (Node TLS via
 * `crl:`, etcd via `--peer-crl-file`, {@link verifyCertificate}) rejects it.
 *
 * A CRL is re-issued as a whole on every revocation, with a CRL number one
 * higher than before, signed by the CA and with no expiry of its own
 * (nextUpdate is the same "unlimited" date as the certificates').
 */
import {
  CrlParseError,
  describeCause,
  InvalidPemError,
  NotACertificateAuthorityError,
  UntrustedCrlError,
} from "./errors";
import { importSigningKey, importVerifyingKey } from "./ed25519";
import { assertCanSign, UNLIMITED_NOT_AFTER, type SigningAuthority } from "./issuance";
import { parseCertificate, type CertificateInput } from "./parse-certificate";
import { decodePem, encodePem, looksLikePem } from "./pem";
import { serialFromHex, serialToHex } from "./serial";
import { ED25519_ALGORITHM, x509 } from "./x509-provider";

/**
 * Why a certificate was revoked (RFC 5280 5.3.1). "unspecified" is left out
 * on purpose: RFC 5280 says not to encode it, and an entry without any
 * extension is encoded by @peculiar/x509 as an empty (invalid) extension list.
 */
export type RevocationReason =
  | "keyCompromise"
  | "cACompromise"
  | "affiliationChanged"
  | "superseded"
  | "cessationOfOperation"
  | "privilegeWithdrawn";

/** The reason recorded when none is given: the node or user left the cluster. */
export const DEFAULT_REVOCATION_REASON: RevocationReason = "cessationOfOperation";

/** One revoked certificate in a CRL. */
export interface RevocationEntry {
  /** Serial number of the revoked certificate. */
  readonly serial: bigint;
  /** When it was revoked. */
  readonly revocationDate: Date;
  /** Why, if the CRL says. */
  readonly reason: RevocationReason | undefined;
}

/** A CRL as DER bytes, PEM text, or already parsed. */
export type CrlInput = Uint8Array | string | RevocationList;

const REASON_CODES: Readonly<Record<RevocationReason, x509.X509CrlReason>> = {
  keyCompromise: x509.X509CrlReason.keyCompromise,
  cACompromise: x509.X509CrlReason.cACompromise,
  affiliationChanged: x509.X509CrlReason.affiliationChanged,
  superseded: x509.X509CrlReason.superseded,
  cessationOfOperation: x509.X509CrlReason.cessationOfOperation,
  privilegeWithdrawn: x509.X509CrlReason.privilegeWithdrawn,
};
const REASON_NAMES = new Map<number, RevocationReason>(
  Object.entries(REASON_CODES).map(([name, code]) => [code, name as RevocationReason]),
);
const CRL_NUMBER_OID = "2.5.29.20";

/** A parsed X.509 CRL. */
export class RevocationList {
  /** The CRL's DER encoding, as stored in etcd at `<ca name>-crl.der`. */
  readonly der: Buffer;
  /** Issuer distinguished name (RFC 4514 text). */
  readonly issuer: string;
  /** When this CRL was issued. */
  readonly thisUpdate: Date;
  /** When a newer CRL is promised, if at all. */
  readonly nextUpdate: Date | undefined;
  /** The CRL number, increasing with each re-issue (undefined for foreign CRLs without one). */
  readonly crlNumber: bigint | undefined;
  /** The revoked certificates. */
  readonly entries: readonly RevocationEntry[];
  readonly #peculiar: x509.X509Crl;
  readonly #bySerial: ReadonlyMap<bigint, RevocationEntry>;

  private constructor(der: Buffer, crl: x509.X509Crl) {
    this.der = der;
    this.#peculiar = crl;
    this.issuer = crl.issuer;
    this.thisUpdate = crl.thisUpdate;
    this.nextUpdate = crl.nextUpdate;
    const numberExtension = crl.extensions.find((extension) => extension.type === CRL_NUMBER_OID);
    this.crlNumber = numberExtension ? decodeDerInteger(numberExtension.value) : undefined;
    this.entries = crl.entries.map((entry) => ({
      serial: serialFromHex(entry.serialNumber),
      revocationDate: entry.revocationDate,
      reason: entry.reason === undefined ? undefined : REASON_NAMES.get(entry.reason),
    }));
    this.#bySerial = new Map(this.entries.map((entry) => [entry.serial, entry]));
  }

  /** @internal Parses DER; see {@link parseCrl} for the public entry point. */
  static fromDer(der: Buffer): RevocationList {
    try {
      return new RevocationList(der, new x509.X509Crl(der));
    } catch (cause) {
      throw new CrlParseError(
        `not a valid DER X.509 CRL (${der.length} bytes): ${describeCause(cause)}`,
        { cause },
      );
    }
  }

  /** True when the certificate with `serial` is revoked by this CRL. */
  isRevoked(serial: bigint): boolean {
    return this.#bySerial.has(serial);
  }

  /** The entry revoking `serial`, if any. */
  revocationOf(serial: bigint): RevocationEntry | undefined {
    return this.#bySerial.get(serial);
  }

  /** The CRL as PEM (`X509 CRL`, the label OpenSSL and Node's `crl:` option expect). */
  toPem(): string {
    return encodePem("X509 CRL", this.der);
  }

  /**
   * True when this CRL was issued by `ca`: its issuer is `ca`'s subject and
   * its signature verifies with `ca`'s key. A CRL that fails this says
   * nothing about `ca`'s certificates.
   */
  async isIssuedBy(ca: CertificateInput): Promise<boolean> {
    const authority = parseCertificate(ca);
    if (this.issuer !== authority.subject) return false;
    try {
      return await this.#peculiar.verify({
        publicKey: await importVerifyingKey(authority.publicKey),
      });
    } catch {
      return false;
    }
  }
}

/**
 * Parses an X.509 CRL from DER bytes or PEM text (`X509 CRL`). Throws
 * {@link CrlParseError} for anything else.
 */
export function parseCrl(input: CrlInput): RevocationList {
  if (input instanceof RevocationList) return input;
  let der: Buffer;
  try {
    if (typeof input === "string") der = decodePem(input, "X509 CRL");
    else if (input instanceof Uint8Array) {
      der = looksLikePem(input)
        ? decodePem(Buffer.from(input).toString("latin1"), "X509 CRL")
        : Buffer.from(input);
    } else throw new CrlParseError(`a CRL must be DER bytes or PEM text, got ${typeof input}`);
  } catch (cause) {
    if (cause instanceof InvalidPemError) {
      throw new CrlParseError(`not a PEM CRL: ${cause.message}`, { cause });
    }
    throw cause;
  }
  if (der.length === 0) throw new CrlParseError("CRL is empty (0 bytes)");
  return RevocationList.fromDer(der);
}

/** Inputs of {@link createCrl}. */
export interface CreateCrlOptions {
  /** The CRL number; must be higher than that of any CRL this CA issued before. */
  readonly crlNumber: bigint;
  /** Issue time; default now. */
  readonly thisUpdate?: Date;
}

/** Issues a CRL signed by `authority` that revokes `entries`. */
export async function createCrl(
  authority: SigningAuthority,
  entries: readonly RevocationEntry[],
  options: CreateCrlOptions,
): Promise<RevocationList> {
  assertCanSign(authority);
  if (!authority.certificate.keyUsage.includes("cRLSign")) {
    throw new NotACertificateAuthorityError(
      `CA ${authority.certificate.subject} may not sign CRLs (no cRLSign key usage)`,
    );
  }
  if (options.crlNumber < 0n) {
    throw new RangeError(`CRL number must not be negative, got ${options.crlNumber}`);
  }
  const caKey = await importVerifyingKey(authority.certificate.publicKey);
  const crl = await x509.X509CrlGenerator.create({
    issuer: new x509.X509Certificate(authority.certificate.der).subjectName,
    thisUpdate: options.thisUpdate ?? new Date(),
    nextUpdate: UNLIMITED_NOT_AFTER,
    signingAlgorithm: ED25519_ALGORITHM,
    signingKey: await importSigningKey(authority.privateKey),
    extensions: [
      // RFC 5280 5.2.1 and 5.2.3: CRLs must identify the CA key and be numbered.
      await x509.AuthorityKeyIdentifierExtension.create(caKey),
      new x509.Extension(CRL_NUMBER_OID, false, encodeDerInteger(options.crlNumber)),
    ],
    entries: entries.map((entry) => ({
      serialNumber: serialToHex(entry.serial),
      revocationDate: entry.revocationDate,
      reason: REASON_CODES[entry.reason ?? DEFAULT_REVOCATION_REASON],
    })),
  });
  return RevocationList.fromDer(Buffer.from(crl.rawData));
}

/**
 * A CRL with everything `previous` revokes plus `serial`, numbered one higher
 * and signed by `authority`, after checking that `previous` is `authority`'s
 * own CRL (else {@link UntrustedCrlError}). Returns `previous` itself when `serial` is
 * already revoked, so revoking twice changes nothing.
 */
export async function addRevocation(
  authority: SigningAuthority,
  previous: RevocationList,
  serial: bigint,
  reason: RevocationReason = DEFAULT_REVOCATION_REASON,
): Promise<RevocationList> {
  if (!(await previous.isIssuedBy(authority.certificate))) {
    throw new UntrustedCrlError(
      `cannot add a revocation to a CRL from ${previous.issuer}: it was not issued by CA ${authority.certificate.subject}`,
    );
  }
  if (previous.isRevoked(serial)) return previous;
  const now = new Date();
  return createCrl(authority, [...previous.entries, { serial, revocationDate: now, reason }], {
    crlNumber: (previous.crlNumber ?? 0n) + 1n,
    thisUpdate: now,
  });
}

// A CRL number is a small non-negative DER INTEGER; these two functions are
// the whole of the ASN.1 the extension needs.
function encodeDerInteger(value: bigint): Uint8Array {
  let hex = value.toString(16);
  if (hex.length % 2 === 1) hex = "0" + hex;
  if (parseInt(hex.slice(0, 2), 16) >= 0x80) hex = "00" + hex;
  const content = Buffer.from(hex, "hex");
  if (content.length > 20) throw new RangeError("CRL number is longer than 20 octets");
  return Buffer.concat([Buffer.from([0x02, content.length]), content]);
}

function decodeDerInteger(encoded: ArrayBuffer): bigint {
  const bytes = Buffer.from(encoded);
  if (bytes.length < 3 || bytes[0] !== 0x02 || bytes[1] !== bytes.length - 2) {
    throw new CrlParseError("CRL number extension is not a short DER INTEGER");
  }
  return BigInt("0x" + bytes.subarray(2).toString("hex"));
}
