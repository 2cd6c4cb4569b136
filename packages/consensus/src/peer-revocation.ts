/**
 * Revocation of etcd peer certificates. A node that is deleted from the
 * cluster keeps its etcd peer certificate; revoked in the etcd CA's CRL, it
 * no longer gets through any member's TLS (etcd's `--peer-crl-file`, which
 * etcd reads on every incoming peer connection), so a deleted consensus
 * member cannot rejoin raft, even from a copy of its old data.
 *
 * etcd checks the CRL on the connections it accepts, not on those it opens,
 * and raft peers dial each other both ways: a revoked peer that is still a
 * member keeps talking through the others' connections to it. So deleting a
 * node revokes its certificates *and* removes its member (DeleteNode does
 * both): the others no longer dial it, and everything it dials is refused —
 * it does not even get back in to hear that it was removed.
 *
 *   addNode ──issues──▶ member certificate ──recorded at──▶ member_certificates/<node>/<serial>
 *   revokeNode(node) ──▶ every recorded serial into the etcd CA's CRL (etcd-ca-crl.der)
 *   every member: peer CRL follower ──▶ data/etcd/peer_crl (durable) + ephemeral peer-crl.der (etcd reads it)
 *
 * A member that was only removed from consensus (the role taken away) keeps
 * its certificate valid: it must still reach its peers to hear, from them,
 * that it was removed (see etcd-log.ts) — only then may it delete its data.
 */
import { rename, writeFile } from "node:fs/promises";
import type { Etcd3 } from "etcd3";
import type { File } from "@metropolis/localstorage";
import { parseCrl, type ParsedCertificate, type RevocationList } from "@metropolis/pki";
import type { Runnable } from "@metropolis/supervisor";
import type { ConsensusClient } from "./consensus-client";
import { etcdCertificateKv } from "./etcd-certificate-kv";
import { followKey } from "./key-follower";
import { peerCaEntry } from "./peer-pki";

/** Where the certificates issued for `nodeId` are recorded, relative to the consensus namespace. */
function memberCertificatesPrefix(nodeId: string): string {
  return `member_certificates/${nodeId}/`;
}

/** Records a peer certificate issued for `nodeId`, so that deleting the node can revoke it. */
export async function recordMemberCertificate(
  consensus: ConsensusClient,
  nodeId: string,
  certificate: ParsedCertificate,
): Promise<void> {
  const key = `${memberCertificatesPrefix(nodeId)}${certificate.serial.toString(16)}`;
  await consensus.kv.put(key).value(certificate.der);
}

/**
 * Revokes every peer certificate recorded for `nodeId` in the etcd CA's
 * CRL; returns how many it revoked (revoking one twice changes nothing).
 */
export async function revokeMemberCertificates(
  consensus: ConsensusClient,
  nodeId: string,
): Promise<number> {
  const recorded = await consensus.kv.getAll().prefix(memberCertificatesPrefix(nodeId)).buffers();
  const ca = peerCaEntry(consensus);
  const kv = etcdCertificateKv(consensus.kv);
  for (const der of Object.values(recorded)) await ca.revoke(kv, der);
  return Object.keys(recorded).length;
}

/** The etcd CA's current CRL. */
export function loadPeerCrl(consensus: ConsensusClient): Promise<RevocationList> {
  return peerCaEntry(consensus).crl(etcdCertificateKv(consensus.kv));
}

export interface PeerCrlFollowerOptions {
  /** The member's own etcd client. */
  readonly client: Etcd3;
  /** The member's consensus namespace client, to name the CRL's key. */
  readonly consensus: ConsensusClient;
  /** The etcd CA certificate (DER): only a CRL it signed is taken. */
  readonly caCertificate: Uint8Array;
  /** The durable copy, read at the next start: `data.etcd.peerCRL`. */
  readonly durable: File<Buffer>;
  /** The copy etcd reads (`--peer-crl-file`). */
  readonly ephemeralPath: string;
}

/**
 * The runnable that keeps this member's CRL files current with the etcd
 * CA's CRL in etcd; healthy once the CRL in etcd was read (and written).
 */
export function peerCrlFollower(options: PeerCrlFollowerOptions): Runnable {
  const key = `${options.consensus.prefix}${peerCaEntry(options.consensus).keys.crl}`;
  return async (ctx) => {
    const take = async (value: Buffer) => {
      const crl = parseCrl(value);
      if (!(await crl.isIssuedBy(options.caCertificate))) {
        ctx.logger.error(`the etcd CRL at ${key} is not signed by the etcd CA: ignored`);
        return;
      }
      if ((await options.durable.exists()) && (await options.durable.read()).equals(crl.der))
        return;
      await options.durable.write(crl.der);
      // etcd reads the file on every connection: replaced whole, never half-written.
      await writeFile(`${options.ephemeralPath}.new`, crl.der);
      await rename(`${options.ephemeralPath}.new`, options.ephemeralPath);
      ctx.logger.info(`etcd peer CRL ${crl.crlNumber ?? "?"}: ${crl.entries.length} revoked`);
    };
    await followKey(
      {
        client: options.client,
        key,
        take,
        onFirst: () => ctx.healthy(),
        onMissing: () => ctx.logger.info(`waiting for the etcd CA's CRL at ${key}`),
      },
      ctx.signal,
    );
  };
}
