/**
 * The fingerprint operators compare certificates by: SHA-256 of the DER, in
 * hex — what `openssl x509 -fingerprint -sha256` shows, without the colons.
 */
import { createHash } from "node:crypto";
import type { ParsedCertificate } from "@metropolis/pki";

/** SHA-256 (hex) of `certificate`'s DER. */
export function certificateFingerprint(certificate: ParsedCertificate): string {
  return createHash("sha256").update(certificate.der).digest("hex");
}
