/**
 * The one place that sets up @peculiar/x509. It is built on tsyringe, which
 * needs the reflect-metadata polyfill loaded before the library itself, and it
 * signs through whatever WebCrypto implementation is registered — Node's own,
 * whose Ed25519 support is what makes Ed25519 certificates possible at all
 * (node-forge cannot make them). Every module that touches certificates
 * imports `x509` from here, so the order of those two side effects cannot be
 * got wrong elsewhere.
 */
import "reflect-metadata";
import { webcrypto } from "node:crypto";
import * as x509 from "@peculiar/x509";

x509.cryptoProvider.set(webcrypto);

/** The WebCrypto algorithm of every key and signature in the Metropolis PKI. */
export const ED25519_ALGORITHM = { name: "Ed25519" } as const;

export { x509, webcrypto };
