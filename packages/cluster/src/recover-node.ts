/**
 * Recovery: this node restores its cluster from a backup after the cluster
 * lost its quorum for good (`metropolis-node --recover-from FILE --owner-key
 * KEY`). It runs before the node's supervision tree, on a node root that
 * holds no node state, and leaves the node as a consensus member that
 * restarts from disk:
 *
 *   checked backup + owner key ──▶ keyring
 *   new data partition (the backup's storage policy), new node and join keys
 *   etcd restored as a one-member cluster (consensus restoreMember), on it:
 *     this node's record, certificate, join key, unlock key (curator recoverCluster)
 *   credentials, roles, cluster directory, sealed configuration (last)
 *   ──▶ the node starts as after a reboot: its member from the restored data, its curator leads
 *
 * The sealed configuration is written last: its presence is what makes a
 * node rejoin its cluster. Anything failing before it removes what was
 * written (the data partition, the cluster directory): the root is left
 * without node state, and the restore can be run again.
 *
 * The data partition is created with the cluster's storage policy as the
 * backup's header records it (the cluster configuration in the snapshot is
 * readable only once the partition is mounted). A backup taken before the
 * header recorded it gets `encrypted`, and the report says so.
 */
import { rm } from "node:fs/promises";
import { join } from "node:path";
import {
  extractSnapshot,
  restoreMember,
  type EtcdTimings,
  type SecretKeyring,
  type VerifiedBackup,
} from "@metropolis/consensus";
import { recoverCluster } from "@metropolis/curator";
import { ensureMachineKey, type NodeRoot } from "@metropolis/localstorage";
import { generateKeyPair, nodeIdFromPublicKey } from "@metropolis/pki";
import { common, priv, type api } from "@metropolis/proto";
import { keepFirstNodeRoles, saveCredentials } from "@metropolis/roleserve";
import { EnrolmentError } from "./errors";
import { readSealedConfiguration, writeSealedConfiguration } from "./sealed-configuration";
import { dataPolicyOf } from "./storage-policy";

/** The storage policy of a restored node's data partition when its backup records none. */
export const defaultRecoveredStoragePolicy = common.StoragePolicy.ENCRYPTED;

/** The storage policy a restore creates its data partition with, and whence it came. */
export interface RecoveredStoragePolicy {
  readonly policy: common.StoragePolicy;
  /** Whether the backup's header named it (false: an older backup, and the default). */
  readonly fromBackup: boolean;
}

/**
 * The storage policy of a node restored from a backup with `header`: the
 * cluster's, as the header records it, or {@link defaultRecoveredStoragePolicy}
 * for a backup whose header does not (taken before it had the field).
 */
export function recoveredStoragePolicy(header: api.BackupHeader): RecoveredStoragePolicy {
  if (header.storagePolicy === common.StoragePolicy.UNSPECIFIED) {
    return { policy: defaultRecoveredStoragePolicy, fromBackup: false };
  }
  return { policy: header.storagePolicy, fromBackup: true };
}

/** The line that says which storage policy a restore used, and why. */
export function describeRecoveredStoragePolicy(chosen: RecoveredStoragePolicy): string {
  const name = common.storagePolicyToJSON(chosen.policy);
  return chosen.fromBackup
    ? `data partition created with storage policy ${name}, the cluster's as the backup records it`
    : `data partition created with storage policy ${name}: the backup (an older format) does not record the cluster's storage policy, so the restore uses ${name}; the cluster's own is in its configuration (\`metroctl cluster configure get storage_policy\`)`;
}

/** What {@link recoverNode} needs. */
export interface RecoverNodeOptions {
  /** The node's storage, placed, its ephemeral directory in memory; without node state. */
  storage: NodeRoot;
  machineKeyPath: string;
  /** The node's address, and its consensus and curator ports. */
  address: string;
  consensusPort: number;
  curatorPort: number;
  /** The checked backup, and the keyring opened from it with the owner's key. */
  backup: VerifiedBackup;
  keyring: SecretKeyring;
  timings?: EtcdTimings;
  leaderTtlSeconds?: number;
  /** Told each step. */
  log?: (line: string) => void;
}

/** What a restore did: what {@link recoverNode} reports. */
export interface RecoveryReport {
  /** This node, the restored cluster's one consensus member. */
  nodeId: string;
  /** The backup's etcd revision: every write up to it is restored. */
  backupRevision: number;
  /** When the backup was taken (ms since the epoch), and by which node. */
  backupTakenAtUnixMs: number;
  backupTakenBy: string;
  /** The old etcd cluster's ID and the new one's (hex): they differ. */
  oldClusterId: string;
  newClusterId: string;
  /** The restored etcd's revision once the restore wrote its records. */
  restoredRevision: string;
  /** Every node record now, with its state. */
  nodes: ReadonlyArray<{ id: string; state: string }>;
  /** The nodes that were consensus members in the backup (role taken away). */
  formerMembers: readonly string[];
  /** Leases of the old cluster revoked (the old curator leader's among them). */
  leasesRevoked: number;
  /** The storage policy of this node's data partition (a StoragePolicy name). */
  storagePolicy: string;
  /** Whether the backup recorded it (false: an older backup, and the default `encrypted`). */
  storagePolicyFromBackup: boolean;
}

