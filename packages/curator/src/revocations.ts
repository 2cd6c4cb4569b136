/**
 * The cluster CA's certificate revocation list, as one process knows it.
 *
 * Certificates of the cluster never expire; deleting a node revokes its
 * certificate in the CA's CRL (kept in etcd next to the CA), and every mTLS
 * endpoint that classifies callers (identity.ts) refuses a revoked one: the
 * curator leader follows the CRL in etcd, every node follows it through
 * `Curator.WatchRevocations` (roleserve) for its Debug service, and keeps a
 * copy on disk so that a restart refuses revoked certificates before any
 * curator answers.
 *
 *   etcd /cluster-pki/cluster-ca-crl.der ──watch──▶ leader's Revocations ──▶ identify
 *                                                        └─ WatchRevocations ──▶ node's Revocations ──▶ Debug
 *
 * Only a CRL signed by the cluster CA is taken, and only a newer one (a
 * higher CRL number): a stale or forged answer cannot un-revoke anything.
 */
import type { Namespace } from "etcd3";
import { openWatch } from "@metropolis/consensus";
import { MemoryValue } from "@metropolis/event";
import { parseCrl, UntrustedCrlError, type RevocationList } from "@metropolis/pki";
import type { CaCertificate } from "@metropolis/pki";

/** The newest verified CRL of one CA; see the module comment. */
export class Revocations {
  /** The newest CRL, set on every change; undefined until one is known. */
  readonly changes = new MemoryValue<RevocationList | undefined>(undefined);
  private newest: RevocationList | undefined;

  constructor(
    /** The cluster CA certificate (DER) every CRL must be signed by. */
    private readonly caCertificate: Uint8Array,
  ) {}

  /** The newest CRL known, or undefined. */
  get current(): RevocationList | undefined {
    return this.newest;
  }

  /** Whether the certificate with `serial` is revoked, as far as this process knows. */
  isRevoked(serial: bigint): boolean {
    return this.newest?.isRevoked(serial) ?? false;
  }

  /**
   * Takes `der` when it is a CRL of the cluster CA newer than the current
   * one; returns whether it did. Throws UntrustedCrlError for a CRL the CA
   * did not sign, and the pki's parse errors for one that does not parse.
   */
  async offer(der: Uint8Array): Promise<boolean> {
    const crl = parseCrl(der);
    if (!(await crl.isIssuedBy(this.caCertificate))) {
      throw new UntrustedCrlError(
        `a revocation list from ${crl.issuer} is not signed by the cluster CA: ignored`,
      );
    }
    if (this.newest && (crl.crlNumber ?? 0n) <= (this.newest.crlNumber ?? 0n)) return false;
    this.newest = crl;
    this.changes.set(crl);
    return true;
  }
}

/**
 * Keeps `revocations` current from the CRL of `ca` in etcd (`kv`, the
 * curator's namespace) until `signal` aborts: reads it, then follows its
 * key. Resolves once the first read was taken; the following goes on in the
 * background, and a failed watch is reported through `onError`.
 */
export async function followStoredRevocations(
  kv: Namespace,
  ca: CaCertificate,
  revocations: Revocations,
  signal: AbortSignal,
  onError: (e: unknown) => void,
): Promise<void> {
  const key = ca.keys.crl;
  const res = await kv.get(key).exec();
  const stored = res.kvs[0];
  if (stored) await revocations.offer(stored.value);
  const watcher = await openWatch(
    kv
      .watch()
      .key(key)
      .startRevision((BigInt(res.header.revision) + 1n).toString()),
    signal,
  );
  const stop = () => void watcher.cancel().catch(() => undefined);
  if (signal.aborted) return stop();
  signal.addEventListener("abort", stop, { once: true });
  watcher.on("put", (entry) => void revocations.offer(entry.value).catch(onError));
  watcher.on("error", onError);
}
