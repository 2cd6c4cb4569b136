/**
 * This node's identity in its cluster, as the cluster manager hands it to the
 * roleserver once the node has one (after register, join, or the control
 * plane finishing a bootstrap).
 */
import {
  CuratorConnection,
  type CuratorAddress,
  type CuratorConnectionOptions,
  type CuratorKeepalive,
  type TlsPem,
} from "@metropolis/curator";
import { FileCorruptedError, type NodeRoot } from "@metropolis/localstorage";
import {
  certificatePemCodec,
  ED25519_SEED_LENGTH,
  nodeIdFromCertificate,
  tlsMaterial,
  verifyCertificate,
} from "@metropolis/pki";
import { CredentialsMismatchError } from "./errors";

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
  await dir.certificate.as(certificatePemCodec).write(Buffer.from(c.certificate));
  await dir.caCertificate.as(certificatePemCodec).write(Buffer.from(c.caCertificate));
}

/**
 * Reads the credentials saved by {@link saveCredentials}, and checks that they
 * belong together. A file that does not hold what it should (no PEM, another
 * PEM block, not a certificate, a key of the wrong size) is a
 * `FileCorruptedError` naming that file; files that each read fine but do not
 * match (a key that is not the certificate's, a certificate the CA did not
 * issue) are {@link CredentialsMismatchError} naming the directory, rather
 * than a failed TLS handshake later.
 */
export async function loadCredentials(dir: CredentialsDirectory): Promise<NodeCredentials> {
  const privateKey = await dir.key.read();
  if (privateKey.length !== ED25519_SEED_LENGTH) {
    throw new FileCorruptedError(
      dir.key.fullPath,
      `a node's private key is a ${ED25519_SEED_LENGTH}-byte seed, this file holds ${privateKey.length} bytes`,
    );
  }
  const certificate = await dir.certificate.as(certificatePemCodec).read();
  const caCertificate = await dir.caCertificate.as(certificatePemCodec).read();
  try {
    const credentials = {
      nodeId: nodeIdFromCertificate(certificate),
      privateKey,
      certificate,
      caCertificate,
    };
    credentialsPem(credentials); // throws KeyMismatchError on a foreign key
    await verifyCertificate(certificate, caCertificate);
    return credentials;
  } catch (e) {
    throw new CredentialsMismatchError(dir.fullPath, e);
  }
}

/**
 * How long after finding the leader a node opens its standby connections to
 * the other curators (a random part of it): long enough that a cluster
 * starting at once spreads those handshakes out, short enough that a
 * failover soon after a start finds most nodes connected already.
 */
export const standbySpreadMs = 30_000;

/**
 * A node's HTTP/2 keepalive on its curator connection: a ping every 30 s
 * while calls are open (an operator's client: 10 s, curator's
 * `defaultCuratorKeepalive`), 20 s to answer. A node does not need the
 * pings to notice a hung leader: its heartbeat does, within its reply
 * timeout (10 s), and gives the leader up (heartbeat.ts). The pings go to
 * the leader, where a node's calls are open: 5,000 nodes pinging every 10 s
 * are 500 pings a second for the leader to answer, on top of 1,000
 * heartbeats.
 */
export const nodeCuratorKeepalive: CuratorKeepalive = {
  timeMs: 30_000,
  timeoutMs: 20_000,
};

/**
 * The node's connection to its cluster's curators, as `credentials` and the
 * curators `endpoints` name: with standby connections to every curator (see
 * CuratorConnectionOptions.standby), so that a failover costs the new leader
 * no TLS handshake per node, and {@link nodeCuratorKeepalive}. A call
 * that runs out of time does not give the leader up (`giveUpOnDeadline`):
 * the heartbeat is the node's liveness check of its leader.
 * `opts.keepalive` is for the scale simulator, whose node hosts' event loops
 * run late (see CuratorConnectionOptions).
 */
export function nodeCuratorConnection(
  endpoints: readonly CuratorAddress[],
  credentials: NodeCredentials,
  opts: Pick<CuratorConnectionOptions, "keepalive"> = {},
): CuratorConnection {
  const tls = credentialsPem(credentials);
  return new CuratorConnection({
    endpoints,
    ca: tls.ca,
    identity: tls,
    standby: { spreadMs: standbySpreadMs },
    keepalive: opts.keepalive ?? nodeCuratorKeepalive,
    giveUpOnDeadline: false,
  });
}
