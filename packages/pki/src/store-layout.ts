/**
 * Where a certificate store keeps a named certificate, and how it writes it.
 * Layout under a store's prefix (as in Monogon):
 *
 * ```
 * <prefix>issued/<name>-cert.der     DER certificate
 * <prefix>keys/<name>-privkey.bin    32-byte Ed25519 seed, sealed (not for external certificates)
 * <prefix><name>-crl.der             DER CRL (CA certificates only)
 * ```
 *
 * What it guarantees: names cannot escape the layout (a name is letters,
 * digits, ".", "_" and "-", not starting with a symbol); certificate and key
 * are read together at one point in time, so a half-written pair that never
 * existed is never seen; a new certificate is written in one compare-and-swap
 * guarded by "neither its certificate nor its key exists yet", so of two
 * concurrent issuers exactly one commits and the other gets a retryable
 * {@link ConcurrentIssuanceError}, having written nothing.
 */
import type { CertificateKv, KvPut, SomeKeys, StoredValue } from "./certificate-kv";
import { ConcurrentIssuanceError, InvalidNameError } from "./errors";

/** The storage keys of one named certificate, relative to the kv the store is used with. */
export interface CertificateKeys {
  /** `<prefix>issued/<name>-cert.der` */
  readonly certificate: string;
  /** `<prefix>keys/<name>-privkey.bin` */
  readonly privateKey: string;
  /** `<prefix><name>-crl.der` (only used for CAs) */
  readonly crl: string;
}

const NAME_PATTERN = /^[A-Za-z0-9][A-Za-z0-9._-]{0,199}$/;

/** Throws {@link InvalidNameError} unless `prefix` is empty or ends with "/". */
export function checkPrefix(prefix: string): void {
  if (prefix !== "" && !prefix.endsWith("/")) {
    throw new InvalidNameError(
      `certificate store prefix ${JSON.stringify(prefix)} must be empty or end with "/"`,
    );
  }
}

/** The keys of certificate `name` under `prefix`; throws {@link InvalidNameError} for a bad name. */
export function certificateKeys(prefix: string, name: string): CertificateKeys {
  if (typeof name !== "string" || !NAME_PATTERN.test(name)) {
    throw new InvalidNameError(
      `certificate name ${JSON.stringify(name)} must be 1-200 characters of letters, digits, ".", "_" and "-", not starting with a symbol`,
    );
  }
  return {
    certificate: `${prefix}issued/${name}-cert.der`,
    privateKey: `${prefix}keys/${name}-privkey.bin`,
    crl: `${prefix}${name}-crl.der`,
  };
}

/** What is stored for a certificate, read at one point in time; null where nothing is. */
export interface StoredPair {
  readonly certificate: StoredValue | null;
  readonly privateKey: StoredValue | null;
}

/** Reads certificate and (sealed) key of `keys` together. */
export async function readPair(kv: CertificateKv, keys: CertificateKeys): Promise<StoredPair> {
  const [certificate, privateKey] = await kv.read([keys.certificate, keys.privateKey]);
  return { certificate: certificate ?? null, privateKey: privateKey ?? null };
}

/**
 * Writes `puts` (the new certificate, its sealed key, companions such as a
 * CA's first CRL) unless certificate or key of `keys` exists by now; then
 * writes nothing and throws {@link ConcurrentIssuanceError}.
 */
export async function createPair(
  kv: CertificateKv,
  name: string,
  keys: CertificateKeys,
  puts: readonly KvPut[],
): Promise<void> {
  const guarded: SomeKeys = [keys.certificate, keys.privateKey];
  if (!(await kv.createAll(guarded, puts))) {
    throw new ConcurrentIssuanceError(name, guarded);
  }
}
