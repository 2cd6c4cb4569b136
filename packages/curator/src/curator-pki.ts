/**
 * Node certificates issued by the cluster CA and kept in the curator's PKI
 * store (`/cluster-pki/issued/node-<id>-cert.der`, external: the node keeps
 * its private key). Keeping them lets CommitNode and bootstrap answer a
 * retry with the very certificate they issued before, instead of minting a
 * second one for the same key.
 *
 * The certificate is written in the same guarded transaction as the node
 * record that makes it meaningful (UP), so this module only issues it and
 * names the key; the caller adds the put and its "not issued yet"
 * comparison to its own transaction.
 */
import type { Namespace } from "etcd3";
import { etcdCertificateKv } from "@metropolis/consensus";
import {
  ConcurrentRevocationError,
  nodeTemplate,
  type RevocationList,
  type CaCertificate,
  type Certificate,
  type CertificateAuthority,
  type ParsedCertificate,
} from "@metropolis/pki";
import { leaderGuardedKv } from "./aaa-service";
import { LostLeadershipError } from "./errors";
import type { LeaderContext } from "./leader-context";
import type { Txn } from "./leadership";
import type { StoredNode } from "./node-record";

/** The store entry of node `nodeId`'s certificate, for its raw Ed25519 `publicKey`. */
export function nodeCertificateEntry(
  ca: CaCertificate,
  nodeId: string,
  publicKey: Uint8Array,
  ipAddresses: readonly string[] = [],
): Certificate {
  // The CA's own store: same prefix (`/cluster-pki/`), same sealer.
  return ca.store.certificate(`node-${nodeId}`, {
    issuer: ca,
    template: nodeTemplate({ ipAddresses }),
    key: { publicKey },
  });
}

/** Issues a node certificate for `publicKey` (not stored yet: see {@link guardNewCertificate}). */
export function issueNodeCertificate(
  authority: CertificateAuthority,
  publicKey: Uint8Array,
  ipAddresses: readonly string[] = [],
): Promise<ParsedCertificate> {
  return authority.issueNodeCertificate(publicKey, { ipAddresses });
}

/**
 * Adds to `txn` the comparison "no certificate is stored under `entry` yet"
 * (the store's own rule: issuance never overwrites) and returns the put that
 * stores `certificate` there, for the transaction's `then`.
 */
export function guardNewCertificate(
  kv: Namespace,
  txn: Txn,
  entry: Certificate,
  certificate: ParsedCertificate,
): ReturnType<Namespace["put"]> {
  txn.and(entry.keys.certificate, "Create", "==", 0);
  return kv.put(entry.keys.certificate).value(certificate.der);
}

/**
 * Revokes node `stored`'s certificate in the cluster CA's CRL, if it has one
 * (a node that never committed has none), and applies the new CRL to this
 * leader at once. The CRL write is guarded by leadership like every other.
 */
export async function revokeNodeCertificate(ctx: LeaderContext, stored: StoredNode): Promise<void> {
  const entry = nodeCertificateEntry(ctx.clusterCa, stored.id, stored.node.publicKey);
  const issued = await entry.load(etcdCertificateKv(ctx.kv));
  if (!issued) return;
  let crl: RevocationList;
  try {
    crl = await ctx.clusterCa.revoke(leaderGuardedKv(ctx.leadership), issued.certificate);
  } catch (e) {
    // The guard of a deposed leader fails like a concurrent revocation would.
    if (e instanceof ConcurrentRevocationError && !(await ctx.leadership.stillLeads())) {
      throw new LostLeadershipError();
    }
    throw e;
  }
  await ctx.revocations.offer(crl.der);
  ctx.logger.info(
    `revoked the certificate of node ${stored.id} (serial ${issued.certificate.serial.toString(16)})`,
  );
}
