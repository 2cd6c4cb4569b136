/**
 * The PEM file codecs: what they write reads back, and what is not the
 * expected PEM is refused (the file's reader names the file).
 */
import {
  CertificateAuthority,
  CertificateParseError,
  certificatePemCodec,
  encodePem,
  generateKeyPair,
  InvalidKeyError,
  privateKeyPemCodec,
  privateKeyToPem,
} from "../src";

it("round-trips a certificate's DER through one CERTIFICATE block", async () => {
  const ca = await CertificateAuthority.create();
  const encoded = Buffer.from(certificatePemCodec.encode(ca.certificate.der));
  expect(encoded.toString()).toBe(ca.certificate.toPem());
  expect(certificatePemCodec.decode(encoded)).toEqual(ca.certificate.der);
});

it("round-trips an Ed25519 seed through one PKCS#8 PRIVATE KEY block", () => {
  const { privateKey } = generateKeyPair();
  const encoded = Buffer.from(privateKeyPemCodec.encode(Buffer.from(privateKey)));
  expect(encoded.toString()).toBe(privateKeyToPem(privateKey));
  expect(privateKeyPemCodec.decode(encoded)).toEqual(Buffer.from(privateKey));
});

it.each([
  ["nothing", ""],
  ["garbage", "garbage"],
  ["a private key", privateKeyToPem(generateKeyPair().privateKey)],
  ["a CERTIFICATE block that is no certificate", encodePem("CERTIFICATE", Buffer.from("x"))],
])("refuses %s as a certificate", (_what, text) => {
  expect(() => certificatePemCodec.decode(Buffer.from(text))).toThrow(CertificateParseError);
});

it.each([
  ["nothing", ""],
  ["garbage", "garbage"],
  ["a PRIVATE KEY block that is no key", encodePem("PRIVATE KEY", Buffer.from("x"))],
])("refuses %s as a private key", (_what, text) => {
  expect(() => privateKeyPemCodec.decode(Buffer.from(text))).toThrow(InvalidKeyError);
});
