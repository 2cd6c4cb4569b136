/**
 * The AES-256-GCM envelope shared by encrypted data files, the data key check
 * value and the sealed configuration. One format, one implementation: the
 * callers differ only in the key, a 4-byte magic that says what the bytes are,
 * and the associated data that binds them to where they belong.
 *
 * Layout: magic (4) | version (1) | nonce (12) | tag (16) | ciphertext.
 */
import { createCipheriv, createDecipheriv, randomBytes } from "node:crypto";

/** Length in bytes of every key used with an envelope (AES-256). */
export const keyLength = 32;

const version = 1;
const nonceLength = 12;
const tagLength = 16;
const headerLength = 4 + 1 + nonceLength + tagLength;

/** Outcome of {@link openEnvelope}; a failure says why, for the caller's error message. */
export type OpenResult =
  | { readonly ok: true; readonly plaintext: Buffer }
  | { readonly ok: false; readonly reason: string };

/**
 * Encrypts and authenticates `plaintext` under `key`. `associatedData` is
 * authenticated but not stored: opening needs the same value, which is how an
 * envelope moved to another place (another file, another purpose) is caught.
 */
export function sealEnvelope(
  key: Uint8Array,
  magic: string,
  associatedData: string,
  plaintext: Uint8Array,
): Buffer {
  const nonce = randomBytes(nonceLength);
  const cipher = createCipheriv("aes-256-gcm", key, nonce, { authTagLength: tagLength });
  cipher.setAAD(Buffer.from(associatedData, "utf8"));
  const ciphertext = Buffer.concat([cipher.update(plaintext), cipher.final()]);
  return Buffer.concat([
    magicBytes(magic),
    Buffer.of(version),
    nonce,
    cipher.getAuthTag(),
    ciphertext,
  ]);
}

/**
 * Verifies and decrypts an envelope made by {@link sealEnvelope}. Returns a
 * reason instead of throwing so that each caller can raise the error that
 * means something to its own caller (corrupt file, wrong key, foreign seal).
 */
export function openEnvelope(
  key: Uint8Array,
  magic: string,
  associatedData: string,
  envelope: Uint8Array,
): OpenResult {
  const bytes = Buffer.from(envelope.buffer, envelope.byteOffset, envelope.byteLength);
  if (bytes.length < headerLength) {
    return {
      ok: false,
      reason: `truncated: ${bytes.length} bytes, an envelope has at least ${headerLength}`,
    };
  }
  if (!bytes.subarray(0, 4).equals(magicBytes(magic))) {
    return { ok: false, reason: `not a "${magic}" envelope (wrong magic)` };
  }
  if (bytes[4] !== version) {
    return { ok: false, reason: `unsupported envelope version ${bytes[4]}` };
  }
  const nonce = bytes.subarray(5, 5 + nonceLength);
  const tag = bytes.subarray(5 + nonceLength, headerLength);
  const decipher = createDecipheriv("aes-256-gcm", key, nonce, { authTagLength: tagLength });
  decipher.setAAD(Buffer.from(associatedData, "utf8"));
  decipher.setAuthTag(tag);
  try {
    const plaintext = Buffer.concat([
      decipher.update(bytes.subarray(headerLength)),
      decipher.final(),
    ]);
    return { ok: true, plaintext };
  } catch {
    return {
      ok: false,
      reason: "authentication failed (tampered with, or encrypted under another key)",
    };
  }
}

function magicBytes(magic: string): Buffer {
  const bytes = Buffer.from(magic, "ascii");
  if (bytes.length !== 4) {
    throw new RangeError(`envelope magic must be 4 ASCII bytes, got ${JSON.stringify(magic)}`);
  }
  return bytes;
}
