/**
 * The errors the PKI rejects with. They are classes so that callers can react
 * by `instanceof` — retry a lost issuance race, refuse a revoked peer, report
 * corrupted cluster state — instead of parsing messages. Every message names
 * what was wrong and, where there is one, the certificate or etcd key it was
 * wrong in.
 */

/**
 * Base class of every PKI error, for callers that only need "the PKI refused".
 * Not abstract: the PKI throws it itself for failures no subclass names
 * (a signing that failed, a certificate without an external public key).
 */
export class PkiError extends Error {
  constructor(message: string, options?: { cause?: unknown }) {
    super(message, options);
    // Set once, here, from the class actually constructed: every subclass
    // shows its own name in stack traces and logs, and can be told apart by
    // `name` where `instanceof` does not work (another realm, a second copy of
    // the package). No subclass sets `name` itself.
    this.name = new.target.name;
  }
}

/**
 * Key material is malformed: a public key or private key seed of the wrong
 * length, or bytes that are not a key at all.
 */
export class InvalidKeyError extends PkiError {}

/**
 * A key, or the key in a certificate, is a valid key of another algorithm
 * (RSA, ECDSA, X25519, ...). Metropolis identities are Ed25519 only.
 */
export class WrongKeyTypeError extends InvalidKeyError {
  constructor(
    /** What the key was used for, e.g. "certificate public key". */
    readonly what: string,
    /** The key type that was found (Node's `asymmetricKeyType`, e.g. "rsa"). */
    readonly actualType: string,
  ) {
    super(`${what} is of key type ${actualType}, but Metropolis only uses Ed25519 keys`);
  }
}

/** Text that should be PEM is not, or holds a block of another type. */
export class InvalidPemError extends PkiError {}

/** Bytes or text that should be an X.509 certificate cannot be parsed as one. */
export class CertificateParseError extends PkiError {}

/** Bytes or text that should be an X.509 CRL cannot be parsed as one. */
export class CrlParseError extends PkiError {}

/**
 * A certificate template or its inputs are invalid: an empty or overlong
 * common name, a malformed DNS name or IP address, or a template that cannot
 * be issued the way it was asked for (a CA signed by another CA).
 */
export class InvalidTemplateError extends PkiError {}

/** A certificate name or store prefix cannot be used as part of an etcd key. */
export class InvalidNameError extends PkiError {}

/**
 * A certificate was used as a CA but is not one (no basicConstraints CA flag
 * or no keyCertSign usage), or a CA was needed but no private key is held.
 */
export class NotACertificateAuthorityError extends PkiError {}

/** A private key does not belong to the certificate it is paired with. */
export class KeyMismatchError extends PkiError {}

/** TLS material was asked for a certificate whose private key is not held here. */
export class MissingPrivateKeyError extends PkiError {}

/**
 * A certificate does not carry a node identity: its common name is not a
 * node ID, or not the node ID of the certificate's own public key.
 */
export class NodeIdentityError extends PkiError {}

/** Base class of the reasons a certificate fails verification against a CA. */
export class CertificateVerificationError extends PkiError {}

/** The certificate was not issued by the given CA (issuer name or signature do not match). */
export class UntrustedCertificateError extends CertificateVerificationError {}

/** The certificate's notAfter is in the past at the time of verification. */
export class CertificateExpiredError extends CertificateVerificationError {}

/** The certificate's notBefore is in the future at the time of verification. */
export class CertificateNotYetValidError extends CertificateVerificationError {}

/** The certificate's serial number is listed in the CA's CRL. */
export class CertificateRevokedError extends CertificateVerificationError {
  constructor(
    /** Serial number of the revoked certificate. */
    readonly serial: bigint,
    /** When the CA revoked it. */
    readonly revocationDate: Date,
  ) {
    super(
      `certificate with serial ${serial.toString(16)} was revoked at ${revocationDate.toISOString()}`,
    );
  }
}

/** A CRL was not issued by the given CA, so it cannot be trusted to say what is revoked. */
export class UntrustedCrlError extends CertificateVerificationError {}

/**
 * Another writer changed the same etcd keys between our read and our write.
 * Nothing was written by us; the operation is safe to retry, and the retry
 * sees the other writer's result.
 */
export class ConcurrentWriteError extends PkiError {
  /** Always true: the point of this class is that the caller may simply retry. */
  readonly retryable = true;
}

/**
 * Two issuers (typically curators on different nodes) issued the same named
 * certificate at once and the other one's transaction committed first. A retry
 * of `ensure()` loads and returns the winner's certificate.
 */
export class ConcurrentIssuanceError extends ConcurrentWriteError {
  constructor(
    /** The certificate name that was raced for. */
    readonly certificateName: string,
    /** The etcd keys that were found already created. */
    readonly keys: readonly string[],
  ) {
    super(
      `certificate ${JSON.stringify(certificateName)} was issued concurrently by another writer ` +
        `(${keys.join(", ")} created first); retry to load the winner's certificate`,
    );
  }
}

/** The CRL kept changing under a revocation, more times than the revocation retries. */
export class ConcurrentRevocationError extends ConcurrentWriteError {}

/**
 * What etcd holds for a certificate is inconsistent: only one of certificate
 * and private key exists, a stored value does not parse, or the stored key
 * does not belong to the stored certificate. Retrying does not help; the
 * cluster's PKI state needs repair.
 */
export class CorruptedStoreError extends PkiError {}

/**
 * A stored certificate exists under the requested name but was issued for
 * another public key than the one the caller supplied for it.
 */
export class CertificateConflictError extends PkiError {}

/** Wraps a thrown value's message, for errors that add context to a lower-level failure. */
export function describeCause(cause: unknown): string {
  return cause instanceof Error ? cause.message : String(cause);
}
