/**
 * The cluster secrets keyring: the AES-256 keys that seal every secret the
 * cluster keeps in etcd (the cluster and etcd CA private keys, the nodes'
 * cluster unlock keys, the register ticket). etcd's data directory is not
 * encrypted, so a secret written as is could be read off any member's disk;
 * sealed, it is worth nothing without the keyring, which etcd only holds
 * wrapped for each consensus member's node key (keyring-wrap.ts).
 *
 * As Kubernetes' encryption at rest does, values carry the id of the key that
 * sealed them: the current key seals, every key in the keyring opens, so the
 * key can be rotated without a moment where some value cannot be read
 * (rotation.ts). A sealed value is a version 2 envelope of
 * @metropolis/localstorage:
 *
 * ```
 * "MTSS" | 2 | key id (uint32 BE) | nonce (12) | tag (16) | AES-256-GCM ciphertext
 * ```
 *
 * with the full etcd key the value is stored at (namespace prefix included)
 * as associated data, so a sealed value copied to another key does not open.
 * A keyring object is immutable; changes make a new one.
 */
import { randomBytes } from "node:crypto";
import {
  envelopeKeyId,
  envelopeKeyLength,
  hasEnvelopeMagic,
  openEnvelope,
  sealEnvelope,
} from "@metropolis/localstorage";
import { priv } from "@metropolis/proto";
import {
  KeyringError,
  NotSealedError,
  SecretAuthenticationError,
  UnknownSecretKeyError,
} from "./errors";

/** The magic of a sealed secret: "Metropolis-TS Sealed Secret". */
export const sealedSecretMagic = "MTSS";

const maxKeyId = 0xffff_ffff;

/** Whether `value` is a sealed secret (by its magic; opening is what checks it). */
export function isSealedSecret(value: Uint8Array): boolean {
  return value.length > 4 && hasEnvelopeMagic(sealedSecretMagic, value);
}

/** The key id a sealed secret names, or undefined when `value` is not a sealed secret. */
export function sealedKeyId(value: Uint8Array): number | undefined {
  if (!isSealedSecret(value)) return undefined;
  const result = envelopeKeyId(sealedSecretMagic, value);
  return result.ok ? result.keyId : undefined;
}

/** A set of AES-256 keys with ids, one of them current. */
export class SecretKeyring {
  readonly #keys: ReadonlyMap<number, Buffer>;

  private constructor(
    keys: ReadonlyMap<number, Buffer>,
    /** The id of the key that seals. */
    readonly currentId: number,
  ) {
    for (const [id, key] of keys) {
      if (!Number.isInteger(id) || id < 1 || id > maxKeyId) {
        throw new KeyringError(`keyring key id ${id} is not an integer from 1 to ${maxKeyId}`);
      }
      if (key.length !== envelopeKeyLength) {
        throw new KeyringError(
          `keyring key ${id} has ${key.length} bytes, expected ${envelopeKeyLength}`,
        );
      }
    }
    if (!keys.has(currentId)) {
      throw new KeyringError(`keyring's current key id ${currentId} is not one of its keys`);
    }
    this.#keys = keys;
  }

  /** A new keyring of one fresh random key, id 1. */
  static generate(): SecretKeyring {
    return new SecretKeyring(new Map([[1, randomBytes(envelopeKeyLength)]]), 1);
  }

  /** Decodes a `priv.SecretKeyring`, checking it (ids unique and non-zero, keys 32 bytes). */
  static decode(bytes: Uint8Array): SecretKeyring {
    let message: priv.SecretKeyring;
    try {
      message = priv.SecretKeyring.decode(bytes);
    } catch (cause) {
      throw new KeyringError(`keyring does not decode: ${String(cause)}`, { cause });
    }
    const keys = new Map<number, Buffer>();
    for (const { id, key } of message.keys) {
      if (keys.has(id)) throw new KeyringError(`keyring holds key id ${id} twice`);
      keys.set(id, Buffer.from(key));
    }
    return new SecretKeyring(keys, message.currentId);
  }

  /** The encoded `priv.SecretKeyring`. Secret: only ever stored wrapped. */
  encode(): Buffer {
    const keys = [...this.#keys].map(([id, key]) => ({ id, key }));
    return Buffer.from(priv.SecretKeyring.encode({ keys, currentId: this.currentId }).finish());
  }

  /** The ids of the keys, ascending. */
  get ids(): number[] {
    return [...this.#keys.keys()].sort((a, b) => a - b);
  }

  /** Whether the keyring holds key `id`. */
  has(id: number): boolean {
    return this.#keys.has(id);
  }

  /** Whether `other` holds the same keys with the same current one. */
  equals(other: SecretKeyring): boolean {
    return (
      this.currentId === other.currentId &&
      this.#keys.size === other.#keys.size &&
      [...this.#keys].every(([id, key]) => other.#keys.get(id)?.equals(key) === true)
    );
  }

  /**
   * This keyring plus a fresh key (id one above the highest), which does not
   * seal yet: rotation first gives it to every member, then makes it current.
   */
  withNewKey(): { keyring: SecretKeyring; id: number } {
    const id = Math.max(...this.#keys.keys()) + 1;
    if (id > maxKeyId) throw new KeyringError("keyring key ids are exhausted");
    const keys = new Map(this.#keys);
    keys.set(id, randomBytes(envelopeKeyLength));
    return { keyring: new SecretKeyring(keys, this.currentId), id };
  }

  /** This keyring with key `id` (one of its keys) current. */
  withCurrent(id: number): SecretKeyring {
    return new SecretKeyring(this.#keys, id);
  }

  /** This keyring without the keys `ids` (the current key cannot be retired). */
  without(ids: readonly number[]): SecretKeyring {
    const keys = new Map(this.#keys);
    for (const id of ids) keys.delete(id);
    return new SecretKeyring(keys, this.currentId);
  }

  /** Seals `plaintext` under the current key for storage at the full etcd key `at`. */
  seal(at: string | Uint8Array, plaintext: Uint8Array): Buffer {
    const key = this.#keys.get(this.currentId) as Buffer;
    return sealEnvelope(key, sealedSecretMagic, at, plaintext, this.currentId);
  }

  /**
   * Opens a value sealed for the full etcd key `at`, under whichever key of the
   * keyring it names. Throws {@link NotSealedError}, {@link UnknownSecretKeyError}
   * or {@link SecretAuthenticationError}, each naming `at`.
   */
  open(at: string | Uint8Array, sealed: Uint8Array): Buffer {
    const name = typeof at === "string" ? at : Buffer.from(at).toString("utf8");
    if (!isSealedSecret(sealed)) {
      throw new NotSealedError(name, "the value is not a sealed secret (stored in plaintext?)");
    }
    const named = envelopeKeyId(sealedSecretMagic, sealed);
    if (!named.ok) throw new NotSealedError(name, named.reason);
    const key = this.#keys.get(named.keyId);
    if (key === undefined) throw new UnknownSecretKeyError(name, named.keyId, this.ids);
    const opened = openEnvelope(key, sealedSecretMagic, at, sealed);
    if (!opened.ok) throw new SecretAuthenticationError(name, opened.reason);
    return opened.plaintext;
  }
}
