/**
 * Turning a template and a subject key into a signed certificate, either by a
 * CA or self-signed. This is the only code that builds X.509 certificates, so
 * serials, validity and extensions are decided in one place:
 *
 * - serial: random, in [1, 2^127) (see serial.ts);
 * - notBefore: now minus {@link NOT_BEFORE_BACKDATE_MS}, so a node whose clock
 *   is somewhat behind the issuer's accepts a certificate issued a moment ago;
 * - notAfter: {@link UNLIMITED_NOT_AFTER} (9999-12-31T23:59:59Z, RFC 5280's
 *   "no well-defined expiration"), for the CA and leaves alike, as in Monogon:
 *   node and user certificates live as long as the cluster membership they
 *   attest, and end by revocation (the CA's CRL), not by expiry;
 * - extensions: basicConstraints and keyUsage (critical), extendedKeyUsage,
 *   subjectAltName, and subject/authority key identifiers for chain building;
 * - subject: CN, and for a scoped credential its role as OU (access-role.ts).
 */
import { isRoleName } from "./access-role";
import {
  resolveSubject,
  ephemeralTemplate,
  type CertificateTemplate,
  type KeyUsageName,
} from "./certificate-templates";
import {
  assertPrivateKey,
  assertPublicKey,
  importSigningKey,
  importVerifyingKey,
  publicKeyFromPrivateKey,
} from "./ed25519";
import {
  InvalidTemplateError,
  KeyMismatchError,
  NotACertificateAuthorityError,
  PkiError,
} from "./errors";
import { ParsedCertificate } from "./parse-certificate";
import { randomSerial, SERIAL_LIMIT, serialToHex } from "./serial";
import { ED25519_ALGORITHM, x509 } from "./x509-provider";

/** notAfter of every certificate the PKI issues: RFC 5280's "no well-defined expiration". */
export const UNLIMITED_NOT_AFTER = new Date("9999-12-31T23:59:59Z");

/** How far notBefore is set in the past, to tolerate clock skew between nodes (1 hour). */
export const NOT_BEFORE_BACKDATE_MS = 60 * 60 * 1000;

/** A CA certificate together with its private key: what it takes to sign. */
export interface SigningAuthority {
  /** The CA's certificate. */
  readonly certificate: ParsedCertificate;
  /** The CA's 32-byte Ed25519 private key seed. */
  readonly privateKey: Uint8Array;
}

/** Overrides for one issuance; the defaults are the policy described above. */
export interface IssueOptions {
  /** Start of validity; default now minus {@link NOT_BEFORE_BACKDATE_MS}. */
  readonly notBefore?: Date;
  /** End of validity; default {@link UNLIMITED_NOT_AFTER}. */
  readonly notAfter?: Date;
  /** Serial number in [1, 2^127); default random. */
  readonly serial?: bigint;
}

const KEY_USAGE_BITS: Readonly<Record<KeyUsageName, number>> = {
  digitalSignature: x509.KeyUsageFlags.digitalSignature,
  keyCertSign: x509.KeyUsageFlags.keyCertSign,
  cRLSign: x509.KeyUsageFlags.cRLSign,
};

const EXTENDED_KEY_USAGE_OIDS = {
  serverAuth: x509.ExtendedKeyUsage.serverAuth,
  clientAuth: x509.ExtendedKeyUsage.clientAuth,
} as const;

/**
 * Issues a certificate of `template` for `subjectPublicKey`, signed by
 * `issuer`. Refuses CA templates (Metropolis has one CA level) and issuers
 * that are not CAs or whose key does not match their certificate.
 */
export async function issueCertificate(
  template: CertificateTemplate,
  subjectPublicKey: Uint8Array,
  issuer: SigningAuthority,
  options: IssueOptions = {},
): Promise<ParsedCertificate> {
  assertPublicKey(subjectPublicKey, "subject public key");
  if (template.isCA) {
    throw new InvalidTemplateError(
      "a CA certificate can only be self-signed: Metropolis has a single CA level",
    );
  }
  assertCanSign(issuer);
  return sign(template, subjectPublicKey, issuer.certificate, issuer.privateKey, options);
}

/**
 * Issues a certificate of `template` for the key pair of `privateKey`, signed
 * by that same key: the cluster CA, and the ephemeral certificates of nodes
 * that are not registered yet.
 */
export async function selfSignCertificate(
  template: CertificateTemplate,
  privateKey: Uint8Array,
  options: IssueOptions = {},
): Promise<ParsedCertificate> {
  assertPrivateKey(privateKey);
  return sign(template, publicKeyFromPrivateKey(privateKey), undefined, privateKey, options);
}

/**
 * The self-signed certificate a node that is not registered yet presents to
 * the cluster, made from the node's own Ed25519 identity key (see
 * {@link ephemeralTemplate}).
 */
