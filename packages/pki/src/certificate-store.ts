/**
 * Certificates kept in a key-value store — etcd in a cluster — so that every
 * curator of the cluster issues from the same CA and sees the same
 * certificates. A {@link CertificateStore} is a place (a key prefix) and the
 * sealer its private keys are sealed with; it hands out the named
 * certificates kept there, which are read and written through the
 * `CertificateKv` passed to each of their calls.
 *
 * The concerns live one a file:
 * - certificate-kv.ts: the port to the storage and its compare-and-swap
 *   guarantees (etcd's adapter is in @metropolis/consensus, an in-memory one
 *   in `@metropolis/pki/testing`);
 * - store-layout.ts: the key layout and the atomic read and create of a
 *   certificate with its key;
 * - stored-certificate.ts: issuing, adopting and loading a named certificate
 *   (and a store-kept CA), with private keys sealed at rest;
 * - stored-crl.ts: a store-kept CA's CRL and revocation;
 * - chain validation is `ParsedCertificate.chainsTo`.
 *
 * A private key never reaches the kv as is: the store seals it with the
 * {@link SecretSealer} it was made with before writing it, and opens it when
 * loading it. The sealer is a constructor argument, not an option, so no
 * store that keeps private keys can be made without one.
 */
import { caTemplate } from "./certificate-templates";
import { InvalidTemplateError } from "./errors";
import type { SecretSealer } from "./secret-sealer";
import { certificateKeys, checkPrefix, type CertificateKeys } from "./store-layout";
import { CaCertificate, Certificate, type CertificateSpec } from "./stored-certificate";

/** Options of {@link CertificateStore.ca}. */
export interface CaOptions {
  /** The CA's common name; default "Metropolis Cluster CA". */
  readonly commonName?: string;
  /** A candidate private key seed, used if this CA is issued by this process. */
  readonly privateKey?: Uint8Array;
}

/** A prefix in a key-value store under which named certificates are kept. */
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
    checkPrefix(prefix);
  }

  /** The storage keys of certificate `name`. */
  keysOf(name: string): CertificateKeys {
    return certificateKeys(this.prefix, name);
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
