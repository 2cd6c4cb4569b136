/**
 * A named certificate in a {@link CertificateStore}: a promise that it
 * exists. `ensure(kv)` loads it, or issues it and writes certificate and
 * key in one compare-and-swap (store-layout.ts); `adopt(kv, …)` stores one
 * issued elsewhere; `load(kv)` only reads. A {@link CaCertificate} is one
 * that is a self-signed CA and keeps a CRL (stored-crl.ts).
 *
 * What it guarantees:
 * - issuing never overwrites: of two nodes issuing the same certificate at
 *   once one commits, the other writes nothing and fails with the retryable
 *   {@link ConcurrentIssuanceError}, and its retry loads the winner's;
 * - a private key never reaches the kv as is: it is sealed with the store's
 *   `SecretSealer` at its key before writing, and opened on load;
 * - what is loaded is checked before it is returned — certificate and key
 *   both there (only the certificate for an external key), parseable, the
 *   key belonging to the certificate, the certificate signed by its issuer
 *   and of the kind asked for — and anything else is a
 *   {@link CorruptedStoreError} or {@link CertificateConflictError} naming
 *   the key; loading never creates anything.
 */
import { CertificateAuthority } from "./ca";
import type { CertificateKv, KvPut } from "./certificate-kv";
import type { CertificateStore } from "./certificate-store";
import type { CertificateTemplate } from "./certificate-templates";
import type { RevocationList, RevocationReason } from "./crl";
import {
  assertPrivateKey,
  assertPublicKey,
  ED25519_SEED_LENGTH,
  generateKeyPair,
  publicKeyFromPrivateKey,
} from "./ed25519";
import {
  CertificateConflictError,
  CorruptedStoreError,
  describeCause,
  InvalidTemplateError,
  KeyMismatchError,
  NotACertificateAuthorityError,
  PkiError,
  UntrustedCertificateError,
} from "./errors";
import {
  assertCanSign,
  issueCertificate,
  selfSignCertificate,
  type SigningAuthority,
} from "./issuance";
import {
  parseCertificate,
  type CertificateInput,
  type ParsedCertificate,
} from "./parse-certificate";
import { createPair, readPair, type CertificateKeys } from "./store-layout";
import { firstCrl, readCrl, revoke, type StoredCa } from "./stored-crl";
import type { CertificateWithKey } from "./tls-material";

/**
 * Who signs a certificate: a CA kept in the store (created on demand), a CA
 * held in memory, or the certificate's own key.
 */
export type Issuer = CaCertificate | SigningAuthority | "self-signed";

/**
 * The subject key of a stored certificate:
 * - absent: generate a fresh key pair when issuing; the store keeps the key;
 * - `{ privateKey }`: use this key pair if this call issues the certificate;
 *   the store keeps the key. If the certificate already exists, the stored
 *   certificate and key win — the given key is only a candidate;
 * - `{ publicKey }`: an external key (a node's identity, whose private key
 *   never leaves the node); only the certificate is stored, and an existing
 *   certificate for another key is a {@link CertificateConflictError}.
 */
export type SubjectKey = { readonly privateKey: Uint8Array } | { readonly publicKey: Uint8Array };

/** What a stored certificate is. */
export interface CertificateSpec {
  /** Who signs it. */
  readonly issuer: Issuer;
  /** Its shape (see certificate-templates.ts). CA templates go through {@link CertificateStore.ca}. */
  readonly template: CertificateTemplate;
  /** Its subject key; default a fresh, stored key pair. */
  readonly key?: SubjectKey;
}

/** A certificate as `ensure()` or `load()` returns it. */
export interface IssuedCertificate extends CertificateWithKey {
  /** The certificate's name in the store. */
  readonly name: string;
  /** The certificate. */
  readonly certificate: ParsedCertificate;
  /** Its private key seed, or null for an external certificate. */
  readonly privateKey: Buffer | null;
  /** The issuing CA's certificate (the certificate itself when self-signed). */
  readonly ca: ParsedCertificate;
  /** True when this call issued the certificate, false when it was loaded. */
  readonly created: boolean;
}

/** A named certificate in a {@link CertificateStore}: exists once `ensure()` returned. */
export class Certificate {
  /** The storage keys this certificate lives at. */
  readonly keys: CertificateKeys;

