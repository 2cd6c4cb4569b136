/**
 * Deciding whether to trust a certificate: issued by our CA, valid now, not
 * revoked. TLS does the same during the handshake; this is for the places
 * that see a certificate outside one — a certificate loaded from etcd, a peer
 * certificate handed up by grpc-js, a certificate presented at registration —
 * and that want a typed reason when the answer is no.
 */
import { parseCrl, type CrlInput } from "./crl";
import {
  CertificateExpiredError,
  CertificateNotYetValidError,
  CertificateRevokedError,
  NotACertificateAuthorityError,
  UntrustedCertificateError,
  UntrustedCrlError,
} from "./errors";
import {
  parseCertificate,
  type CertificateInput,
  type ParsedCertificate,
} from "./parse-certificate";

/** Options of {@link verifyCertificate}. */
export interface VerifyOptions {
  /** The CA's CRL; when given, a revoked certificate is rejected. */
  readonly crl?: CrlInput;
  /** The time validity is checked at; default now. */
  readonly at?: Date;
}

/**
 * Verifies that `certificate` was issued by `ca`, is within its validity
 * period and (with `options.crl`) is not revoked, and returns it parsed.
 * Throws a {@link CertificateVerificationError} subclass saying which check
 * failed: {@link UntrustedCertificateError}, {@link CertificateExpiredError},
 * {@link CertificateNotYetValidError}, {@link UntrustedCrlError} (the CRL is
 * not `ca`'s) or {@link CertificateRevokedError}. Parse errors of either
 * input propagate as they are.
 */
export async function verifyCertificate(
  certificate: CertificateInput,
  ca: CertificateInput,
  options: VerifyOptions = {},
): Promise<ParsedCertificate> {
  const leaf = parseCertificate(certificate);
  const authority = parseCertificate(ca);
  if (!authority.isCA || !authority.keyUsage.includes("keyCertSign")) {
    throw new NotACertificateAuthorityError(
      `certificate ${authority.subject} cannot be used to verify others: it is not a CA`,
    );
  }
  if (!leaf.chainsTo(authority)) {
    throw new UntrustedCertificateError(
      `certificate ${leaf.subject} (serial ${leaf.serial.toString(16)}, issuer ${leaf.issuer}) ` +
        `is not signed by CA ${authority.subject}`,
    );
  }

  const at = options.at ?? new Date();
  if (at.getTime() < leaf.notBefore.getTime()) {
    throw new CertificateNotYetValidError(
      `certificate ${leaf.subject} is not valid before ${leaf.notBefore.toISOString()} ` +
        `(checked at ${at.toISOString()})`,
    );
  }
  if (at.getTime() > leaf.notAfter.getTime()) {
    throw new CertificateExpiredError(
      `certificate ${leaf.subject} expired at ${leaf.notAfter.toISOString()} ` +
        `(checked at ${at.toISOString()})`,
    );
  }

  if (options.crl !== undefined) {
    const crl = parseCrl(options.crl);
    if (!(await crl.isIssuedBy(authority))) {
      throw new UntrustedCrlError(
        `the CRL given (issuer ${crl.issuer}) is not signed by CA ${authority.subject}`,
      );
    }
    const revocation = crl.revocationOf(leaf.serial);
    if (revocation !== undefined) {
      throw new CertificateRevokedError(leaf.serial, revocation.revocationDate);
    }
  }
  return leaf;
}
