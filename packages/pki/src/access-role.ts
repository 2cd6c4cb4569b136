/**
 * The access role of a scoped credential, as the cluster CA signs it: the
 * organizationalUnitName (OU, 2.5.4.11) attribute of the certificate's
 * subject, next to its CN (the person's name):
 *
 *   subject  CN=alice, OU=reader
 *
 * No other certificate of the PKI has an OU: node certificates name only
 * their node ID, the owner's only "owner", the CA only itself; and no
 * certificate's subject is ever taken from a request, so the OU is there
 * only when the CA was asked for a scoped credential (`accessTemplate`).
 * A standard attribute rather than a private extension: Node's own parse of
 * a certificate (which TLS and every caller classification use) reads it,
 * so classifying a node costs nothing more.
 *
 * The role is only what the cluster CA signed: a certificate with an OU is
 * checked against the CA like any other before its role means anything (the
 * curator's identity.ts). This module only reads the attribute; which roles
 * exist, and what they may do, is the curator's (access-roles.ts).
 */
import { CertificateParseError } from "./errors";
import type { ParsedCertificate } from "./parse-certificate";

/** Longest role name a certificate may bear. */
export const MAX_ACCESS_ROLE_LENGTH = 32;

/** Whether `role` has the shape of a role name (lower-case letters, digits, `:` and `-`). */
export function isRoleName(role: string): boolean {
  return role.length <= MAX_ACCESS_ROLE_LENGTH && /^[a-z][a-z0-9:-]*$/.test(role);
}

/**
 * The role `certificate` bears (its subject's OU), or undefined when it bears
 * none. Throws {@link CertificateParseError} for a subject with several OUs,
 * or one that is not a role name: no certificate of the cluster has such.
 */
export function readAccessRole(certificate: ParsedCertificate): string | undefined {
  const units = certificate.organizationalUnits;
  if (units.length === 0) return undefined;
  const [role] = units;
  if (units.length > 1 || role === undefined || !isRoleName(role)) {
    throw new CertificateParseError(
      `certificate ${JSON.stringify(certificate.commonName ?? "")} bears an access role (OU) that is not one: ${JSON.stringify(units).slice(0, 100)}`,
    );
  }
  return role;
}
