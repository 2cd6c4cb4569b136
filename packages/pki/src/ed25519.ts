/**
 * Ed25519 keys as the rest of Metropolis sees them: raw bytes. A public key
 * is its 32 raw bytes, a private key is its 32-byte RFC 8032 seed — the
 * canonical form in etcd (`keys/<name>-privkey.bin`) and everywhere in this
 * API. Everything else (PKCS#8 and SPKI DER, PEM, WebCrypto and Node
 * KeyObjects) is derived at the edges where a consumer needs it.
 *
 * The seed rather than PKCS#8 is stored because it is the smallest complete
 * form, has exactly one encoding (PKCS#8 has optional fields and attributes),
 * and its length alone tells a valid value from garbage.
 */
import {
  createPrivateKey,
  createPublicKey,
  generateKeyPairSync,
  type KeyObject,
  type webcrypto as WebCrypto,
} from "node:crypto";
import { describeCause, InvalidKeyError, InvalidPemError, WrongKeyTypeError } from "./errors";
import { decodePem, encodePem, looksLikePem } from "./pem";
import { ED25519_ALGORITHM, webcrypto } from "./x509-provider";

/** Length in bytes of a raw Ed25519 public key. */
export const ED25519_PUBLIC_KEY_LENGTH = 32;
/** Length in bytes of an Ed25519 private key seed (RFC 8032), the canonical private key form. */
export const ED25519_SEED_LENGTH = 32;

/** Prefix of the node IDs derived by {@link nodeIdFromPublicKey}. */
export const NODE_ID_PREFIX = "metropolis-";

// The fixed DER wrappers of an Ed25519 key (RFC 8410): the key bytes are the
// only variable part, so wrapping is concatenation and needs no ASN.1 library.
const PKCS8_PREFIX = Buffer.from("302e020100300506032b657004220420", "hex");
const SPKI_PREFIX = Buffer.from("302a300506032b6570032100", "hex");

const NODE_ID_PATTERN = /^metropolis-[0-9a-f]{32}$/;

/** An Ed25519 key pair in canonical form. */
export interface Ed25519KeyPair {
  /** The raw 32-byte public key. */
  readonly publicKey: Buffer;
  /** The 32-byte private key seed. */
  readonly privateKey: Buffer;
}

/** A key pair as DER: SubjectPublicKeyInfo and PKCS#8. */
export interface DerKeyPair {
  readonly publicKey: Buffer;
  readonly privateKey: Buffer;
}

/**
 * Generates a fresh key pair from the system CSPRNG, encoded (DER) by the
 * generation itself: the one way this repository generates key pairs.
 *
 * A key object that `generateKeyPairSync` returns must not be used. In
 * Node 20 using one (exporting it, an agreement) holds the key's lock while
 * it allocates; a garbage collection then may finalize the generation job,
 * unreachable by then, whose destructor takes the same lock, and the process
 * hangs for good. Seen in the scale simulator's enrolment of 5,000 nodes; a
 * loop of generations under `--stress-compaction` hangs within seconds (see
 * keys.test.ts). Key objects made from these encodings have locks of their
 * own.
 */
export function generateDerKeyPair(type: "ed25519" | "x25519"): DerKeyPair {
  const privateKeyEncoding = { format: "der", type: "pkcs8" } as const;
  const publicKeyEncoding = { format: "der", type: "spki" } as const;
  return type === "ed25519"
    ? generateKeyPairSync("ed25519", { privateKeyEncoding, publicKeyEncoding })
    : generateKeyPairSync("x25519", { privateKeyEncoding, publicKeyEncoding });
}

/** Generates a fresh Ed25519 key pair from the system CSPRNG (see {@link generateDerKeyPair}). */
export function generateKeyPair(): Ed25519KeyPair {
  const { privateKey, publicKey } = generateDerKeyPair("ed25519");
  return {
    publicKey: unwrapDer(publicKey, SPKI_PREFIX, ED25519_PUBLIC_KEY_LENGTH, "public key"),
    privateKey: unwrapDer(privateKey, PKCS8_PREFIX, ED25519_SEED_LENGTH, "private key"),
  };
}

