import { createPrivateKey, createPublicKey, generateKeyPairSync, sign, verify } from "node:crypto";
import {
  generateKeyPair,
  InvalidKeyError,
  isNodeId,
  nodeIdFromPublicKey,
  privateKeyFromPkcs8,
  privateKeyToPem,
  privateKeyToPkcs8,
  publicKeyFromPrivateKey,
  publicKeyFromSpki,
  publicKeyToPem,
  WrongKeyTypeError,
} from "@metropolis/pki";

describe("Ed25519 keys", () => {
  it("generates raw 32-byte public keys and 32-byte seeds that belong together", () => {
    const pair = generateKeyPair();
    expect(pair.publicKey).toHaveLength(32);
    expect(pair.privateKey).toHaveLength(32);
    expect(publicKeyFromPrivateKey(pair.privateKey).equals(pair.publicKey)).toBe(true);
    expect(generateKeyPair().privateKey.equals(pair.privateKey)).toBe(false);
  });

  it("converts to PKCS#8 and SPKI PEM that Node/OpenSSL sign and verify with", () => {
    const pair = generateKeyPair();
    const privatePem = privateKeyToPem(pair.privateKey);
    expect(privatePem).toMatch(/^-----BEGIN PRIVATE KEY-----\n/);
    const message = Buffer.from("metropolis");
    const signature = sign(null, message, createPrivateKey(privatePem));
    expect(verify(null, message, createPublicKey(publicKeyToPem(pair.publicKey)), signature)).toBe(
      true,
    );
  });

  it("round-trips PKCS#8 DER and PEM back to the seed, and SPKI back to the raw key", () => {
    const pair = generateKeyPair();
    expect(privateKeyFromPkcs8(privateKeyToPkcs8(pair.privateKey)).equals(pair.privateKey)).toBe(
      true,
    );
    expect(privateKeyFromPkcs8(privateKeyToPem(pair.privateKey)).equals(pair.privateKey)).toBe(
      true,
    );
    expect(publicKeyFromSpki(publicKeyToPem(pair.publicKey)).equals(pair.publicKey)).toBe(true);
    // Keys made by OpenSSL directly parse too.
    const { privateKey } = generateKeyPairSync("ed25519");
    const seed = privateKeyFromPkcs8(privateKey.export({ format: "pem", type: "pkcs8" }));
    expect(seed).toHaveLength(32);
  });

  it("derives the node ID from the first 16 bytes of the public key", () => {
    const publicKey = Buffer.alloc(32);
    for (let i = 0; i < 32; i++) publicKey[i] = i;
    expect(nodeIdFromPublicKey(publicKey)).toBe("metropolis-000102030405060708090a0b0c0d0e0f");
    expect(isNodeId(nodeIdFromPublicKey(generateKeyPair().publicKey))).toBe(true);
    expect(isNodeId("metropolis-xyz")).toBe(false);
  });

  it("rejects public keys and seeds of the wrong length, naming the length", () => {
    expect(() => nodeIdFromPublicKey(Buffer.alloc(31))).toThrow(InvalidKeyError);
    expect(() => nodeIdFromPublicKey(Buffer.alloc(31))).toThrow(/32 raw bytes, got 31/);
    expect(() => privateKeyToPem(Buffer.alloc(64))).toThrow(/32-byte seed, got 64 bytes/);
    expect(() => publicKeyFromPrivateKey(Buffer.alloc(0))).toThrow(InvalidKeyError);
  });

  it("rejects keys of other algorithms with WrongKeyTypeError naming the type", () => {
    const rsa = generateKeyPairSync("rsa", { modulusLength: 1024 });
    const rsaPem = rsa.privateKey.export({ format: "pem", type: "pkcs8" });
    expect(() => privateKeyFromPkcs8(rsaPem)).toThrow(WrongKeyTypeError);
    expect(() => privateKeyFromPkcs8(rsaPem)).toThrow(/private key is of key type rsa/);
    const x25519 = generateKeyPairSync("x25519");
    expect(() =>
      publicKeyFromSpki(x25519.publicKey.export({ format: "der", type: "spki" })),
    ).toThrow(/key type x25519, but Metropolis only uses Ed25519/);
  });

  it("rejects garbage with InvalidKeyError", () => {
    expect(() => privateKeyFromPkcs8(Buffer.from("not a key"))).toThrow(InvalidKeyError);
    expect(() =>
      privateKeyFromPkcs8("-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----"),
    ).toThrow(/expected a PEM "PRIVATE KEY" block, found "CERTIFICATE"/);
    expect(() => publicKeyFromSpki(Buffer.alloc(44, 1))).toThrow(InvalidKeyError);
  });
});
