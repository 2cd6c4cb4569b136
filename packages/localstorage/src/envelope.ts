/**
 * The AES-256-GCM envelope shared by encrypted data files, the data key check
 * value, the sealed configuration and the cluster's secrets in etcd. One
 * format, one implementation: the callers differ only in the key, a 4-byte
 * magic that says what the bytes are, and the associated data that binds them
 * to where they belong.
 *
 * Two layouts, told apart by the version byte:
 *
 * ```
 * version 1: magic (4) | 1 (1) |               nonce (12) | tag (16) | ciphertext
 * version 2: magic (4) | 2 (1) | key id (4)  | nonce (12) | tag (16) | ciphertext
 * ```
 *
 * Version 2 names the key it was sealed under (a big-endian uint32, never 0),
 * so that a keyring of several keys can be rotated: the opener picks the key
 * by its id before decrypting. Under version 2 the header (magic, version, key
 * id) is authenticated too, so a key id cannot be swapped without the tag
 * failing. Version 1 stays what it always was, so files written before keep
 * opening.
 */
import { createCipheriv, createDecipheriv, randomBytes } from "node:crypto";

/** Length in bytes of every key used with an envelope (AES-256). */
export const keyLength = 32;

const plainVersion = 1;
const keyedVersion = 2;
const nonceLength = 12;
const tagLength = 16;
const keyIdLength = 4;
const maxKeyId = 0xffff_ffff;

/** Outcome of {@link openEnvelope}; a failure says why, for the caller's error message. */
export type OpenResult =
  | { readonly ok: true; readonly plaintext: Buffer }
  | { readonly ok: false; readonly reason: string };

/** Outcome of {@link envelopeKeyId}. */
export type KeyIdResult =
  { readonly ok: true; readonly keyId: number } | { readonly ok: false; readonly reason: string };

/**
 * Encrypts and authenticates `plaintext` under `key`. `associatedData` is
 * authenticated but not stored: opening needs the same value, which is how an
 * envelope moved to another place (another file, another etcd key, another
 * purpose) is caught. With `keyId` (1 to 2^32-1) the envelope is of version 2
 * and carries that id; without, of version 1.
 */
export function sealEnvelope(
  key: Uint8Array,
  magic: string,
  associatedData: string | Uint8Array,
  plaintext: Uint8Array,
  keyId?: number,
): Buffer {
  const header =
    keyId === undefined
      ? Buffer.concat([magicBytes(magic), Buffer.of(plainVersion)])
      : Buffer.concat([magicBytes(magic), Buffer.of(keyedVersion), keyIdBytes(keyId)]);
  const nonce = randomBytes(nonceLength);
  const cipher = createCipheriv("aes-256-gcm", key, nonce, { authTagLength: tagLength });
  cipher.setAAD(additionalData(header, associatedData));
  const ciphertext = Buffer.concat([cipher.update(plaintext), cipher.final()]);
  return Buffer.concat([header, nonce, cipher.getAuthTag(), ciphertext]);
}

/**
 * The key id a version 2 envelope names, read without decrypting: the caller
 * picks the key with it, then calls {@link openEnvelope}. A version 1 envelope,
 * another magic or a truncated header is a failure with its reason.
 */
export function envelopeKeyId(magic: string, envelope: Uint8Array): KeyIdResult {
  const bytes = asBuffer(envelope);
  const checked = checkHeader(bytes, magic);
  if (!checked.ok) return checked;
  if (checked.headerLength === 5) {
    return { ok: false, reason: "the envelope names no key id (version 1)" };
  }
  return { ok: true, keyId: bytes.readUInt32BE(5) };
}

/**
 * Verifies and decrypts an envelope made by {@link sealEnvelope}, of either
 * version. Returns a reason instead of throwing so that each caller can raise
 * the error that means something to its own caller (corrupt file, wrong key,
 * foreign seal).
 */
