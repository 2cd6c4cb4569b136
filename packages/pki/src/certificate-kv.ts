/**
 * The key-value storage a {@link CertificateStore} keeps its certificates in:
 * a port, defined here by what the store needs and implemented elsewhere.
 * In a cluster it is etcd (`etcdCertificateKv` in @metropolis/consensus, the
 * package that owns etcd); pki's own tests use the in-memory
 * `MemoryCertificateKv` of `@metropolis/pki/testing`. Both pass the same
 * contract (`certificateKvContract`, also in `@metropolis/pki/testing`).
 *
 * What an implementation guarantees:
 * - `read` sees all the keys it is given at one point in time, so a write of
 *   several keys (a certificate and its key) is seen whole or not at all;
 * - `createAll` is one atomic compare-and-swap: every put, or none, and none
 *   as soon as one of its guarded keys exists. Of concurrent `createAll`s
 *   guarding the same key, at most one commits;
 * - `replace` is a compare-and-swap on a key's revision: it writes only if
 *   the key was not written since the `read` that returned that revision.
 *   Every write of a key gives it a new revision, also when the bytes are
 *   the same, so of concurrent `replace`s from one revision at most one
 *   commits;
 * - values come back byte for byte as written, as buffers of their own.
 *
 * Keys are relative to whatever namespace the implementation is bound to.
 */

/** A value as stored, with the revision of its last write. */
export interface StoredValue {
  /** The bytes stored. */
  readonly value: Buffer;
  /**
   * Opaque token of the key's last write; a later write of the key always
   * has another. Only meaningful when handed back to {@link CertificateKv.replace}.
   */
  readonly revision: string;
}

/** One write: `[key, value]`. */
export type KvPut = readonly [key: string, value: Buffer];

/** Keys a call needs at least one of. */
export type SomeKeys = readonly [string, ...string[]];

/** The storage a {@link CertificateStore} works on; see the file comment for its guarantees. */
export interface CertificateKv {
  /**
   * The values of `keys` (null for a key that does not exist), all read at
   * one point in time; in the order of `keys`.
   */
  read(keys: SomeKeys): Promise<Array<StoredValue | null>>;
  /**
   * Atomically: when none of `absent` exists, writes every one of `puts`
   * (which need not be among `absent`: those are written whatever they hold)
   * and returns true; otherwise writes nothing and returns false.
   */
  createAll(absent: SomeKeys, puts: readonly KvPut[]): Promise<boolean>;
  /**
   * Atomically: when `key` still has the `revision` a {@link read} returned
   * for it, writes `value` and returns true; otherwise (written since,
   * deleted) writes nothing and returns false.
   */
  replace(key: string, revision: string, value: Buffer): Promise<boolean>;
}