  /** @internal Use {@link CertificateStore.certificate} or {@link CertificateStore.ca}. */
  constructor(
    /** The store this certificate is kept in. */
    readonly store: CertificateStore,
    /** The certificate's name. */
    readonly name: string,
    /** What the certificate is. */
    readonly spec: CertificateSpec,
  ) {
    this.keys = store.keysOf(name);
    const key = spec.key;
    if (key !== undefined && "privateKey" in key) assertPrivateKey(key.privateKey);
    if (key !== undefined && "publicKey" in key) {
      assertPublicKey(key.publicKey);
      if (spec.issuer === "self-signed") {
        throw new InvalidTemplateError(
          `certificate ${JSON.stringify(name)} is self-signed, so it needs its private key, not only the public key`,
        );
      }
    }
  }

  /** True when only the certificate, not its private key, is stored. */
  get isExternal(): boolean {
    return this.spec.key !== undefined && "publicKey" in this.spec.key;
  }

  /**
   * Returns the certificate, issuing and storing it first if it does not
   * exist yet (creating a store-kept issuing CA too, if needed). Idempotent:
   * once issued, every call on every node returns the same certificate.
   *
   * Throws {@link ConcurrentIssuanceError} when another writer issued it
   * between our read and our write (retry: the retry returns theirs),
   * {@link CorruptedStoreError} when the kv holds an inconsistent state, and
   * {@link CertificateConflictError} when an external certificate exists for
   * another key.
   */
  async ensure(kv: CertificateKv): Promise<IssuedCertificate> {
    const existing = await this.load(kv);
    if (existing !== null) return existing;

    const authority = await this.resolveIssuer(kv, true);
    const privateKey = this.candidatePrivateKey();
    let certificate: ParsedCertificate;
    if (authority !== undefined) {
      const publicKey = privateKey ? publicKeyFromPrivateKey(privateKey) : this.externalPublicKey();
      certificate = await issueCertificate(this.spec.template, publicKey, authority);
    } else if (privateKey !== null) {
      certificate = await selfSignCertificate(this.spec.template, privateKey);
    } else {
      // The constructor refuses a self-signed certificate for an external key.
      throw new InvalidTemplateError(
        `certificate ${JSON.stringify(this.name)} is self-signed but has no private key`,
      );
    }

    await this.commitNew(kv, certificate, privateKey);
    return {
      name: this.name,
      certificate,
      privateKey,
      ca: authority?.certificate ?? certificate,
      created: true,
    };
  }

  /**
   * Stores a certificate that was issued elsewhere under this name — e.g. the
   * etcd peer CA, which consensus must create before etcd runs. Checks it
   * like `load()` does (key belongs to the certificate, signed by the
   * issuer, matches the spec) and writes it like `ensure()` does, with the
   * same "not created yet" guard. Idempotent: adopting what is already
   * stored returns it with `created: false`; a different certificate already
   * stored under the name is a {@link CertificateConflictError}.
   */
  async adopt(
    kv: CertificateKv,
    issued: { readonly certificate: CertificateInput; readonly privateKey: Uint8Array | null },
  ): Promise<IssuedCertificate> {
    const certificate = parseCertificate(issued.certificate);
    const privateKey = issued.privateKey === null ? null : Buffer.from(issued.privateKey);
    if (this.isExternal !== (privateKey === null)) {
      throw new InvalidTemplateError(
        this.isExternal
          ? `certificate ${JSON.stringify(this.name)} is external: adopt it without its private key`
          : `certificate ${JSON.stringify(this.name)} keeps its private key in the store: adopt it with the key`,
      );
    }
    if (privateKey !== null) {
      assertPrivateKey(privateKey);
      if (!publicKeyFromPrivateKey(privateKey).equals(certificate.publicKey)) {
        throw new KeyMismatchError(
          `the private key given does not belong to certificate ${certificate.subject}`,
        );
      }
    }
    this.checkMatchesSpec(certificate);

    const existing = await this.load(kv);
    if (existing !== null) {
      if (!existing.certificate.equals(certificate)) {
        throw new CertificateConflictError(
          `certificate ${JSON.stringify(this.name)} already exists and is a different certificate`,
        );
      }
      return existing;
    }
    const authority = await this.resolveIssuer(kv, false);
    const caCertificate = authority?.certificate ?? certificate;
    if (!certificate.chainsTo(caCertificate)) {
      throw new UntrustedCertificateError(
        `cannot adopt ${certificate.subject} as ${JSON.stringify(this.name)}: it is not signed by its issuer ${caCertificate.subject}`,
      );
    }
    await this.commitNew(kv, certificate, privateKey);
    return { name: this.name, certificate, privateKey, ca: caCertificate, created: true };
  }

