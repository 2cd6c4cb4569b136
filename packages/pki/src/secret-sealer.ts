/**
 * How a {@link CertificateStore} keeps private keys secret at rest. etcd's
 * files are not encrypted, so a private key written as is could be read off
 * any consensus member's disk; the store therefore seals every private key it
 * writes and opens it when it loads it, through this interface.
 *
 * The pki package defines the interface and does not implement it: the
 * cluster's secrets keyring lives in @metropolis/consensus, which sits below
 * pki (a package only imports packages above it). Consensus hands out a sealer
 * bound to each namespace (`client.sub("curator").secrets`); the store is then
 * used with that same namespace's kv.
 */

/** Seals and opens secret values stored in etcd. */
export interface SecretSealer {
  /**
   * Seals `plaintext` for storage at `key`. `key` is relative to the kv the
   * caller writes with (the sealer knows that kv's namespace): the sealed
   * value opens only at that same key, so a value copied to another key is
   * refused.
   */
  seal(key: string, plaintext: Uint8Array): Buffer;
  /**
   * Opens a value that {@link seal} made for `key`. Rejects, with an error
   * naming the key and the reason, a value that was not sealed, was sealed
   * for another key, was tampered with, or names a key that is unknown.
   */
  open(key: string, sealed: Uint8Array): Promise<Buffer>;
}