/** The `length` key bytes of a DER encoding with the fixed `prefix` (RFC 8410). */
function unwrapDer(der: Buffer, prefix: Buffer, length: number, what: string): Buffer {
  if (der.length !== prefix.length + length || !der.subarray(0, prefix.length).equals(prefix))
    throw new InvalidKeyError(`generated ${what} is not in the expected RFC 8410 DER form`);
  return Buffer.from(der.subarray(prefix.length));
}

/**
 * Throws {@link InvalidKeyError} unless `publicKey` is a raw 32-byte Ed25519
 * public key. `what` names the key in the message.
 */
export function assertPublicKey(publicKey: Uint8Array, what = "Ed25519 public key"): void {
  if (!(publicKey instanceof Uint8Array)) {
    throw new InvalidKeyError(`${what} must be bytes, got ${typeof publicKey}`);
  }
  if (publicKey.length !== ED25519_PUBLIC_KEY_LENGTH) {
    throw new InvalidKeyError(
      `${what} must be ${ED25519_PUBLIC_KEY_LENGTH} raw bytes, got ${publicKey.length}`,
    );
  }
}

/**
 * Throws {@link InvalidKeyError} unless `privateKey` is a 32-byte Ed25519
 * seed. `what` names the key in the message.
 */
export function assertPrivateKey(privateKey: Uint8Array, what = "Ed25519 private key"): void {
  if (!(privateKey instanceof Uint8Array)) {
    throw new InvalidKeyError(`${what} must be bytes, got ${typeof privateKey}`);
  }
  if (privateKey.length !== ED25519_SEED_LENGTH) {
    throw new InvalidKeyError(
      `${what} must be a ${ED25519_SEED_LENGTH}-byte seed, got ${privateKey.length} bytes` +
        (privateKey.length === 64 ? " (a 64-byte seed||public key? store only the seed)" : ""),
    );
  }
}

/**
 * The node ID of a node identity key: `metropolis-` followed by the hex of the
 * first 16 bytes of the raw public key, as in Monogon. It is the CN and DNS
 * SAN of the node's certificates, so peers can check identity by name.
 */
export function nodeIdFromPublicKey(publicKey: Uint8Array): string {
  assertPublicKey(publicKey, "node public key");
  return NODE_ID_PREFIX + Buffer.from(publicKey.subarray(0, 16)).toString("hex");
}

/** True when `value` has the shape of a node ID (it does not say which key it belongs to). */
export function isNodeId(value: string): boolean {
  return NODE_ID_PATTERN.test(value);
}

/** The raw public key belonging to a private key seed. */
export function publicKeyFromPrivateKey(privateKey: Uint8Array): Buffer {
  const jwk = createPublicKey(privateKeyObject(privateKey)).export({ format: "jwk" });
  return Buffer.from(jwk.x as string, "base64url");
}

/** PKCS#8 DER of a private key seed, as OpenSSL, grpc-js and etcd want it. */
export function privateKeyToPkcs8(privateKey: Uint8Array): Buffer {
  assertPrivateKey(privateKey);
  return Buffer.concat([PKCS8_PREFIX, privateKey]);
}

/** PKCS#8 PEM (`PRIVATE KEY`) of a private key seed. */
export function privateKeyToPem(privateKey: Uint8Array): string {
  return encodePem("PRIVATE KEY", privateKeyToPkcs8(privateKey));
}

/**
 * The seed of a PKCS#8 private key given as DER bytes or PEM text. Throws
 * {@link InvalidKeyError} for anything that is not a private key and
 * {@link WrongKeyTypeError} for a private key of another algorithm.
 */
export function privateKeyFromPkcs8(input: Uint8Array | string): Buffer {
  const der = derOf(input, "PRIVATE KEY", "private key");
  let key: KeyObject;
  try {
    key = createPrivateKey({ key: der, format: "der", type: "pkcs8" });
  } catch (cause) {
    throw new InvalidKeyError(`not a PKCS#8 private key: ${describeCause(cause)}`, { cause });
  }
  requireEd25519(key, "private key");
  return Buffer.from(key.export({ format: "jwk" }).d as string, "base64url");
}

