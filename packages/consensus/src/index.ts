/**
 * @metropolis/consensus — the cluster's etcd, run by every consensus member.
 *
 * `ConsensusService` runs this node's etcd member as a supervised child
 * process (Debian's etcd-server), driven by an XState machine: it bootstraps
 * a new cluster, joins an existing one with what a running member's
 * `addNode()` returned, or restarts from the data on disk. Members talk to
 * each other over mutual TLS with the cluster's etcd CA (kept in etcd itself,
 * so any member can issue a joiner's peer certificate); the client endpoint
 * is a unix socket in the node's ephemeral directory, for this node only.
 *
 * Its `status` event value says whether the member runs, and carries the
 * client: users get confined sub-clients (`client.sub("curator")` → keys
 * under `namespaced:curator/`), never the whole keyspace.
 *
 *   cluster manager ──▶ roleserver ──▶ ConsensusService ──status──▶ curator
 *                                         │  ├─ etcd (child process)
 *                                         │  └─ autopromoter (learners → voters)
 *                                         └─ data/etcd (durable), ephemeral/consensus (socket, TLS files)
 *
 * Secrets users keep in etcd are sealed with the cluster secrets keyring
 * (`client.sub(user).secrets`): AES-256-GCM keys with ids, held in etcd only
 * wrapped for each member's node key, and rotated by `rotateSecretsKey` on
 * the running status (secret-keyring.ts, keyring-wrap.ts, rotation.ts).
 */
export {
  ConsensusService,
  defaultAutopromoteIntervalMs,
  defaultPeerPort,
  type ConsensusConfig,
} from "./service";
export type { ConsensusStatus, JoinCluster, PeerAddress } from "./status";
export { hasMemberData, memberDataPath } from "./member-data";
export { ConsensusClient } from "./consensus-client";
export { memberClient, ownConnections, type MemberClientOptions } from "./etcd-client";
export { openWatch } from "./etcd-watch";
export { etcdDefaultTimings, localTimings, type EtcdPeer, type EtcdTimings } from "./etcd-flags";
export {
  ConsensusError,
  MembershipError,
  MembershipRefusedError,
  KeyringNotLoadedError,
  RotationError,
  GuardLostError,
  RaftStatusError,
  NotRaftLeaderError,
  MemberMaintenanceError,
  MemberIdentityError,
} from "./errors";
export {
  decimalMemberId,
  defragmentMember,
  disarmAlarm,
  listAlarms,
  maintenanceCallTimeoutMs,
  moveRaftLeader,
  raiseAlarm,
  type Defragmented,
  type EtcdAlarm,
  type MemberAlarm,
} from "./member-maintenance";
export { hexMemberId, raftStatusTimeoutMs, readRaftStatus, type RaftStatus } from "./raft-status";
export { readDatabaseSize, type DatabaseSize } from "./database-size";
export { readAtOneRevision } from "./atomic-read";
export { etcdCertificateKv, type EtcdTransactions } from "./etcd-certificate-kv";
export { ClusterSecrets, type LoadedKeyring } from "./cluster-secrets";
export type { WriteGuard } from "./guarded-write";
export { keyringCopyKey } from "./keyring-store";
export { unwrapKeyring } from "./keyring-wrap";
export { sealedKeyUsage } from "./reseal";
export type { RotationResult } from "./rotation";
export { isSealedSecret, SecretKeyring, sealedKeyId } from "./secret-keyring";
export { snapshotMember, maxBufferedChunks, type MemberSnapshot } from "./member-snapshot";
export {
  backupFormatVersion,
  backupKeyringAt,
  backupMagic,
  backupPrefixBytes,
  checkBackupHeader,
  encodeBackupPrefix,
  extractSnapshot,
  maxHeaderBytes,
  openBackupKeyring,
  readBackupFile,
  writeBackupFile,
  type VerifiedBackup,
} from "./backup-file";
export {
  BackupFileError,
  BackupFormatError,
  BackupHashMismatchError,
  BackupOwnerMismatchError,
  BackupTruncatedError,
  MemberSnapshotError,
} from "./backup-errors";
export { restoreMember, type RestoreMemberOptions, type RestoredMember } from "./restore-member";
export {
  askCluster,
  checkMemberData,
  decideMemberData,
  hexId,
  readMemberIdentity,
  wipeMemberData,
  type AskClusterOptions,
  type CheckMemberDataOptions,
  type ClusterAnswer,
  type MemberDataDecision,
  type MemberIdentity,
} from "./stale-member";
