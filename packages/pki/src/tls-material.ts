/**
 * The PEM triple TLS consumers are configured with. grpc-js
 * (`credentials.createSsl(ca, key, cert)`), Node's `tls` and etcd's
 * `--cert-file/--key-file/--trusted-ca-file` all want a PEM certificate, a
 * PKCS#8 PEM private key and the PEM CA certificate; this is the one place
 * that converts the store's DER certificate and raw key seed into that.
 */
import { privateKeyToPem, publicKeyFromPrivateKey } from "./ed25519";
import { KeyMismatchError, MissingPrivateKeyError } from "./errors";
import { parseCertificate, type CertificateInput } from "./parse-certificate";

/** PEM certificate, PKCS#8 PEM private key and PEM CA certificate. */
export interface TlsMaterial {
  /** The certificate (`CERTIFICATE`). */
  readonly cert: string;
  /** Its private key (`PRIVATE KEY`, PKCS#8). */
  readonly key: string;
  /** The CA certificate peers are verified against (`CERTIFICATE`). */
  readonly ca: string;
}

/** A certificate with its private key and issuing CA — e.g. what `Certificate.ensure()` returns. */
export interface CertificateWithKey {
  /** The certificate. */
  readonly certificate: CertificateInput;
  /** Its 32-byte private key seed; null when the key is held elsewhere. */
  readonly privateKey: Uint8Array | null;
  /** The CA that issued it (the certificate itself when self-signed). */
  readonly ca: CertificateInput;
}

/**
 * PEM TLS material for a certificate and its key. Throws
 * {@link MissingPrivateKeyError} when the private key is not held here (an
 * external certificate) and {@link KeyMismatchError} when the key does not
 * belong to the certificate — which TLS libraries would otherwise report as
 * an obscure handshake failure.
 */
export function tlsMaterial(issued: CertificateWithKey): TlsMaterial {
  const certificate = parseCertificate(issued.certificate);
  const ca = parseCertificate(issued.ca);
  if (issued.privateKey === null) {
    throw new MissingPrivateKeyError(
      `no private key is held for certificate ${certificate.subject}: it was issued for an external key`,
    );
  }
  if (!publicKeyFromPrivateKey(issued.privateKey).equals(certificate.publicKey)) {
    throw new KeyMismatchError(
      `the private key given does not belong to certificate ${certificate.subject}`,
    );
  }
  return { cert: certificate.toPem(), key: privateKeyToPem(issued.privateKey), ca: ca.toPem() };
}
