/**
 * The cluster secrets keyring and its wrapping for one member, without etcd:
 * sealing and opening by key id, what does not open (unknown id, tampering, a
 * value moved to another key, plaintext), rotation's keyring steps, and a
 * wrapped copy that opens only for its member at its place.
 */
import { randomBytes } from "node:crypto";
import { isSealedSecret, SecretKeyring, sealedKeyId, unwrapKeyring } from "@metropolis/consensus";
import {
  KeyringError,
  NotSealedError,
  SecretAuthenticationError,
  UnknownSecretKeyError,
} from "../src/errors";
import { wrapKeyring } from "../src/keyring-wrap";
import { generateKeyPair } from "@metropolis/pki";
import { priv } from "@metropolis/proto";

const at = "namespaced:curator//node_secrets/n/cluster_unlock_key";
const secret = randomBytes(32);

describe("SecretKeyring", () => {
  it("seals under the current key, names its id, and opens with any key it holds", () => {
    const one = SecretKeyring.generate();
    expect(one.ids).toEqual([1]);
    const sealed = one.seal(at, secret);
    expect(isSealedSecret(sealed)).toBe(true);
    expect(sealedKeyId(sealed)).toBe(1);
    expect(sealed.includes(secret)).toBe(false);
    expect(one.open(at, sealed)).toEqual(secret);

    const { keyring: two, id } = one.withNewKey();
    expect(id).toBe(2);
    expect(two.currentId).toBe(1); // a new key does not seal until made current
    const current = two.withCurrent(2);
    expect(sealedKeyId(current.seal(at, secret))).toBe(2);
    expect(current.open(at, sealed)).toEqual(secret);
    expect(() => current.without([2])).toThrow(KeyringError);
    const retired = current.without([1]);
    expect(retired.ids).toEqual([2]);
    expect(() => retired.open(at, sealed)).toThrow(UnknownSecretKeyError);
    expect(() => retired.open(at, sealed)).toThrow(
      `secret at "${at}" does not open: unknown key id 1 (the keyring holds 2)`,
    );
  });

  it("refuses tampering, a value moved to another key, another keyring's value and plaintext", () => {
    const keyring = SecretKeyring.generate();
    const sealed = keyring.seal(at, secret);
    const flipped = Buffer.from(sealed);
    flipped[flipped.length - 1] ^= 1;
    expect(() => keyring.open(at, flipped)).toThrow(SecretAuthenticationError);
    const elsewhere = "namespaced:curator//node_secrets/m/cluster_unlock_key";
    expect(() => keyring.open(elsewhere, sealed)).toThrow(
      new RegExp(`secret at "${elsewhere}" does not open: authentication failed`),
    );
    // Same id 1, another key: authentication, not "unknown id".
    expect(() => SecretKeyring.generate().open(at, sealed)).toThrow(SecretAuthenticationError);
    expect(() => keyring.open(at, secret)).toThrow(NotSealedError);
    expect(isSealedSecret(secret)).toBe(false);
    expect(sealedKeyId(secret)).toBeUndefined();
  });

  it("encodes and decodes, and refuses malformed keyrings", () => {
    const keyring = SecretKeyring.generate().withNewKey().keyring;
    const decoded = SecretKeyring.decode(keyring.encode());
    expect(decoded.equals(keyring)).toBe(true);
    const bad = (message: priv.SecretKeyring) =>
      SecretKeyring.decode(priv.SecretKeyring.encode(message).finish());
    const key = randomBytes(32);
    expect(() => bad({ keys: [{ id: 1, key }], currentId: 2 })).toThrow(/current key id 2/);
    expect(() => bad({ keys: [{ id: 0, key }], currentId: 0 })).toThrow(/key id 0/);
    expect(() => bad({ keys: [{ id: 1, key: randomBytes(16) }], currentId: 1 })).toThrow(
      /16 bytes, expected 32/,
    );
    expect(() =>
      bad({
        keys: [
          { id: 1, key },
          { id: 1, key },
        ],
        currentId: 1,
      }),
    ).toThrow(/key id 1 twice/);
  });
});

describe("wrapped keyring", () => {
  const copyAt = "namespaced:consensus/secrets/keyrings/member";

  it("opens only with the member's node key, only at its place", () => {
    const member = generateKeyPair();
    const other = generateKeyPair();
    const keyring = SecretKeyring.generate();
    const wrapped = wrapKeyring(keyring, member.publicKey, copyAt);
    expect(wrapped.includes(keyring.encode())).toBe(false);
    expect(unwrapKeyring(wrapped, member.privateKey, copyAt).equals(keyring)).toBe(true);
    expect(() => unwrapKeyring(wrapped, other.privateKey, copyAt)).toThrow(
      /wrapped for another node key/,
    );
    expect(() => unwrapKeyring(wrapped, member.privateKey, `${copyAt}-moved`)).toThrow(
      /does not open: authentication failed/,
    );
    // A copy that claims the other member as recipient does not open with its key either.
    const message = priv.WrappedSecretKeyring.decode(wrapped);
    const relabelled = priv.WrappedSecretKeyring.encode({
      ...message,
      recipientPublicKey: Buffer.from(other.publicKey),
    }).finish();
    expect(() => unwrapKeyring(relabelled, other.privateKey, copyAt)).toThrow(KeyringError);
    expect(() => unwrapKeyring(Buffer.from("garbage"), member.privateKey, copyAt)).toThrow(
      KeyringError,
    );
  });

  it("wraps afresh each time (a one-time key per copy)", () => {
    const member = generateKeyPair();
    const keyring = SecretKeyring.generate();
    const a = priv.WrappedSecretKeyring.decode(wrapKeyring(keyring, member.publicKey, copyAt));
    const b = priv.WrappedSecretKeyring.decode(wrapKeyring(keyring, member.publicKey, copyAt));
    expect(a.ephemeralPublicKey.equals(b.ephemeralPublicKey)).toBe(false);
    expect(a.recipientPublicKey).toEqual(Buffer.from(member.publicKey));
  });
});
