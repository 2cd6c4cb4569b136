/**
 * PEM armor (RFC 7468) for the three kinds of blocks the PKI hands to TLS
 * consumers: certificates, PKCS#8 private keys and CRLs. etcd stores DER; PEM
 * only exists at the boundary to grpc-js, etcd's flags and Node's TLS.
 */
import { InvalidPemError } from "./errors";

/** The PEM labels the PKI reads and writes. `X509 CRL` is the label OpenSSL expects for CRLs. */
export type PemLabel = "CERTIFICATE" | "PRIVATE KEY" | "PUBLIC KEY" | "X509 CRL";

const PEM_BLOCK = /-----BEGIN ([A-Z0-9 ]+)-----([\s\S]*?)-----END ([A-Z0-9 ]+)-----/;
const BASE64_BODY = /^[A-Za-z0-9+/]*={0,2}$/;

/** Wraps DER bytes into a PEM block with the given label (64-column base64, trailing newline). */
export function encodePem(label: PemLabel, der: Uint8Array): string {
  const base64 = Buffer.from(der).toString("base64");
  const lines = base64.match(/.{1,64}/g) ?? [];
  return `-----BEGIN ${label}-----\n${lines.join("\n")}\n-----END ${label}-----\n`;
}

/**
 * Returns the DER bytes of the first PEM block in `text`, which must carry
 * `label`. Throws {@link InvalidPemError} when there is no block, the block
 * has another label (a private key where a certificate was expected) or its
 * body is not base64.
 */
export function decodePem(text: string, label: PemLabel): Buffer {
  const match = PEM_BLOCK.exec(text);
  if (match === null) {
    throw new InvalidPemError(`expected a PEM "${label}" block, found no PEM block`);
  }
  const [, begin, body, end] = match as unknown as [string, string, string, string];
  if (begin !== end) {
    throw new InvalidPemError(`PEM block begins as "${begin}" but ends as "${end}"`);
  }
  if (begin !== label) {
    throw new InvalidPemError(`expected a PEM "${label}" block, found "${begin}"`);
  }
  const compact = body.replace(/\s+/g, "");
  if (compact.length === 0 || !BASE64_BODY.test(compact)) {
    throw new InvalidPemError(`PEM "${label}" block body is not base64`);
  }
  return Buffer.from(compact, "base64");
}

/** True when `bytes` look like PEM text rather than DER (DER never starts with '-'). */
export function looksLikePem(bytes: Uint8Array): boolean {
  return Buffer.from(bytes.subarray(0, 11)).toString("latin1") === "-----BEGIN ";
}
