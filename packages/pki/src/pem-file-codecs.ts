/**
 * Codecs of the PEM files a node keeps (its certificates, the etcd peer
 * key), in the shape of @metropolis/localstorage's `Codec` — `decode(bytes)`
 * to a value, `encode(value)` to bytes — without depending on that package.
 * A file declared as raw bytes is read through `file.as(certificatePemCodec)`:
 * whatever the parsers here refuse, localstorage turns into its
 * `FileCorruptedError`, which names the file. A PEM error alone ("found no
 * PEM block") leaves an operator guessing which of a node's files is broken.
 */
import { privateKeyFromPkcs8, privateKeyToPem } from "./ed25519";
import { parseCertificate } from "./parse-certificate";
import { encodePem } from "./pem";

/** Turns a file's bytes into a `T` and back; `decode` throws on what it does not accept. */
export interface PemFileCodec<T> {
  decode(bytes: Buffer): T;
  encode(value: T): Uint8Array;
}

/**
 * A file holding one PEM `CERTIFICATE` block. The value is the certificate's
 * DER; reading parses it as an Ed25519 certificate, so a block that merely
 * looks right is refused too.
 */
export const certificatePemCodec: PemFileCodec<Buffer> = {
  decode: (bytes) => parseCertificate(bytes.toString("latin1")).der,
  encode: (der) => Buffer.from(encodePem("CERTIFICATE", der)),
};

/** A file holding one PKCS#8 PEM `PRIVATE KEY` block of an Ed25519 key. The value is its 32-byte seed. */
export const privateKeyPemCodec: PemFileCodec<Buffer> = {
  decode: (bytes) => privateKeyFromPkcs8(bytes.toString("latin1")),
  encode: (seed) => Buffer.from(privateKeyToPem(seed)),
};
