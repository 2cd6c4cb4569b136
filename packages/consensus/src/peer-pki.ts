/**
 * The PKI of etcd's peer traffic: a CA of its own (not the cluster CA: etcd
 * peers trust nothing but each other), created when a cluster is
 * bootstrapped and kept in etcd under `namespaced:consensus/`, so that any
 * member can issue the certificate of a node that joins; its private key is
 * sealed there with the cluster secrets keyring. A member's
 * certificate is issued for the node's own Ed25519 key, with its peer
 * address as IP SAN (peers dial each other by IP).
 */
import { chmod, writeFile } from "node:fs/promises";
import { join } from "node:path";
import {
  CertificateAuthority,
  CertificateStore,
  encodePem,
  parseCertificate,
  privateKeyToPem,
  publicKeyFromPrivateKey,
  verifyCertificate,
  type CaCertificate,
  type ParsedCertificate,
} from "@metropolis/pki";
import type { ConsensusClient } from "./consensus-client";
import { etcdCertificateKv } from "./etcd-certificate-kv";
import { ConsensusConfigError } from "./errors";

/** Name of the etcd CA in the consensus namespace's certificate store. */
const caName = "etcd-ca";
const caCommonName = "Metropolis etcd peer CA";

/** Paths of the TLS files etcd reads (see etcd-flags.ts). */
export interface PeerTlsFiles {
  caFile: string;
  certFile: string;
  keyFile: string;
}

/** The etcd CA's certificate with its private key, in memory. */
export type PeerCa = CertificateAuthority;

/** The store of the consensus namespace, sealing with that namespace's sealer. */
function storeOf(client: ConsensusClient): CertificateStore {
  return new CertificateStore(client.secrets);
}

/** A new etcd CA, for a cluster being bootstrapped. */
export function createPeerCa(): Promise<PeerCa> {
  return CertificateAuthority.create({ commonName: caCommonName });
}

/** Stores the CA of a newly bootstrapped cluster in etcd. */
export async function storePeerCa(client: ConsensusClient, ca: PeerCa): Promise<void> {
  await storeOf(client)
    .ca(caName, { commonName: caCommonName })
    .adopt(etcdCertificateKv(client.kv), ca);
}

/** The cluster's etcd CA, from etcd. */
export function loadPeerCa(client: ConsensusClient): Promise<PeerCa> {
  return peerCaEntry(client).authority(etcdCertificateKv(client.kv));
}

/** The etcd CA's entry in the consensus namespace's store (its keys, its CRL). */
export function peerCaEntry(client: ConsensusClient): CaCertificate {
  return storeOf(client).ca(caName, { commonName: caCommonName });
}

/**
 * Issues the peer certificate of node `publicKey`, reachable at `host`.
 * etcd checks a peer's client certificate against the address the connection
 * comes from; on loopback that is 127.0.0.1 whatever 127.0.0.x the member
 * listens on, so loopback members also get 127.0.0.1.
 */
export async function issueMemberCertificate(
  ca: PeerCa,
  publicKey: Uint8Array,
  host: string,
): Promise<ParsedCertificate> {
  const ipAddresses =
    host.startsWith("127.") && host !== "127.0.0.1" ? [host, "127.0.0.1"] : [host];
  return ca.issueNodeCertificate(publicKey, { ipAddresses });
}

/**
 * Checks what a joining node was handed: the certificate must be signed by
 * the CA and be for this node's key. A clear error now beats etcd failing
 * its handshakes later.
 */
export async function checkMemberCertificate(
  caDer: Uint8Array,
  certificateDer: Uint8Array,
  privateKey: Uint8Array,
): Promise<void> {
  const certificate = parseCertificate(certificateDer);
  await verifyCertificate(certificate, caDer);
  if (!certificate.publicKey.equals(publicKeyFromPrivateKey(privateKey))) {
    throw new ConsensusConfigError(
      "consensus: the join certificate was not issued for this node's key",
    );
  }
}

/** The PEM files of a member's TLS material, as stored durably and handed to etcd. */
export interface PeerTlsPem {
  caCertificate: string;
  certificate: string;
  privateKey: string;
}

export function peerTlsPem(
  caDer: Uint8Array,
  certificateDer: Uint8Array,
  privateKey: Uint8Array,
): PeerTlsPem {
  return {
    caCertificate: encodePem("CERTIFICATE", caDer),
    certificate: encodePem("CERTIFICATE", certificateDer),
    privateKey: privateKeyToPem(privateKey),
  };
}

/** Writes the plain TLS files etcd reads into `dir` (the node's ephemeral directory). */
export async function writePeerTlsFiles(dir: string, pem: PeerTlsPem): Promise<PeerTlsFiles> {
  const files: PeerTlsFiles = {
    caFile: join(dir, "peer-ca.pem"),
    certFile: join(dir, "peer-cert.pem"),
    keyFile: join(dir, "peer-key.pem"),
  };
  await writeFile(files.caFile, pem.caCertificate);
  await writeFile(files.certFile, pem.certificate);
  await writeFile(files.keyFile, pem.privateKey, { mode: 0o600 });
  await chmod(files.keyFile, 0o600);
  return files;
}