  /**
   * Returns the stored certificate, or null when it has not been issued.
   * Never writes. Checks what it loads: that certificate and key are both
   * there (only the certificate for external ones), parse, belong together
   * and were signed by the issuer.
   */
  async load(kv: CertificateKv): Promise<IssuedCertificate | null> {
    const stored = await readPair(kv, this.keys);
    if (stored.certificate === null && stored.privateKey === null) return null;
    if (this.isExternal && stored.privateKey !== null) {
      throw new CorruptedStoreError(
        `${this.keys.privateKey} exists, but ${JSON.stringify(this.name)} is an external ` +
          `certificate whose private key is never stored: the name is in use by a managed certificate`,
      );
    }
    if (stored.certificate === null)
      throw this.halfWritten(this.keys.privateKey, this.keys.certificate);
    if (!this.isExternal && stored.privateKey === null) {
      throw this.halfWritten(this.keys.certificate, this.keys.privateKey);
    }

    const certificate = this.parseStored(stored.certificate.value);
    let privateKey: Buffer | null = null;
    if (stored.privateKey !== null) {
      // The sealer's own errors (not sealed, sealed for another key, unknown
      // key id) name the key and are passed on as they are.
      privateKey = await this.store.secrets.open(this.keys.privateKey, stored.privateKey.value);
      if (privateKey.length !== ED25519_SEED_LENGTH) {
        throw new CorruptedStoreError(
          `${this.keys.privateKey} holds ${privateKey.length} bytes, expected a ${ED25519_SEED_LENGTH}-byte Ed25519 seed`,
        );
      }
      if (!publicKeyFromPrivateKey(privateKey).equals(certificate.publicKey)) {
        throw new CorruptedStoreError(
          `${this.keys.privateKey} does not hold the private key of ${this.keys.certificate}`,
        );
      }
    }
    this.checkMatchesSpec(certificate);

    const authority = await this.resolveIssuer(kv, false);
    const caCertificate = authority?.certificate ?? certificate;
    if (!certificate.chainsTo(caCertificate)) {
      throw new CorruptedStoreError(
        `stored certificate ${this.keys.certificate} is not signed by its issuer ${caCertificate.subject}`,
      );
    }
    return { name: this.name, certificate, privateKey, ca: caCertificate, created: false };
  }

  /**
   * Writes a new certificate (its sealed key, and companions) unless either
   * has been created meanwhile — the guard that keeps concurrent issuers from
   * overwriting each other.
   */
  private async commitNew(
    kv: CertificateKv,
    certificate: ParsedCertificate,
    privateKey: Buffer | null,
  ): Promise<void> {
    const puts: KvPut[] = [[this.keys.certificate, certificate.der]];
    if (privateKey) {
      puts.push([this.keys.privateKey, this.store.secrets.seal(this.keys.privateKey, privateKey)]);
    }
    puts.push(...(await this.companionWrites(certificate, privateKey)));
    await createPair(kv, this.name, this.keys, puts);
  }

  /** Throws {@link CertificateConflictError} when `certificate` is not what this spec describes. */
  private checkMatchesSpec(certificate: ParsedCertificate): void {
    if (this.isExternal && !certificate.publicKey.equals(this.externalPublicKey())) {
      throw new CertificateConflictError(
        `certificate ${JSON.stringify(this.name)} is for another public key ` +
          `(${certificate.commonName ?? certificate.subject}) than the one given`,
      );
    }
    if (certificate.isCA !== this.spec.template.isCA) {
      throw new CertificateConflictError(
        `certificate ${JSON.stringify(this.name)} is ${certificate.isCA ? "" : "not "}a CA, ` +
          `but a ${this.spec.template.kind} certificate was asked for`,
      );
    }
  }

  /** Extra puts committed atomically with a newly issued certificate (a CA's first CRL). */
  protected async companionWrites(
    _certificate: ParsedCertificate,
    _privateKey: Buffer | null,
  ): Promise<KvPut[]> {
    return [];
  }