/** Restores the cluster from `opts.backup` onto this node; see the module comment. */
export async function recoverNode(opts: RecoverNodeOptions): Promise<RecoveryReport> {
  const { storage, backup } = opts;
  const log = opts.log ?? (() => undefined);
  if (await readSealedConfiguration(storage, opts.machineKeyPath)) {
    throw new EnrolmentError(
      `this node already belongs to a cluster (${storage.esp.metropolis.sealedConfiguration.fullPath} exists): restore onto a node whose state was wiped, or a new one`,
    );
  }
  if (await storage.data.isInitialized()) {
    throw new EnrolmentError(
      `${storage.data.fullPath} holds a data partition already: restore onto a node whose state was wiped, or a new one`,
    );
  }
  const storagePolicy = recoveredStoragePolicy(backup.header);
  const dataPolicy = dataPolicyOf(storagePolicy.policy);
  let sealed = false;
  try {
    const keys = await storage.data.mountNew(dataPolicy);
    log(describeRecoveredStoragePolicy(storagePolicy));
    const node = generateKeyPair();
    const joinKey = generateKeyPair();
    const nodeId = nodeIdFromPublicKey(node.publicKey);
    log(`restoring the cluster from ${backup.path} as node ${nodeId}`);
    await storage.data.etcd.mkdirAll();
    const snapshotPath = join(storage.data.etcd.fullPath, "restore-snapshot.db");
    await rm(snapshotPath, { force: true });
    await extractSnapshot(backup, snapshotPath);
    let restored;
    try {
      restored = await restoreMember(
        {
          storage,
          nodePrivateKey: node.privateKey,
          peer: { host: opts.address, port: opts.consensusPort },
          keyring: opts.keyring,
          snapshotPath,
          timings: opts.timings,
          log,
        },
        (root) =>
          recoverCluster(
            root.sub("curator"),
            { nodeId, host: opts.address, port: opts.curatorPort },
            {
              nodePublicKey: node.publicKey,
              joinPublicKey: joinKey.publicKey,
              clusterUnlockKey: keys.clusterUnlockKey,
              address: opts.address,
            },
            opts.leaderTtlSeconds,
          ),
      );
    } finally {
      await rm(snapshotPath, { force: true });
    }
    const recovered = restored.result;
    await saveCredentials(storage.data.node.credentials, {
      nodeId,
      privateKey: node.privateKey,
      certificate: recovered.nodeCertificate,
      caCertificate: recovered.caCertificate,
    });
    await keepFirstNodeRoles(storage);
    await storage.esp.metropolis.clusterDirectory.write({
      nodes: [
        {
          id: nodeId,
          publicKey: node.publicKey,
          addresses: [{ host: opts.address }],
          consensusMember: true,
        },
      ],
    });
    await ensureMachineKey(opts.machineKeyPath);
    await writeSealedConfiguration(
      storage,
      opts.machineKeyPath,
      priv.SealedConfiguration.fromPartial({
        nodeUnlockKey: keys.nodeUnlockKey,
        joinKey: joinKey.privateKey,
        storagePolicy: storagePolicy.policy,
        clusterUnlockKey: keys.clusterUnlockKey,
        clusterCa: recovered.caCertificate,
      }),
    );
    sealed = true;
    return {
      nodeId,
      backupRevision: backup.header.revision,
      backupTakenAtUnixMs: backup.header.takenAtUnixMs,
      backupTakenBy: backup.header.takenByNodeId,
      oldClusterId: backup.header.etcdClusterId,
      newClusterId: restored.clusterId,
      restoredRevision: restored.revision.toString(),
      nodes: recovered.nodes,
      formerMembers: recovered.formerMembers,
      leasesRevoked: restored.leasesRevoked,
      storagePolicy: common.storagePolicyToJSON(storagePolicy.policy),
      storagePolicyFromBackup: storagePolicy.fromBackup,
    };
  } finally {
    // The node mounts its data again when it starts, as after a reboot.
    storage.data.unmount();
    if (!sealed) {
      await rm(storage.data.fullPath, { recursive: true, force: true });
      await rm(storage.esp.metropolis.clusterDirectory.fullPath, { force: true });
    }
  }
}
