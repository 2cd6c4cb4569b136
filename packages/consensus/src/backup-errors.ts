/**
 * Typed errors of cluster backups (member-snapshot.ts, backup-file.ts): each
 * names the file or the step and what is wrong with it.
 */
import { ConsensusError } from "./errors";

/** etcd's snapshot stream failed or was cancelled. */
export class MemberSnapshotError extends ConsensusError {}

/** Base class of what is wrong with a backup file. */
export class BackupFileError extends ConsensusError {
  constructor(
    /** The backup file. */
    readonly path: string,
    /** What is wrong with it. */
    readonly problem: string,
    options?: { cause?: unknown },
  ) {
    super(`backup file ${path}: ${problem}`, options);
  }
}

/** Not a backup file, an unknown format version, or a malformed header. */
export class BackupFormatError extends BackupFileError {}

/** The file ends before its header or its snapshot does. */
export class BackupTruncatedError extends BackupFileError {}

/** The snapshot's bytes are not those the header's SHA-256 names. */
export class BackupHashMismatchError extends BackupFileError {}

/** The backup is sealed to another owner key than the one given, or its keyring does not open with it. */
export class BackupOwnerMismatchError extends BackupFileError {}