  private async resolveIssuer(
    kv: CertificateKv,
    createStoredCa: boolean,
  ): Promise<SigningAuthority | undefined> {
    const issuer = this.spec.issuer;
    if (issuer === "self-signed") return undefined;
    if (issuer instanceof CaCertificate) {
      if (createStoredCa) return issuer.authority(kv);
      // Loading must not create: a certificate whose CA is gone is corrupt,
      // and a fresh CA would not have signed it anyway.
      const loaded = await issuer.load(kv);
      if (loaded === null) {
        throw new CorruptedStoreError(
          `certificate ${JSON.stringify(this.name)} exists but its issuing CA ${JSON.stringify(issuer.name)} does not`,
        );
      }
      return authorityOf(issuer.name, loaded);
    }
    assertCanSign(issuer);
    return issuer;
  }

  private candidatePrivateKey(): Buffer | null {
    const key = this.spec.key;
    if (key === undefined) return generateKeyPair().privateKey;
    return "privateKey" in key ? Buffer.from(key.privateKey) : null;
  }

  private externalPublicKey(): Buffer {
    const key = this.spec.key;
    if (key === undefined || !("publicKey" in key)) {
      throw new PkiError(`certificate ${JSON.stringify(this.name)} has no external public key`);
    }
    return Buffer.from(key.publicKey);
  }

  private halfWritten(present: string, missing: string): CorruptedStoreError {
    return new CorruptedStoreError(
      `certificate ${JSON.stringify(this.name)} is half-written: ${present} exists but ${missing} does not ` +
        `(both are only ever written together)`,
    );
  }

  private parseStored(der: Buffer): ParsedCertificate {
    try {
      return parseCertificate(der);
    } catch (cause) {
      throw new CorruptedStoreError(
        `${this.keys.certificate} does not hold a usable certificate: ${describeCause(cause)}`,
        { cause },
      );
    }
  }
}

/** A store-kept self-signed CA and its CRL. Create with {@link CertificateStore.ca}. */
export class CaCertificate extends Certificate {
  /**
   * The CA with its private key, ready to issue; the CA is created (with an
   * empty CRL) if it does not exist yet. Same errors as `ensure()`.
   */
  async authority(kv: CertificateKv): Promise<CertificateAuthority> {
    return authorityOf(this.name, await this.ensure(kv));
  }

  /**
   * The CA's current CRL, checked to be signed by the CA. Creates the CA
   * (and its empty CRL) if it does not exist yet.
   */
  async crl(kv: CertificateKv): Promise<RevocationList> {
    return (await readCrl(kv, await this.stored(kv))).crl;
  }

  /**
   * Revokes a certificate of this CA — given as its serial or as the
   * certificate itself — by re-issuing the CRL with it added, and returns the
   * new CRL. Revoking an already revoked serial returns the current CRL
   * unchanged. Concurrent revocations (also from other nodes) are all kept:
   * the CRL is replaced by compare-and-swap on its revision and re-read and
   * re-issued when another revocation got in first.
   */
  async revoke(
    kv: CertificateKv,
    target: bigint | CertificateInput,
    reason?: RevocationReason,
  ): Promise<RevocationList> {
    return revoke(kv, await this.stored(kv), target, reason);
  }

  protected override async companionWrites(
    certificate: ParsedCertificate,
    privateKey: Buffer | null,
  ): Promise<KvPut[]> {
    // The first CRL is committed with the CA so that a CA never exists without one.
    const authority = authorityOf(this.name, { certificate, privateKey });
    return [await firstCrl({ name: this.name, keys: this.keys, authority })];
  }

  private async stored(kv: CertificateKv): Promise<StoredCa> {
    return { name: this.name, keys: this.keys, authority: await this.authority(kv) };
  }
}

/** The in-memory CA of a stored CA certificate; it must have its private key. */
function authorityOf(
  name: string,
  stored: { readonly certificate: ParsedCertificate; readonly privateKey: Buffer | null },
): CertificateAuthority {
  if (stored.privateKey === null) {
    throw new NotACertificateAuthorityError(`CA ${name} has no private key in the store`);
  }
  return CertificateAuthority.load(stored.certificate, stored.privateKey);
}
