/**
 * The keyring wrapped for one consensus member, as etcd keeps it (one copy
 * per member, at `namespaced:consensus/secrets/keyrings/<node id>`, see
 * keyring-store.ts).
 *
 * Only a member can open its copy: it is sealed (AES-256-GCM, the localstorage
 * envelope) under a key agreed by X25519 between a one-time key and the
 * member's node key, derived with HKDF-SHA256. A member's node key lies on its
 * data partition, which opens only with the node's sealed unlock key and its
 * cluster unlock key together: the keyring is protected like the node's own
 * secrets, and a copied etcd database alone reveals nothing.
 *
 * Node keys are Ed25519 (the cluster's node identities); X25519 agreement
 * needs their Montgomery form. Node's crypto does X25519 agreement, but has no
 * conversion from Ed25519 keys, so the conversion (RFC 7748's birational map
 * for the public key; the clamped SHA-512 head of the seed, as Ed25519 itself
 * derives its scalar, for the private key) comes from @noble/curves, an
 * audited, dependency-free implementation. The agreement itself stays with
 * Node's OpenSSL.
 *
 * The associated data is the full etcd key of the copy, which names the
 * member: a copy moved to another member's place does not open, and a copy
 * for another member's key is refused before any decryption is tried.
 */
import {
  createPrivateKey,
  createPublicKey,
  diffieHellman,
  hkdfSync,
  type KeyObject,
} from "node:crypto";
import { edwardsToMontgomeryPriv, edwardsToMontgomeryPub } from "@noble/curves/ed25519";
import { envelopeKeyLength, openEnvelope, sealEnvelope } from "@metropolis/localstorage";
import { generateDerKeyPair, publicKeyFromPrivateKey } from "@metropolis/pki";
import { priv } from "@metropolis/proto";
import { KeyringError } from "./errors";
import { SecretKeyring } from "./secret-keyring";

/** The magic of a wrapped keyring's envelope: "Metropolis-TS Keyring Wrap". */
const wrapMagic = "MTKW";
const hkdfInfo = "metropolis-ts cluster secrets keyring wrap v1";
const x25519KeyLength = 32;

/**
 * Wraps `keyring` for the member whose raw Ed25519 node public key is
 * `recipientPublicKey`, to be stored at the full etcd key `at`. Returns the
 * encoded `priv.WrappedSecretKeyring`.
 */
export function wrapKeyring(
  keyring: SecretKeyring,
  recipientPublicKey: Uint8Array,
  at: string,
): Buffer {
  const recipient = x25519PublicKey(edwardsToMontgomeryPub(recipientPublicKey));
  // As DER, used through key objects of its own (see generateDerKeyPair:
  // a key object that Node's generation returns can hang the process).
  const oneTime = generateDerKeyPair("x25519");
  const ephemeralPublicKey = rawX25519PublicKey(
    createPublicKey({ key: oneTime.publicKey, format: "der", type: "spki" }),
  );
  const oneTimePrivateKey = createPrivateKey({
    key: oneTime.privateKey,
    format: "der",
    type: "pkcs8",
  });
  const key = agreedKey(
    diffieHellman({ privateKey: oneTimePrivateKey, publicKey: recipient }),
    ephemeralPublicKey,
    Buffer.from(recipientPublicKey),
  );
  const sealed = sealEnvelope(key, wrapMagic, at, keyring.encode());
  return Buffer.from(
    priv.WrappedSecretKeyring.encode({
      recipientPublicKey: Buffer.from(recipientPublicKey),
      ephemeralPublicKey,
      sealed,
    }).finish(),
  );
}

/** The recipient's raw Ed25519 public key of an encoded wrapped keyring (no secret needed). */
export function wrappedFor(wrapped: Uint8Array, at: string): Buffer {
  return decodeWrapped(wrapped, at).recipientPublicKey;
}

/**
 * Opens the encoded wrapped keyring stored at `at` with this member's
 * Ed25519 node private key (32-byte seed). Throws {@link KeyringError} when it
 * is malformed, wrapped for another key, or does not open.
 */
export function unwrapKeyring(
  wrapped: Uint8Array,
  nodePrivateKey: Uint8Array,
  at: string,
): SecretKeyring {
  const message = decodeWrapped(wrapped, at);
  const ownPublicKey = publicKeyFromPrivateKey(nodePrivateKey);
  if (!message.recipientPublicKey.equals(ownPublicKey)) {
    throw new KeyringError(
      `keyring copy at ${JSON.stringify(at)} is wrapped for another node key, not this member's`,
    );
  }
  if (message.ephemeralPublicKey.length !== x25519KeyLength) {
    throw new KeyringError(
      `keyring copy at ${JSON.stringify(at)} has a ${message.ephemeralPublicKey.length}-byte one-time key, expected ${x25519KeyLength}`,
    );
  }
  const montgomery = edwardsToMontgomeryPriv(nodePrivateKey);
  const ownPrivate = x25519PrivateKey(montgomery, edwardsToMontgomeryPub(ownPublicKey));
  let shared: Buffer;
  try {
    shared = diffieHellman({
      privateKey: ownPrivate,
      publicKey: x25519PublicKey(message.ephemeralPublicKey),
    });
  } catch (cause) {
    throw new KeyringError(
      `keyring copy at ${JSON.stringify(at)} has an unusable one-time key: ${String(cause)}`,
      { cause },
    );
  }
  const key = agreedKey(shared, message.ephemeralPublicKey, ownPublicKey);
  const opened = openEnvelope(key, wrapMagic, at, message.sealed);
  if (!opened.ok) {
    throw new KeyringError(`keyring copy at ${JSON.stringify(at)} does not open: ${opened.reason}`);
  }
  return SecretKeyring.decode(opened.plaintext);
}

function decodeWrapped(wrapped: Uint8Array, at: string): priv.WrappedSecretKeyring {
  try {
    return priv.WrappedSecretKeyring.decode(wrapped);
  } catch (cause) {
    throw new KeyringError(
      `keyring copy at ${JSON.stringify(at)} is not a wrapped keyring: ${String(cause)}`,
      { cause },
    );
  }
}

/**
 * HKDF-SHA256 of the X25519 secret, salted with both public halves of the
 * agreement (the one-time key and the recipient's Ed25519 key), so that the
 * wrapping key is bound to this exchange and this recipient.
 */
function agreedKey(shared: Buffer, ephemeralPublicKey: Buffer, recipientPublicKey: Buffer): Buffer {
  if (shared.every((byte) => byte === 0)) {
    throw new KeyringError("X25519 agreement gave the all-zero secret (a low-order key)");
  }
  const salt = Buffer.concat([ephemeralPublicKey, recipientPublicKey]);
  return Buffer.from(hkdfSync("sha256", shared, salt, hkdfInfo, envelopeKeyLength));
}

function x25519PublicKey(raw: Uint8Array): KeyObject {
  return createPublicKey({
    key: { kty: "OKP", crv: "X25519", x: Buffer.from(raw).toString("base64url") },
    format: "jwk",
  });
}

function x25519PrivateKey(raw: Uint8Array, publicKey: Uint8Array): KeyObject {
  return createPrivateKey({
    key: {
      kty: "OKP",
      crv: "X25519",
      d: Buffer.from(raw).toString("base64url"),
      x: Buffer.from(publicKey).toString("base64url"),
    },
    format: "jwk",
  });
}

function rawX25519PublicKey(key: KeyObject): Buffer {
  const jwk = key.export({ format: "jwk" });
  return Buffer.from(jwk.x ?? "", "base64url");
}
