/**
 * This node's identity in its cluster, as the cluster manager hands it to the
 * roleserver once the node has one (after register, join, or the control
 * plane finishing a bootstrap).
 */
import type { TlsPem } from "@metropolis/curator";
import type { NodeRoot } from "@metropolis/localstorage";
import {
  decodePem,
  encodePem,
  nodeIdFromCertificate,
  tlsMaterial,
  verifyCertificate,
} from "@metropolis/pki";

export interface NodeCredentials {
  nodeId: string;
  /** Ed25519 private key seed (32 bytes). */
  privateKey: Uint8Array;
  /** The node certificate issued by the cluster CA (DER). */
  certificate: Uint8Array;
  /** The cluster CA certificate (DER). */
  caCertificate: Uint8Array;
}

/** The credentials as PEM, for the curator's server and its clients. */
export function credentialsPem(c: NodeCredentials): TlsPem {
  return tlsMaterial({
    certificate: c.certificate,
    privateKey: c.privateKey,
    ca: c.caCertificate,
  });
}

/** Where a node keeps its credentials: `data/node/credentials` of its storage. */
export type CredentialsDirectory = NodeRoot["data"]["node"]["credentials"];

/**
 * Saves the credentials: certificates as PEM, the private key as its raw seed
 * in a secret file (encrypted by the data partition's protection).
 */
export async function saveCredentials(
  dir: CredentialsDirectory,
  c: NodeCredentials,
): Promise<void> {
  await dir.mkdirAll();
  await dir.key.write(Buffer.from(c.privateKey));
  await dir.certificate.write(Buffer.from(encodePem("CERTIFICATE", c.certificate)));
  await dir.caCertificate.write(Buffer.from(encodePem("CERTIFICATE", c.caCertificate)));
}

/**
 * Reads the credentials saved by {@link saveCredentials}, and checks that they
 * belong together: a key that is not the certificate's, or a certificate the
 * CA did not issue, fails here with the reason rather than in a TLS handshake.
 */
export async function loadCredentials(dir: CredentialsDirectory): Promise<NodeCredentials> {
  const privateKey = await dir.key.read();
  const certificate = decodePem((await dir.certificate.read()).toString(), "CERTIFICATE");
  const caCertificate = decodePem((await dir.caCertificate.read()).toString(), "CERTIFICATE");
  const credentials = {
    nodeId: nodeIdFromCertificate(certificate),
    privateKey,
    certificate,
    caCertificate,
  };
  credentialsPem(credentials); // throws KeyMismatchError on a foreign key
  await verifyCertificate(certificate, caCertificate);
  return credentials;
}
