/**
 * @metropolis/pki — the X.509 public key infrastructure of a Metropolis
 * cluster: Ed25519 keys and node IDs, certificates and CRLs, and their
 * storage in etcd.
 *
 * What it guarantees:
 * - Ed25519 only. Keys are raw bytes (32-byte public key, 32-byte private
 *   seed); anything else — another algorithm, a wrong length, garbage DER or
 *   PEM — is rejected with a typed error naming the problem.
 * - A node certificate always names the node that holds its key: CN and DNS
 *   SAN are derived from the subject key (`metropolis-` + hex of its first 16
 *   bytes), never passed in.
 * - Certificates do not expire (notAfter 9999-12-31, as in Monogon); they end
 *   by revocation through the CA's CRL, which every verifier here checks.
 *   The exception: scoped credentials (`accessTemplate`), issued with the
 *   notAfter their owner asked for and bearing their role in their subject's OU
 *   (access-role.ts).
 * - A private key is never stored in etcd as is: the store seals it with the
 *   `SecretSealer` it is made with (consensus' cluster secrets keyring).
 * - Issuing never overwrites: certificate and key are created in one
 *   compare-and-swap guarded by "neither exists yet" (etcd: create_revision
 *   == 0), so of two concurrent issuers exactly one wins and the other gets
 *   a retryable `ConcurrentIssuanceError`; `ensure()` is idempotent.
 * - pki does not know etcd: the store works on the `CertificateKv` port;
 *   @metropolis/consensus adapts etcd to it, `@metropolis/pki/testing` has
 *   an in-memory one for tests.
 *
 * How it fits: the curator keeps the cluster CA ("Metropolis Cluster CA") in
 * its etcd namespace and issues node certificates from it for the nodes'
 * own identity keys; nodes not yet registered present an ephemeral
 * self-signed certificate made from that same key; consensus runs its own CA
 * for etcd peer mTLS; metroctl holds a client-only owner certificate.
 * `tlsMaterial()` turns any of them into the PEM triple grpc-js, Node TLS and
 * etcd are configured with.
 */
export { isRoleName, MAX_ACCESS_ROLE_LENGTH, readAccessRole } from "./access-role";
export { CertificateAuthority } from "./ca";
export type { CreateAuthorityOptions } from "./ca";
export type { CertificateKv, KvPut, SomeKeys, StoredValue } from "./certificate-kv";
export { CertificateStore } from "./certificate-store";
export type { CaOptions } from "./certificate-store";
export type { CertificateKeys } from "./store-layout";
export { CaCertificate, Certificate } from "./stored-certificate";
export type { CertificateSpec, IssuedCertificate, Issuer, SubjectKey } from "./stored-certificate";
export {
  accessTemplate,
  caTemplate,
  CLUSTER_CA_COMMON_NAME,
  ephemeralTemplate,
  nodeTemplate,
  resolveSubject,
  userTemplate,
} from "./certificate-templates";
export type {
  CertificateKind,
  CertificateTemplate,
  ExtendedKeyUsageName,
  KeyUsageName,
  NodeTemplateOptions,
  ResolvedSubject,
  TemplateSubject,
} from "./certificate-templates";
export {
  addRevocation,
  createCrl,
  DEFAULT_REVOCATION_REASON,
  parseCrl,
  RevocationList,
} from "./crl";
export type { CreateCrlOptions, CrlInput, RevocationEntry, RevocationReason } from "./crl";
export {
  ED25519_PUBLIC_KEY_LENGTH,
  ED25519_SEED_LENGTH,
  generateDerKeyPair,
  generateKeyPair,
  isNodeId,
  NODE_ID_PREFIX,
  nodeIdFromPublicKey,
  privateKeyFromPkcs8,
  privateKeyToPem,
  privateKeyToPkcs8,
  publicKeyFromPrivateKey,
  publicKeyFromSpki,
  publicKeyToPem,
  publicKeyToSpki,
} from "./ed25519";
export type { DerKeyPair, Ed25519KeyPair } from "./ed25519";
export {
  CertificateConflictError,
  CertificateExpiredError,
  CertificateNotYetValidError,
  CertificateParseError,
  CertificateRevokedError,
  CertificateVerificationError,
  ConcurrentIssuanceError,
  ConcurrentRevocationError,
  ConcurrentWriteError,
  CorruptedStoreError,
  CrlParseError,
  InvalidKeyError,
  InvalidNameError,
  InvalidPemError,
  InvalidTemplateError,
  KeyMismatchError,
  MissingPrivateKeyError,
  NodeIdentityError,
  NotACertificateAuthorityError,
  PkiError,
  UntrustedCertificateError,
  UntrustedCrlError,
  WrongKeyTypeError,
} from "./errors";
export {
  createEphemeralCertificate,
  issueCertificate,
  NOT_BEFORE_BACKDATE_MS,
  selfSignCertificate,
  UNLIMITED_NOT_AFTER,
} from "./issuance";
export type { IssueOptions, SigningAuthority } from "./issuance";
export { nodeIdFromCertificate, parseCertificate, ParsedCertificate } from "./parse-certificate";
export type { CertificateInput } from "./parse-certificate";
export { decodePem, encodePem } from "./pem";
export { certificatePemCodec, privateKeyPemCodec } from "./pem-file-codecs";
export type { PemFileCodec } from "./pem-file-codecs";
export type { PemLabel } from "./pem";
export { randomSerial, SERIAL_LIMIT } from "./serial";
export type { SecretSealer } from "./secret-sealer";
export { tlsMaterial } from "./tls-material";
export type { CertificateWithKey, TlsMaterial } from "./tls-material";
export { verifyCertificate } from "./verify";
export type { VerifyOptions } from "./verify";
