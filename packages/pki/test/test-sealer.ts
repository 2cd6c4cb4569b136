/**
 * A stand-in for consensus' cluster secrets sealer, for the pki tests (pki
 * cannot import consensus): AES-256-GCM under one random key, with the key the
 * value is stored at as associated data, so a value moved to another key does
 * not open. It refuses to open what it did not seal, as the real one does.
 */
import { createCipheriv, createDecipheriv, randomBytes } from "node:crypto";
import type { SecretSealer } from "@metropolis/pki";

/** Thrown by the test sealer for a value it cannot open. */
export class TestSealerError extends Error {
  override readonly name = "TestSealerError";
}

const magic = Buffer.from("TSTS");

/** A sealer with a fresh random key; `sealed` counts what it sealed. */
export function testSealer(): SecretSealer & { readonly sealed: string[] } {
  const key = randomBytes(32);
  const sealed: string[] = [];
  return {
    sealed,
    seal(at: string, plaintext: Uint8Array): Buffer {
      sealed.push(at);
      const nonce = randomBytes(12);
      const cipher = createCipheriv("aes-256-gcm", key, nonce);
      cipher.setAAD(Buffer.from(at));
      const body = Buffer.concat([cipher.update(plaintext), cipher.final()]);
      return Buffer.concat([magic, nonce, cipher.getAuthTag(), body]);
    },
    async open(at: string, value: Uint8Array): Promise<Buffer> {
      const bytes = Buffer.from(value);
      if (!bytes.subarray(0, 4).equals(magic)) {
        throw new TestSealerError(`${at} is not sealed`);
      }
      const decipher = createDecipheriv("aes-256-gcm", key, bytes.subarray(4, 16));
      decipher.setAAD(Buffer.from(at));
      decipher.setAuthTag(bytes.subarray(16, 32));
      try {
        return Buffer.concat([decipher.update(bytes.subarray(32)), decipher.final()]);
      } catch {
        throw new TestSealerError(`${at}: authentication failed`);
      }
    },
  };
}