export function createEphemeralCertificate(
  privateKey: Uint8Array,
  options: IssueOptions = {},
): Promise<ParsedCertificate> {
  return selfSignCertificate(ephemeralTemplate(), privateKey, options);
}

/**
 * Throws unless `authority` can sign certificates: its certificate is a CA
 * with keyCertSign, and its private key belongs to that certificate.
 */
export function assertCanSign(authority: SigningAuthority): void {
  const { certificate, privateKey } = authority;
  if (!certificate.isCA || !certificate.keyUsage.includes("keyCertSign")) {
    throw new NotACertificateAuthorityError(
      `certificate ${certificate.subject} is not a CA (needs basicConstraints CA and keyCertSign)`,
    );
  }
  assertPrivateKey(privateKey, "CA private key");
  if (!publicKeyFromPrivateKey(privateKey).equals(certificate.publicKey)) {
    throw new KeyMismatchError(
      `the private key given for CA ${certificate.subject} does not belong to its certificate`,
    );
  }
}

async function sign(
  template: CertificateTemplate,
  subjectPublicKey: Uint8Array,
  issuerCertificate: ParsedCertificate | undefined,
  signingPrivateKey: Uint8Array,
  options: IssueOptions,
): Promise<ParsedCertificate> {
  const serial = options.serial ?? randomSerial();
  if (serial <= 0n || serial >= SERIAL_LIMIT) {
    throw new InvalidTemplateError(`serial must be in [1, 2^127), got ${serial}`);
  }
  const notBefore = wholeSeconds(
    options.notBefore ?? new Date(Date.now() - NOT_BEFORE_BACKDATE_MS),
  );
  const notAfter = wholeSeconds(options.notAfter ?? UNLIMITED_NOT_AFTER);
  if (notAfter.getTime() <= notBefore.getTime()) {
    throw new InvalidTemplateError(
      `notAfter ${notAfter.toISOString()} is not after notBefore ${notBefore.toISOString()}`,
    );
  }

  const subject = resolveSubject(template, subjectPublicKey);
  const subjectKey = await importVerifyingKey(subjectPublicKey);
  // The authority key identifier must equal the issuer's subject key
  // identifier; both are derived from the issuer's public key the same way.
  const authorityKey = issuerCertificate
    ? await importVerifyingKey(issuerCertificate.publicKey)
    : subjectKey;
  const role = template.accessRole;
  if (role !== undefined && !isRoleName(role)) {
    throw new InvalidTemplateError(`access role ${JSON.stringify(role)} is not a role name`);
  }
  const subjectName = new x509.Name([
    { CN: [subject.commonName] },
    ...(role === undefined ? [] : [{ OU: [role] }]),
  ]);
  // Re-use the issuer's encoded subject name verbatim: chain building compares
  // names, and a re-encoding could differ in string types.
  const issuerName = issuerCertificate
    ? new x509.X509Certificate(issuerCertificate.der).subjectName
    : subjectName;

  const extensions: x509.Extension[] = [
    new x509.BasicConstraintsExtension(template.isCA, template.isCA ? 0 : undefined, true),
    new x509.KeyUsagesExtension(
      template.keyUsage.reduce((bits, usage) => bits | KEY_USAGE_BITS[usage], 0),
      true,
    ),
    await x509.SubjectKeyIdentifierExtension.create(subjectKey),
    await x509.AuthorityKeyIdentifierExtension.create(authorityKey),
  ];
  if (template.extendedKeyUsage.length > 0) {
    extensions.push(
      new x509.ExtendedKeyUsageExtension(
        template.extendedKeyUsage.map((usage) => EXTENDED_KEY_USAGE_OIDS[usage]),
        false,
      ),
    );
  }
  const altNames = [
    ...subject.dnsNames.map((value) => ({ type: "dns" as const, value })),
    ...subject.ipAddresses.map((value) => ({ type: "ip" as const, value })),
  ];
  if (altNames.length > 0) {
    extensions.push(new x509.SubjectAlternativeNameExtension(altNames, false));
  }

  let created: x509.X509Certificate;
  try {
    created = await x509.X509CertificateGenerator.create({
      serialNumber: serialToHex(serial),
      subject: subjectName,
      issuer: issuerName,
      notBefore,
      notAfter,
      publicKey: subjectKey,
      signingKey: await importSigningKey(signingPrivateKey),
      signingAlgorithm: ED25519_ALGORITHM,
      extensions,
    });
  } catch (cause) {
    throw new PkiError(`could not sign ${template.kind} certificate ${subject.commonName}`, {
      cause,
    });
  }
  return ParsedCertificate.fromDer(Buffer.from(created.rawData));
}

function wholeSeconds(date: Date): Date {
  // X.509 times have second precision; truncating here keeps a certificate's
  // parsed dates equal to the ones it was issued with.
  return new Date(Math.floor(date.getTime() / 1000) * 1000);
}