/** SubjectPublicKeyInfo DER of a raw public key. */
export function publicKeyToSpki(publicKey: Uint8Array): Buffer {
  assertPublicKey(publicKey);
  return Buffer.concat([SPKI_PREFIX, publicKey]);
}

/** SubjectPublicKeyInfo PEM (`PUBLIC KEY`) of a raw public key. */
export function publicKeyToPem(publicKey: Uint8Array): string {
  return encodePem("PUBLIC KEY", publicKeyToSpki(publicKey));
}

/**
 * The raw public key of a SubjectPublicKeyInfo given as DER bytes or PEM text.
 * Throws {@link InvalidKeyError} for anything that is not a public key and
 * {@link WrongKeyTypeError} for a public key of another algorithm.
 */
export function publicKeyFromSpki(input: Uint8Array | string, what = "public key"): Buffer {
  const der = derOf(input, "PUBLIC KEY", what);
  let key: KeyObject;
  try {
    key = createPublicKey({ key: der, format: "der", type: "spki" });
  } catch (cause) {
    throw new InvalidKeyError(`${what} is not a SubjectPublicKeyInfo: ${describeCause(cause)}`, {
      cause,
    });
  }
  return rawPublicKey(key, what);
}

/** The raw 32-byte key of a Node public KeyObject, which must be Ed25519 ({@link WrongKeyTypeError} otherwise). */
export function rawPublicKey(key: KeyObject, what = "public key"): Buffer {
  requireEd25519(key, what);
  return Buffer.from(key.export({ format: "jwk" }).x as string, "base64url");
}

/** A Node KeyObject for a raw public key, for `crypto.verify` and `X509Certificate.verify`. */
export function publicKeyObject(publicKey: Uint8Array): KeyObject {
  return createPublicKey({ key: publicKeyToSpki(publicKey), format: "der", type: "spki" });
}

/** A Node KeyObject for a private key seed, for `crypto.sign`. */
export function privateKeyObject(privateKey: Uint8Array): KeyObject {
  return createPrivateKey({ key: privateKeyToPkcs8(privateKey), format: "der", type: "pkcs8" });
}

/** A non-extractable WebCrypto signing key, which @peculiar/x509 signs certificates and CRLs with. */
export function importSigningKey(privateKey: Uint8Array): Promise<WebCrypto.CryptoKey> {
  return webcrypto.subtle.importKey(
    "pkcs8",
    privateKeyToPkcs8(privateKey),
    ED25519_ALGORITHM,
    false,
    ["sign"],
  );
}

/** A WebCrypto verification key, which @peculiar/x509 embeds as a certificate's subject key. */
export function importVerifyingKey(publicKey: Uint8Array): Promise<WebCrypto.CryptoKey> {
  assertPublicKey(publicKey);
  return webcrypto.subtle.importKey("raw", publicKey, ED25519_ALGORITHM, true, ["verify"]);
}

function requireEd25519(key: KeyObject, what: string): void {
  if (key.asymmetricKeyType !== "ed25519") {
    throw new WrongKeyTypeError(what, key.asymmetricKeyType ?? "unknown");
  }
}

function derOf(input: Uint8Array | string, label: "PRIVATE KEY" | "PUBLIC KEY", what: string) {
  try {
    if (typeof input === "string") return decodePem(input, label);
    if (looksLikePem(input)) return decodePem(Buffer.from(input).toString("latin1"), label);
  } catch (cause) {
    if (cause instanceof InvalidPemError) {
      throw new InvalidKeyError(`${what}: ${cause.message}`, { cause });
    }
    throw cause;
  }
  if (!(input instanceof Uint8Array)) {
    throw new InvalidKeyError(`${what} must be DER bytes or PEM text, got ${typeof input}`);
  }
  return Buffer.from(input);
}
