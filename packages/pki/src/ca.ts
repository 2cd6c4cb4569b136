/**
 * A certificate authority held in memory: its certificate and private key,
 * and the operations that need both. The curator gets one from the store
 * (`CaCertificate.authority(kv)`) to issue node certificates; consensus
 * creates its own for etcd peer mTLS; tests create throwaway ones.
 */
import {
  caTemplate,
  nodeTemplate,
  userTemplate,
  type CertificateTemplate,
  type NodeTemplateOptions,
} from "./certificate-templates";
import {
  addRevocation,
  createCrl,
  DEFAULT_REVOCATION_REASON,
  type RevocationEntry,
  type RevocationList,
  type RevocationReason,
} from "./crl";
import { assertPrivateKey, generateKeyPair } from "./ed25519";
import {
  assertCanSign,
  issueCertificate,
  selfSignCertificate,
  type IssueOptions,
  type SigningAuthority,
} from "./issuance";
import {
  parseCertificate,
  type CertificateInput,
  type ParsedCertificate,
} from "./parse-certificate";

/** Inputs of {@link CertificateAuthority.create}. */
export interface CreateAuthorityOptions extends IssueOptions {
  /** The CA's common name; default "Metropolis Cluster CA". */
  readonly commonName?: string;
  /** The CA's private key seed; default a fresh key. */
  readonly privateKey?: Uint8Array;
}

/** A CA certificate with its private key, able to issue certificates and CRLs. */
export class CertificateAuthority implements SigningAuthority {
  private constructor(
    /** The self-signed CA certificate; its PEM is the `ca` every TLS peer trusts. */
    readonly certificate: ParsedCertificate,
    /** The CA's 32-byte private key seed. */
    readonly privateKey: Buffer,
  ) {}

  /** Creates a new self-signed CA (see {@link caTemplate}). */
  static async create(options: CreateAuthorityOptions = {}): Promise<CertificateAuthority> {
    const privateKey = Buffer.from(options.privateKey ?? generateKeyPair().privateKey);
    assertPrivateKey(privateKey, "CA private key");
    const certificate = await selfSignCertificate(
      caTemplate(options.commonName),
      privateKey,
      options,
    );
    return new CertificateAuthority(certificate, privateKey);
  }

  /**
   * Wraps an existing CA certificate and its private key. Throws
   * {@link NotACertificateAuthorityError} when the certificate is not a CA
   * and {@link KeyMismatchError} when the key is not the certificate's.
   */
  static load(certificate: CertificateInput, privateKey: Uint8Array): CertificateAuthority {
    const authority = { certificate: parseCertificate(certificate), privateKey };
    assertCanSign(authority);
    return new CertificateAuthority(authority.certificate, Buffer.from(privateKey));
  }

  /** Issues a certificate of `template` for `subjectPublicKey`. */
  issue(
    template: CertificateTemplate,
    subjectPublicKey: Uint8Array,
    options: IssueOptions = {},
  ): Promise<ParsedCertificate> {
    return issueCertificate(template, subjectPublicKey, this, options);
  }

  /** Issues a node certificate (CN and DNS SAN = node ID, server and client auth). */
  issueNodeCertificate(
    nodePublicKey: Uint8Array,
    options: NodeTemplateOptions & IssueOptions = {},
  ): Promise<ParsedCertificate> {
    return this.issue(nodeTemplate(options), nodePublicKey, options);
  }

  /** Issues a client-only user certificate with CN = `owner`. */
  issueUserCertificate(
    owner: string,
    userPublicKey: Uint8Array,
    options: IssueOptions = {},
  ): Promise<ParsedCertificate> {
    return this.issue(userTemplate(owner), userPublicKey, options);
  }

  /** Issues a CRL revoking `entries` (none by default) with the given CRL number. */
  createCrl(entries: readonly RevocationEntry[] = [], crlNumber = 1n): Promise<RevocationList> {
    return createCrl(this, entries, { crlNumber });
  }

  /**
   * Re-issues `crl` with `serial` added (or returns it unchanged if `serial`
   * is already revoked). `crl` must be this CA's current CRL.
   */
  revoke(
    crl: RevocationList,
    serial: bigint,
    reason: RevocationReason = DEFAULT_REVOCATION_REASON,
  ): Promise<RevocationList> {
    return addRevocation(this, crl, serial, reason);
  }
}
