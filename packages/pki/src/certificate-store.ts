/**
 * Certificates kept in etcd, so that every curator of the cluster issues from
 * the same CA and sees the same certificates. Layout under a store's prefix
 * (as in Monogon):
 *
 * ```
 * <prefix>issued/<name>-cert.der     DER certificate
 * <prefix>keys/<name>-privkey.bin    32-byte Ed25519 seed, sealed (not for external certificates)
 * <prefix><name>-crl.der             DER CRL (CA certificates only)
 * ```
 *
 * A private key never reaches etcd as is: the store seals it with the
 * {@link SecretSealer} it was made with before writing it, and opens it when
 * loading it. The sealer is a constructor argument, not an option, so no
 * store that keeps private keys can be made without one.
 *
 * A {@link Certificate} is a promise that a named certificate exists:
 * `ensure(kv)` loads it, or issues it and writes certificate and key in one
 * transaction guarded by "neither key has been created yet" (create_revision
 * == 0). Two nodes issuing the same certificate at once therefore never
 * overwrite each other: one transaction commits, the other writes nothing and
 * fails with {@link ConcurrentIssuanceError}, and retrying `ensure()` loads the
 * winner's certificate.
 */
import type { Namespace } from "etcd3";
import { CertificateAuthority } from "./ca";
import type { CertificateTemplate } from "./certificate-templates";
import { caTemplate } from "./certificate-templates";
import { parseCrl, type RevocationList, type RevocationReason } from "./crl";
import {
  assertPrivateKey,
  assertPublicKey,
  ED25519_SEED_LENGTH,
  generateKeyPair,
  publicKeyFromPrivateKey,
} from "./ed25519";
import {
  CertificateConflictError,
  ConcurrentIssuanceError,
  ConcurrentRevocationError,
  CorruptedStoreError,
  describeCause,
  InvalidNameError,
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
import type { SecretSealer } from "./secret-sealer";
import type { CertificateWithKey } from "./tls-material";

/**
 * The part of an etcd3 client the store uses. Both `Etcd3` and the
 * `Namespace` returned by `client.namespace(prefix)` (which consensus hands
 * out) satisfy it; all keys below are relative to it.
 */
export type EtcdKv = Pick<Namespace, "get" | "put" | "if">;

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

/** The etcd keys of one named certificate, relative to the kv passed to `ensure()`. */
export interface CertificateKeys {
  /** `<prefix>issued/<name>-cert.der` */
  readonly certificate: string;
  /** `<prefix>keys/<name>-privkey.bin` */
  readonly privateKey: string;
  /** `<prefix><name>-crl.der` (only used for CAs) */
  readonly crl: string;
}

/** Options of {@link CertificateStore.ca}. */
export interface CaOptions {
  /** The CA's common name; default "Metropolis Cluster CA". */
  readonly commonName?: string;
  /** A candidate private key seed, used if this CA is issued by this process. */
  readonly privateKey?: Uint8Array;
}

const NAME_PATTERN = /^[A-Za-z0-9][A-Za-z0-9._-]{0,199}$/;
// Revocations retry their compare-and-swap this often before giving up; each
// failure means another revocation committed, so the loop always progresses.
const REVOCATION_ATTEMPTS = 10;

/** A prefix in etcd under which named certificates are kept. */
export class CertificateStore {
  /**
   * @param secrets Seals the private keys the store writes and opens them on
   *   load; bound to the namespace of the kv the store is used with (e.g.
   *   `client.sub("curator").secrets` for `client.sub("curator").kv`).
   * @param prefix Key prefix inside the kv given to `ensure()`: empty when
   *   that kv is already namespaced for the PKI (e.g. consensus'
   *   `namespace("curator-pki/")`), otherwise a path ending in "/".
   */
  constructor(
    readonly secrets: SecretSealer,
    readonly prefix: string = "",
  ) {
    if (prefix !== "" && !prefix.endsWith("/")) {
      throw new InvalidNameError(
        `certificate store prefix ${JSON.stringify(prefix)} must be empty or end with "/"`,
      );
    }
  }

  /** The etcd keys of certificate `name`. */
  keysOf(name: string): CertificateKeys {
    checkName(name);
    return {
      certificate: `${this.prefix}issued/${name}-cert.der`,
      privateKey: `${this.prefix}keys/${name}-privkey.bin`,
      crl: `${this.prefix}${name}-crl.der`,
    };
  }

  /** A self-signed CA named `name`, with a CRL kept next to it. */
  ca(name: string, options: CaOptions = {}): CaCertificate {
    return new CaCertificate(this, name, {
      issuer: "self-signed",
      template: caTemplate(options.commonName),
      ...(options.privateKey ? { key: { privateKey: options.privateKey } } : {}),
    });
  }

  /** A certificate named `name`, described by `spec`. */
  certificate(name: string, spec: CertificateSpec): Certificate {
    if (spec.template.isCA) {
      throw new InvalidTemplateError(
        `certificate ${JSON.stringify(name)} has a CA template: create CAs with store.ca(), which also keeps their CRL`,
      );
    }
    return new Certificate(this, name, spec);
  }
}

/** A named certificate in a {@link CertificateStore}: exists once `ensure()` returned. */
export class Certificate {
  /** The etcd keys this certificate lives at. */
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
   * {@link CorruptedStoreError} when etcd holds an inconsistent state, and
   * {@link CertificateConflictError} when an external certificate exists for
   * another key.
   */
  async ensure(kv: EtcdKv): Promise<IssuedCertificate> {
    const existing = await this.load(kv);
    if (existing !== null) return existing;

    const authority = await this.resolveIssuer(kv, true);
    const privateKey = this.candidatePrivateKey();
    const publicKey = privateKey ? publicKeyFromPrivateKey(privateKey) : this.externalPublicKey();
    const certificate = authority
      ? await issueCertificate(this.spec.template, publicKey, authority)
      : await selfSignCertificate(this.spec.template, privateKey as Buffer);

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
   * same create_revision == 0 guard. Idempotent: adopting what is already
   * stored returns it with `created: false`; a different certificate already
   * stored under the name is a {@link CertificateConflictError}.
   */
  async adopt(
    kv: EtcdKv,
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
    if (
      !certificate.isIssuedBy(caCertificate) ||
      !certificate.isSignedBy(caCertificate.publicKey)
    ) {
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
  async load(kv: EtcdKv): Promise<IssuedCertificate | null> {
    const [storedCertificate, storedKey] = await readAtomically(kv, [
      this.keys.certificate,
      this.keys.privateKey,
    ]);
    if (storedCertificate === null && storedKey === null) return null;

    if (this.isExternal) {
      if (storedKey !== null) {
        throw new CorruptedStoreError(
          `${this.keys.privateKey} exists, but ${JSON.stringify(this.name)} is an external ` +
            `certificate whose private key is never stored: the name is in use by a managed certificate`,
        );
      }
    } else if (storedCertificate === null || storedKey === null) {
      const [present, missing] =
        storedCertificate === null
          ? [this.keys.privateKey, this.keys.certificate]
          : [this.keys.certificate, this.keys.privateKey];
      throw new CorruptedStoreError(
        `certificate ${JSON.stringify(this.name)} is half-written: ${present} exists but ${missing} does not ` +
          `(both are only ever written together)`,
      );
    }

    const certificate = this.parseStored((storedCertificate as StoredValue).value);
    let privateKey: Buffer | null = null;
    if (storedKey !== null) {
      // The sealer's own errors (not sealed, sealed for another key, unknown
      // key id) name the key and are passed on as they are.
      privateKey = await this.store.secrets.open(this.keys.privateKey, storedKey.value);
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
    if (
      !certificate.isIssuedBy(caCertificate) ||
      !certificate.isSignedBy(caCertificate.publicKey)
    ) {
      throw new CorruptedStoreError(
        `stored certificate ${this.keys.certificate} is not signed by its issuer ${caCertificate.subject}`,
      );
    }
    return { name: this.name, certificate, privateKey, ca: caCertificate, created: false };
  }

  /**
   * Writes a new certificate (and its key, and companions) unless either key
   * has been created meanwhile — the guard that keeps concurrent issuers from
   * overwriting each other.
   */
  private async commitNew(
    kv: EtcdKv,
    certificate: ParsedCertificate,
    privateKey: Buffer | null,
  ): Promise<void> {
    const writes: Array<readonly [string, Buffer]> = [[this.keys.certificate, certificate.der]];
    if (privateKey) {
      writes.push([
        this.keys.privateKey,
        this.store.secrets.seal(this.keys.privateKey, privateKey),
      ]);
    }
    writes.push(...(await this.companionWrites(certificate, privateKey)));
    const result = await kv
      .if(this.keys.certificate, "Create", "==", 0)
      .and(this.keys.privateKey, "Create", "==", 0)
      .then(...writes.map(([key, value]) => kv.put(key).value(value)))
      .commit();
    if (!result.succeeded) {
      throw new ConcurrentIssuanceError(this.name, [this.keys.certificate, this.keys.privateKey]);
    }
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
  ): Promise<Array<readonly [string, Buffer]>> {
    return [];
  }

  private async resolveIssuer(
    kv: EtcdKv,
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
      return CertificateAuthority.load(loaded.certificate, loaded.privateKey as Buffer);
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
  async authority(kv: EtcdKv): Promise<CertificateAuthority> {
    const issued = await this.ensure(kv);
    if (issued.privateKey === null) {
      throw new NotACertificateAuthorityError(`CA ${this.name} has no private key in the store`);
    }
    return CertificateAuthority.load(issued.certificate, issued.privateKey);
  }

  /**
   * The CA's current CRL, checked to be signed by the CA. Creates the CA
   * (and its empty CRL) if it does not exist yet.
   */
  async crl(kv: EtcdKv): Promise<RevocationList> {
    const authority = await this.authority(kv);
    return (await this.readCrl(kv, authority)).crl;
  }

  /**
   * Revokes a certificate of this CA — given as its serial or as the
   * certificate itself — by re-issuing the CRL with it added, and returns the
   * new CRL. Revoking an already revoked serial returns the current CRL
   * unchanged. Concurrent revocations (also from other nodes) are all kept:
   * the CRL is replaced by compare-and-swap on its mod revision and re-read
   * and re-issued when another revocation got in first.
   */
  async revoke(
    kv: EtcdKv,
    target: bigint | CertificateInput,
    reason?: RevocationReason,
  ): Promise<RevocationList> {
    const authority = await this.authority(kv);
    const serial = typeof target === "bigint" ? target : this.serialOfIssued(target, authority);
    for (let attempt = 0; attempt < REVOCATION_ATTEMPTS; attempt++) {
      const { crl, modRevision } = await this.readCrl(kv, authority);
      const next = await authority.revoke(crl, serial, reason);
      if (next === crl) return crl;
      const result = await kv
        .if(this.keys.crl, "Mod", "==", modRevision)
        .then(kv.put(this.keys.crl).value(next.der))
        .commit();
      if (result.succeeded) return next;
    }
    throw new ConcurrentRevocationError(
      `could not revoke serial ${serial.toString(16)} of CA ${JSON.stringify(this.name)}: ` +
        `${this.keys.crl} changed under each of ${REVOCATION_ATTEMPTS} attempts; retry`,
    );
  }

  protected override async companionWrites(
    certificate: ParsedCertificate,
    privateKey: Buffer | null,
  ): Promise<Array<readonly [string, Buffer]>> {
    // The first CRL is committed with the CA so that a CA never exists
    // without one. It is put unconditionally: a CRL left over without its CA
    // was signed by another key and is worthless.
    const authority = CertificateAuthority.load(certificate, privateKey as Buffer);
    return [[this.keys.crl, (await authority.createCrl()).der]];
  }

  private async readCrl(
    kv: EtcdKv,
    authority: CertificateAuthority,
  ): Promise<{ crl: RevocationList; modRevision: string }> {
    const [stored] = await readAtomically(kv, [this.keys.crl]);
    if (stored === null) {
      throw new CorruptedStoreError(
        `CA ${JSON.stringify(this.name)} exists but its CRL ${this.keys.crl} does not`,
      );
    }
    let crl: RevocationList;
    try {
      crl = parseCrl(stored.value);
    } catch (cause) {
      throw new CorruptedStoreError(
        `${this.keys.crl} does not hold a usable CRL: ${describeCause(cause)}`,
        { cause },
      );
    }
    if (!(await crl.isIssuedBy(authority.certificate))) {
      throw new CorruptedStoreError(
        `${this.keys.crl} is not signed by CA ${JSON.stringify(this.name)}`,
      );
    }
    return { crl, modRevision: stored.modRevision };
  }

  private serialOfIssued(target: CertificateInput, authority: CertificateAuthority): bigint {
    const certificate = parseCertificate(target);
    if (
      !certificate.isIssuedBy(authority.certificate) ||
      !certificate.isSignedBy(authority.certificate.publicKey)
    ) {
      throw new UntrustedCertificateError(
        `cannot revoke ${certificate.subject}: it was not issued by CA ${JSON.stringify(this.name)}`,
      );
    }
    return certificate.serial;
  }
}

/** A stored value with the revision it was last modified at. */
interface StoredValue {
  readonly value: Buffer;
  readonly modRevision: string;
}

/**
 * Reads `keys` at one revision. etcd has no multi-key get, but a transaction
 * is atomic: with the same reads in both branches, whichever branch runs
 * returns a consistent snapshot (two plain gets could straddle another
 * issuer's commit and see a half-written certificate that never existed).
 */
async function readAtomically(
  kv: EtcdKv,
  keys: readonly [string, ...string[]],
): Promise<Array<StoredValue | null>> {
  const reads = () => keys.map((key) => kv.get(key));
  const result = await kv
    .if(keys[0], "Create", "==", 0)
    .then(...reads())
    .else(...reads())
    .commit();
  return result.responses.map((response) => {
    const found = response.response_range.kvs[0];
    if (found === undefined) return null;
    return { value: Buffer.from(found.value), modRevision: found.mod_revision };
  });
}

function checkName(name: string): void {
  if (typeof name !== "string" || !NAME_PATTERN.test(name)) {
    throw new InvalidNameError(
      `certificate name ${JSON.stringify(name)} must be 1-200 characters of letters, digits, ".", "_" and "-", not starting with a symbol`,
    );
  }
}
