/**
 * The CRL of a store-kept CA, kept next to it at `<prefix><name>-crl.der`.
 *
 * What it guarantees: a CA never exists without its CRL (the first, empty
 * CRL is committed in the same write as the CA); a CRL is only used after
 * checking that it parses and is signed by its CA, anything else being a
 * {@link CorruptedStoreError}; only certificates the CA issued are revoked by
 * certificate; concurrent revocations, also from other nodes, are all kept:
 * the CRL is replaced by compare-and-swap on its revision, and re-read and
 * re-issued when another revocation got in first.
 */
import type { CertificateAuthority } from "./ca";
import type { CertificateKv, KvPut } from "./certificate-kv";
import { parseCrl, type RevocationList, type RevocationReason } from "./crl";
import {
  ConcurrentRevocationError,
  CorruptedStoreError,
  describeCause,
  UntrustedCertificateError,
} from "./errors";
import { parseCertificate, type CertificateInput } from "./parse-certificate";
import type { CertificateKeys } from "./store-layout";

// Revocations retry their compare-and-swap this often before giving up; each
// failure means another revocation committed, so the loop always progresses.
const REVOCATION_ATTEMPTS = 10;

/** A stored CA: its name, keys and the CA itself, loaded with its private key. */
export interface StoredCa {
  readonly name: string;
  readonly keys: CertificateKeys;
  readonly authority: CertificateAuthority;
}

/**
 * The put of a new CA's first, empty CRL. It is committed with the CA, and
 * unguarded: a CRL left over without its CA was signed by another key and is
 * worthless.
 */
export async function firstCrl(ca: StoredCa): Promise<KvPut> {
  return [ca.keys.crl, (await ca.authority.createCrl()).der];
}

/** The CA's current CRL and its revision, checked to be signed by the CA. */
export async function readCrl(
  kv: CertificateKv,
  ca: StoredCa,
): Promise<{ crl: RevocationList; revision: string }> {
  const [stored] = await kv.read([ca.keys.crl]);
  if (stored === null || stored === undefined) {
    throw new CorruptedStoreError(
      `CA ${JSON.stringify(ca.name)} exists but its CRL ${ca.keys.crl} does not`,
    );
  }
  let crl: RevocationList;
  try {
    crl = parseCrl(stored.value);
  } catch (cause) {
    throw new CorruptedStoreError(
      `${ca.keys.crl} does not hold a usable CRL: ${describeCause(cause)}`,
      { cause },
    );
  }
  if (!(await crl.isIssuedBy(ca.authority.certificate))) {
    throw new CorruptedStoreError(`${ca.keys.crl} is not signed by CA ${JSON.stringify(ca.name)}`);
  }
  return { crl, revision: stored.revision };
}

/**
 * Adds `target` (a serial, or a certificate the CA issued) to the CA's CRL
 * and returns the new CRL; an already revoked serial returns the current CRL
 * unchanged. Throws {@link UntrustedCertificateError} for a certificate of
 * another CA, {@link ConcurrentRevocationError} when the CRL changed under
 * every attempt.
 */
export async function revoke(
  kv: CertificateKv,
  ca: StoredCa,
  target: bigint | CertificateInput,
  reason?: RevocationReason,
): Promise<RevocationList> {
  const serial = typeof target === "bigint" ? target : serialIssuedBy(ca, target);
  for (let attempt = 0; attempt < REVOCATION_ATTEMPTS; attempt++) {
    const { crl, revision } = await readCrl(kv, ca);
    const next = await ca.authority.revoke(crl, serial, reason);
    if (next === crl) return crl;
    if (await kv.replace(ca.keys.crl, revision, next.der)) return next;
  }
  throw new ConcurrentRevocationError(
    `could not revoke serial ${serial.toString(16)} of CA ${JSON.stringify(ca.name)}: ` +
      `${ca.keys.crl} changed under each of ${REVOCATION_ATTEMPTS} attempts; retry`,
  );
}

function serialIssuedBy(ca: StoredCa, target: CertificateInput): bigint {
  const certificate = parseCertificate(target);
  if (!certificate.chainsTo(ca.authority.certificate)) {
    throw new UntrustedCertificateError(
      `cannot revoke ${certificate.subject}: it was not issued by CA ${JSON.stringify(ca.name)}`,
    );
  }
  return certificate.serial;
}
