/**
 * The one AES-256-GCM envelope: version 1 (no key id, as files have always
 * been written) and version 2 (a key id in the authenticated header, for the
 * cluster's rotatable secrets keyring).
 */
import { randomBytes } from "node:crypto";
import {
  envelopeKeyId,
  hasEnvelopeMagic,
  openEnvelope,
  sealEnvelope,
} from "@metropolis/localstorage";

const key = randomBytes(32);
const secret = Buffer.from("a secret worth 32 bytes of space");

describe("envelope", () => {
  it("version 1 seals and opens as before, and names no key id", () => {
    const sealed = sealEnvelope(key, "TEST", "here", secret);
    expect(sealed[4]).toBe(1);
    expect(openEnvelope(key, "TEST", "here", sealed)).toEqual({ ok: true, plaintext: secret });
    expect(envelopeKeyId("TEST", sealed)).toEqual({
      ok: false,
      reason: "the envelope names no key id (version 1)",
    });
  });

  it("version 2 carries its key id, readable before opening", () => {
    const sealed = sealEnvelope(key, "TEST", "here", secret, 0x01020304);
    expect(sealed[4]).toBe(2);
    expect(sealed.subarray(5, 9)).toEqual(Buffer.of(1, 2, 3, 4));
    expect(envelopeKeyId("TEST", sealed)).toEqual({ ok: true, keyId: 0x01020304 });
    expect(openEnvelope(key, "TEST", "here", sealed)).toEqual({ ok: true, plaintext: secret });
    expect(hasEnvelopeMagic("TEST", sealed)).toBe(true);
    expect(hasEnvelopeMagic("ELSE", sealed)).toBe(false);
    expect(sealed.includes(secret)).toBe(false);
  });

  it("a changed key id, another place, another key or a flipped bit do not open", () => {
    const sealed = sealEnvelope(key, "TEST", Buffer.from("namespaced:x/a"), secret, 7);
    const failed = { ok: false, reason: expect.stringMatching(/^authentication failed/) };
    const relabelled = Buffer.from(sealed);
    relabelled.writeUInt32BE(8, 5);
    expect(openEnvelope(key, "TEST", "namespaced:x/a", relabelled)).toEqual(failed);
    expect(openEnvelope(key, "TEST", "namespaced:x/b", sealed)).toEqual(failed);
    expect(openEnvelope(randomBytes(32), "TEST", "namespaced:x/a", sealed)).toEqual(failed);
    const flipped = Buffer.from(sealed);
    flipped[flipped.length - 1] ^= 1;
    expect(openEnvelope(key, "TEST", "namespaced:x/a", flipped)).toEqual(failed);
    expect(openEnvelope(key, "TEST", "namespaced:x/a", sealed).ok).toBe(true);
  });

  it("refuses key id 0, truncation, another magic and unknown versions with a reason", () => {
    expect(() => sealEnvelope(key, "TEST", "", secret, 0)).toThrow(RangeError);
    expect(() => sealEnvelope(key, "TEST", "", secret, 2 ** 32)).toThrow(RangeError);
    const sealed = sealEnvelope(key, "TEST", "", secret, 1);
    const zero = Buffer.from(sealed);
    zero.writeUInt32BE(0, 5);
    expect(envelopeKeyId("TEST", zero)).toEqual({
      ok: false,
      reason: "the envelope names key id 0, which no key has",
    });
    expect(openEnvelope(key, "TEST", "", sealed.subarray(0, 20))).toEqual({
      ok: false,
      reason: "truncated: 20 bytes, an envelope has at least 37",
    });
    expect(openEnvelope(key, "ELSE", "", sealed)).toEqual({
      ok: false,
      reason: 'not a "ELSE" envelope (wrong magic)',
    });
    const future = Buffer.from(sealed);
    future[4] = 3;
    expect(envelopeKeyId("TEST", future)).toEqual({
      ok: false,
      reason: "unsupported envelope version 3",
    });
  });
});