export function openEnvelope(
  key: Uint8Array,
  magic: string,
  associatedData: string | Uint8Array,
  envelope: Uint8Array,
): OpenResult {
  const bytes = asBuffer(envelope);
  const checked = checkHeader(bytes, magic);
  if (!checked.ok) return checked;
  const headerLength = checked.headerLength;
  const header = bytes.subarray(0, headerLength);
  const nonce = bytes.subarray(headerLength, headerLength + nonceLength);
  const tag = bytes.subarray(headerLength + nonceLength, headerLength + nonceLength + tagLength);
  const decipher = createDecipheriv("aes-256-gcm", key, nonce, { authTagLength: tagLength });
  decipher.setAAD(additionalData(header, associatedData));
  decipher.setAuthTag(tag);
  try {
    const plaintext = Buffer.concat([
      decipher.update(bytes.subarray(headerLength + nonceLength + tagLength)),
      decipher.final(),
    ]);
    return { ok: true, plaintext };
  } catch {
    return {
      ok: false,
      reason: "authentication failed (tampered with, moved, or encrypted under another key)",
    };
  }
}

/** Whether `bytes` starts like an envelope of `magic` (any version): a cheap test, not a check. */
export function hasEnvelopeMagic(magic: string, bytes: Uint8Array): boolean {
  return asBuffer(bytes).subarray(0, 4).equals(magicBytes(magic));
}

type HeaderCheck =
  | { readonly ok: true; readonly headerLength: number }
  | { readonly ok: false; readonly reason: string };

function checkHeader(bytes: Buffer, magic: string): HeaderCheck {
  if (bytes.length < 5) return truncated(bytes.length, 5 + nonceLength + tagLength);
  if (!bytes.subarray(0, 4).equals(magicBytes(magic))) {
    return { ok: false, reason: `not a "${magic}" envelope (wrong magic)` };
  }
  const version = bytes[4];
  if (version !== plainVersion && version !== keyedVersion) {
    return { ok: false, reason: `unsupported envelope version ${version}` };
  }
  const headerLength = version === plainVersion ? 5 : 5 + keyIdLength;
  if (bytes.length < headerLength + nonceLength + tagLength) {
    return truncated(bytes.length, headerLength + nonceLength + tagLength);
  }
  if (version === keyedVersion && bytes.readUInt32BE(5) === 0) {
    return { ok: false, reason: "the envelope names key id 0, which no key has" };
  }
  return { ok: true, headerLength };
}

function truncated(length: number, minimum: number): HeaderCheck {
  return {
    ok: false,
    reason: `truncated: ${length} bytes, an envelope has at least ${minimum}`,
  };
}

/**
 * The GCM additional data: version 1 authenticates the caller's associated
 * data alone (as it always did); version 2 also its header, which has a fixed
 * length, so the concatenation is unambiguous.
 */
function additionalData(header: Buffer, associatedData: string | Uint8Array): Buffer {
  const data =
    typeof associatedData === "string"
      ? Buffer.from(associatedData, "utf8")
      : asBuffer(associatedData);
  return header.length === 5 ? data : Buffer.concat([header, data]);
}

function keyIdBytes(keyId: number): Buffer {
  if (!Number.isInteger(keyId) || keyId < 1 || keyId > maxKeyId) {
    throw new RangeError(`envelope key id must be an integer from 1 to ${maxKeyId}, got ${keyId}`);
  }
  const bytes = Buffer.alloc(keyIdLength);
  bytes.writeUInt32BE(keyId);
  return bytes;
}

function asBuffer(bytes: Uint8Array): Buffer {
  return Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength);
}

function magicBytes(magic: string): Buffer {
  const bytes = Buffer.from(magic, "ascii");
  if (bytes.length !== 4) {
    throw new RangeError(`envelope magic must be 4 ASCII bytes, got ${JSON.stringify(magic)}`);
  }
  return bytes;
}
