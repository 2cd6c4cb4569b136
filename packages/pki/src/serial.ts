/**
 * Certificate serial numbers. Serials are random rather than counted because
 * several curators issue from the same CA without coordinating; 127 random
 * bits (as Monogon, and below Go's and RFC 5280's 20-octet limit) make a
 * collision between independently issued certificates negligible, and a
 * positive value below 2^127 always fits 16 DER octets without a sign byte.
 */
import { randomBytes } from "node:crypto";

/** Exclusive upper bound of generated serials: every serial is in [1, 2^127). */
export const SERIAL_LIMIT = 1n << 127n;

/** A fresh random serial in [1, 2^127). */
export function randomSerial(): bigint {
  for (;;) {
    const bytes = randomBytes(16);
    bytes[0] = bytes[0] & 0x7f;
    const serial = BigInt("0x" + bytes.toString("hex"));
    // Zero is not a positive integer (RFC 5280 4.1.2.2); retrying costs one draw in 2^127.
    if (serial !== 0n) return serial;
  }
}

/** The big-endian hex of a non-negative serial, as @peculiar/x509 takes it. */
export function serialToHex(serial: bigint): string {
  if (serial < 0n) throw new RangeError(`serial must not be negative, got ${serial}`);
  const hex = serial.toString(16);
  return hex.length % 2 === 0 ? hex : "0" + hex;
}

/** The serial of a hex string as @peculiar/x509 reports it (magnitude, sign octet removed). */
export function serialFromHex(hex: string): bigint {
  return hex.length === 0 ? 0n : BigInt("0x" + hex);
}
