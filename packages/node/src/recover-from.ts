/**
 * `metropolis-node --recover-from FILE --owner-key KEY`: restores the
 * cluster from a backup (`metroctl cluster backup`) onto this node, before
 * its supervision tree runs; the node then starts as the restored cluster's
 * one consensus member and curator leader.
 *
 * Everything about the file is checked before anything on the node is
 * touched: its format, header and snapshot hash (readBackupFile), that it is
 * sealed to this owner key and that its keyring opens with it
 * (openBackupKeyring). A corrupted, truncated or foreign file, or another
 * owner's key, is refused with the typed error naming the problem, and the
 * node's root is left as it was. The restore itself is @metropolis/cluster's
 * recoverNode.
 */
import { readFile } from "node:fs/promises";
import { localTimings, openBackupKeyring, readBackupFile } from "@metropolis/consensus";
import { recoverNode, type RecoveryReport } from "@metropolis/cluster";
import type { NodeRoot } from "@metropolis/localstorage";
import { privateKeyFromPkcs8 } from "@metropolis/pki";
import { join } from "node:path";
import type { Logger } from "winston";
import { NodeConfigError, type NodeConfig } from "./node-config";

/** The largest owner key file read (a PEM PKCS#8 Ed25519 key is about 120 bytes). */
const maxOwnerKeyBytes = 16 * 1024;

/** Reads the owner's Ed25519 private key (PEM PKCS#8, as metroctl's owner-key.pem). */
async function readOwnerKey(path: string): Promise<Buffer> {
  let text: Buffer;
  try {
    text = await readFile(path);
  } catch (e) {
    throw new NodeConfigError(
      `--owner-key ${path}: cannot read it: ${e instanceof Error ? e.message : String(e)}`,
    );
  }
  if (text.length > maxOwnerKeyBytes) {
    throw new NodeConfigError(`--owner-key ${path}: ${text.length} bytes is not an owner key`);
  }
  try {
    return privateKeyFromPkcs8(text.toString("utf8"));
  } catch (e) {
    throw new NodeConfigError(
      `--owner-key ${path}: not an Ed25519 private key: ${e instanceof Error ? e.message : String(e)}`,
    );
  }
}

/** One line per fact of the restore, for the operator. */
export function describeRecovery(report: RecoveryReport): string[] {
  const takenAt = new Date(report.backupTakenAtUnixMs).toISOString();
  return [
    `restored the cluster from a backup taken at ${takenAt} by ${report.backupTakenBy}, at etcd revision ${report.backupRevision}`,
    `every write up to revision ${report.backupRevision} is restored; writes made after the backup was taken are lost, and this node cannot know which there were`,
    `etcd: a new one-member cluster ${report.newClusterId} (the backup's was ${report.oldClusterId}), revision ${report.restoredRevision} after the restore's own writes; ${report.leasesRevoked} leases of the old cluster revoked`,
    `this node is ${report.nodeId}: the cluster's one consensus member and its curator`,
    report.storagePolicyFromBackup
      ? `its data partition has the cluster's storage policy ${report.storagePolicy}, as the backup records it`
      : `its data partition has storage policy ${report.storagePolicy}: the backup (an older format) does not record the cluster's, and ${report.storagePolicy} is what such a restore uses`,
    `${report.nodes.length} node records: ${report.nodes.map((n) => `${n.id} ${n.state}`).join(", ")}`,
    report.formerMembers.length === 0
      ? "no other node was a consensus member"
      : `no longer consensus members (their etcd data belongs to the old cluster; give the role again to those that come back): ${report.formerMembers.join(", ")}`,
  ];
}

/**
 * Checks the backup and the owner key, then restores; resolves with the
 * report. Throws (the node prints it and exits 1) on anything refused.
 */
export async function recoverFrom(
  config: NodeConfig,
  storage: NodeRoot,
  logger: Logger,
): Promise<RecoveryReport> {
  const { recoverFrom, ownerKeyPath } = config;
  if (recoverFrom === undefined || ownerKeyPath === undefined) {
    throw new NodeConfigError("--recover-from needs --owner-key");
  }
  const backup = await readBackupFile(recoverFrom);
  const keyring = openBackupKeyring(backup, await readOwnerKey(ownerKeyPath));
  logger.info(
    `backup ${recoverFrom} checked: ${backup.header.snapshotSize} bytes at revision ${backup.header.revision}, sealed to the given owner key`,
  );
  const report = await recoverNode({
    storage,
    machineKeyPath: join(config.root, "machine.key"),
    address: config.address,
    consensusPort: config.ports.consensus,
    curatorPort: config.ports.curator,
    backup,
    keyring,
    timings: config.loopbackTimings ? localTimings : undefined,
    leaderTtlSeconds: config.leaderTtlSeconds,
    log: (line) => logger.info(`recover: ${line}`),
  });
  for (const line of describeRecovery(report)) logger.info(`recover: ${line}`);
  return report;
}
