/**
 * The cluster backup file: what `metroctl cluster backup` writes and
 * `metropolis-node --recover-from` restores.
 *
 * ```
 * "MTBACKUP" (8) | format version (uint32 BE, 1) | header length (uint32 BE) | header | snapshot
 * ```
 *
 * The header is an encoded `api.BackupHeader` (at most {@link maxHeaderBytes}):
 * the cluster's identity (its CA certificate, etcd's cluster ID), the etcd
 * revision and time of the snapshot, the nodes' versions, the snapshot's
 * size and SHA-256, and the cluster secrets keyring wrapped for the owner's
 * Ed25519 key (keyring-wrap.ts, X25519 with the owner key's Montgomery form)
 * with the snapshot's SHA-256 in its associated data, and the cluster's
 * storage policy, which the restore creates its data partition with (unset in
 * backups taken before the header had it). The snapshot is etcd's
 * own (Maintenance.Snapshot), whose secrets stay sealed with that keyring:
 * the file alone reveals no secret, and with the owner's key it is all a
 * restore needs.
 *
 * Reading trusts nothing before it is checked: the magic, the version, the
 * header's length before it is read, the header's fields, the file's length
 * against the header's snapshot size, then the snapshot's SHA-256 (read in
 * bounded chunks). Writing is atomic: a temporary file in the same
 * directory, mode 0600, synced, then renamed over the target.
 */
import { createHash, randomBytes } from "node:crypto";
import { open, rename, rm, stat, type FileHandle } from "node:fs/promises";
import { basename, dirname, join } from "node:path";
import { publicKeyFromPrivateKey } from "@metropolis/pki";
import { api, common } from "@metropolis/proto";
import {
  BackupFormatError,
  BackupHashMismatchError,
  BackupOwnerMismatchError,
  BackupTruncatedError,
} from "./backup-errors";
import { KeyringError } from "./errors";
import { unwrapKeyring } from "./keyring-wrap";
import type { SecretKeyring } from "./secret-keyring";

/** The first bytes of every backup file. */
export const backupMagic = Buffer.from("MTBACKUP", "ascii");
/** The format version this code writes and reads. */
export const backupFormatVersion = 1;
/** The largest header a reader accepts. */
export const maxHeaderBytes = 1024 * 1024;
/** The largest snapshot a reader accepts (etcd's largest quota is 8 GiB). */
export const maxSnapshotBytes = 16 * 1024 * 1024 * 1024;
/** The largest sealed keyring a reader accepts. */
export const maxSealedKeyringBytes = 64 * 1024;
/** The size of the fixed prefix: magic, version, header length. */
export const backupPrefixBytes = backupMagic.length + 8;

/**
 * The storage policies a header may name: one a restore can create its data
 * partition with, or unset (a backup taken before the header had the field).
 */
const headerStoragePolicies: ReadonlySet<common.StoragePolicy> = new Set([
  common.StoragePolicy.UNSPECIFIED,
  common.StoragePolicy.INSECURE,
  common.StoragePolicy.ENCRYPTED,
  common.StoragePolicy.AUTHENTICATED_ENCRYPTED,
]);

const readChunkBytes = 1024 * 1024;
const sha256Bytes = 32;
const ed25519KeyBytes = 32;

/**
 * The associated data the keyring in a backup is wrapped with: it names the
 * snapshot by its SHA-256, so a keyring does not open next to another snapshot.
 */
export function backupKeyringAt(snapshotSha256: Uint8Array): string {
  return `metropolis-ts backup ${Buffer.from(snapshotSha256).toString("hex")}`;
}

/** A backup file whose header and snapshot hash have been checked. */
export interface VerifiedBackup {
  /** The file. */
  readonly path: string;
  /** Its checked header. */
  readonly header: api.BackupHeader;
  /** Where in the file the snapshot begins. */
  readonly snapshotOffset: number;
}

/** The fixed prefix and the encoded header of a backup file. */
export function encodeBackupPrefix(header: api.BackupHeader): Buffer {
  const encoded = Buffer.from(api.BackupHeader.encode(header).finish());
  if (encoded.length > maxHeaderBytes) {
    throw new RangeError(`backup header of ${encoded.length} bytes exceeds ${maxHeaderBytes}`);
  }
  const fixed = Buffer.alloc(8);
  fixed.writeUInt32BE(backupFormatVersion, 0);
  fixed.writeUInt32BE(encoded.length, 4);
  return Buffer.concat([backupMagic, fixed, encoded]);
}

/**
 * Writes the backup file `path` from `header` and the snapshot in the file
 * `snapshotPath`, atomically (temporary file, mode 0600, synced, renamed).
 */
export async function writeBackupFile(
  path: string,
  header: api.BackupHeader,
  snapshotPath: string,
): Promise<void> {
  const prefix = encodeBackupPrefix(header);
  const temporary = join(dirname(path), `.${basename(path)}.${randomBytes(6).toString("hex")}.tmp`);
  let done = false;
  const out = await open(temporary, "wx", 0o600);
  try {
    await out.write(prefix);
    const input = await open(snapshotPath, "r");
    try {
      const buffer = Buffer.alloc(readChunkBytes);
      for (;;) {
        const { bytesRead } = await input.read(buffer, 0, buffer.length, null);
        if (bytesRead === 0) break;
        await out.write(buffer.subarray(0, bytesRead));
      }
    } finally {
      await input.close();
    }
    await out.sync();
    await out.close();
    await rename(temporary, path);
    done = true;
    await syncDirectory(dirname(path));
  } finally {
    if (!done) {
      await out.close().catch(() => undefined);
      await rm(temporary, { force: true });
    }
  }
}

async function syncDirectory(dir: string): Promise<void> {
  const handle = await open(dir, "r");
  try {
    await handle.sync();
  } finally {
    await handle.close();
  }
}

/** Reads exactly `length` bytes at `position`, or throws BackupTruncatedError naming `what`. */
async function readExactly(
  handle: FileHandle,
  path: string,
  position: number,
  length: number,
  what: string,
): Promise<Buffer> {
  const buffer = Buffer.alloc(length);
  let got = 0;
  while (got < length) {
    const { bytesRead } = await handle.read(buffer, got, length - got, position + got);
    if (bytesRead === 0) {
      throw new BackupTruncatedError(
        path,
        `it ends within its ${what}: ${got} of ${length} bytes there`,
      );
    }
    got += bytesRead;
  }
  return buffer;
}

/** Checks the header's fields; throws BackupFormatError naming the first bad one. */
export function checkBackupHeader(path: string, header: api.BackupHeader): void {
  const bad = (problem: string) => new BackupFormatError(path, `its header ${problem}`);
  if (header.clusterCaCertificate.length === 0) throw bad("has no cluster CA certificate");
  if (header.snapshotSha256.length !== sha256Bytes) {
    throw bad(`has a ${header.snapshotSha256.length}-byte snapshot SHA-256, not ${sha256Bytes}`);
  }
  if (header.ownerPublicKey.length !== ed25519KeyBytes) {
    throw bad(`has a ${header.ownerPublicKey.length}-byte owner key, not ${ed25519KeyBytes}`);
  }
  if (header.sealedKeyring.length === 0 || header.sealedKeyring.length > maxSealedKeyringBytes) {
    throw bad(
      `has a sealed keyring of ${header.sealedKeyring.length} bytes (1 to ${maxSealedKeyringBytes})`,
    );
  }
  if (header.snapshotSize <= 0 || header.snapshotSize > maxSnapshotBytes) {
    throw bad(`says the snapshot has ${header.snapshotSize} bytes (1 to ${maxSnapshotBytes})`);
  }
  if (header.revision <= 0) throw bad(`has revision ${header.revision}`);
  if (!headerStoragePolicies.has(header.storagePolicy)) {
    throw bad(
      `names storage policy ${header.storagePolicy}, which this node does not know (it knows ${[
        ...headerStoragePolicies,
      ]
        .map((p) => common.storagePolicyToJSON(p))
        .join(", ")})`,
    );
  }
}

/**
 * Reads and checks the backup file `path`: its format and header, its
 * length, and the SHA-256 of its snapshot. Nothing is trusted before it is
 * checked; throws a BackupFileError subclass naming what is wrong.
 */
export async function readBackupFile(path: string): Promise<VerifiedBackup> {
  const handle = await open(path, "r");
  try {
    const { size } = await handle.stat();
    const fixed = await readExactly(handle, path, 0, Math.min(size, backupPrefixBytes), "prefix");
    if (
      fixed.length < backupMagic.length ||
      !fixed.subarray(0, backupMagic.length).equals(backupMagic)
    ) {
      throw new BackupFormatError(path, "it is not a Metropolis-TS backup (no MTBACKUP magic)");
    }
    if (fixed.length < backupPrefixBytes) {
      throw new BackupTruncatedError(path, `it ends within its ${backupPrefixBytes}-byte prefix`);
    }
    const version = fixed.readUInt32BE(backupMagic.length);
    if (version !== backupFormatVersion) {
      throw new BackupFormatError(
        path,
        `its format version is ${version}; this node reads version ${backupFormatVersion}`,
      );
    }
    const headerLength = fixed.readUInt32BE(backupMagic.length + 4);
    if (headerLength === 0 || headerLength > maxHeaderBytes) {
      throw new BackupFormatError(
        path,
        `its header length is ${headerLength} bytes (1 to ${maxHeaderBytes})`,
      );
    }
    const encoded = await readExactly(handle, path, backupPrefixBytes, headerLength, "header");
    let header: api.BackupHeader;
    try {
      header = api.BackupHeader.decode(encoded);
    } catch (cause) {
      throw new BackupFormatError(path, `its header does not decode: ${String(cause)}`, { cause });
    }
    checkBackupHeader(path, header);
    const snapshotOffset = backupPrefixBytes + headerLength;
    const present = size - snapshotOffset;
    if (present < header.snapshotSize) {
      throw new BackupTruncatedError(
        path,
        `it holds ${present} of the snapshot's ${header.snapshotSize} bytes`,
      );
    }
    if (present > header.snapshotSize) {
      throw new BackupFormatError(
        path,
        `it has ${present - header.snapshotSize} bytes after the snapshot's ${header.snapshotSize}`,
      );
    }
    const hash = createHash("sha256");
    const buffer = Buffer.alloc(readChunkBytes);
    let position = snapshotOffset;
    while (position < size) {
      const { bytesRead } = await handle.read(buffer, 0, buffer.length, position);
      if (bytesRead === 0) {
        throw new BackupTruncatedError(path, "it became shorter while it was read");
      }
      hash.update(buffer.subarray(0, bytesRead));
      position += bytesRead;
    }
    const actual = hash.digest();
    if (!actual.equals(header.snapshotSha256)) {
      throw new BackupHashMismatchError(
        path,
        `its snapshot's SHA-256 is ${actual.toString("hex")}, but its header says ${header.snapshotSha256.toString("hex")}: the file is corrupted or was altered`,
      );
    }
    return { path, header, snapshotOffset };
  } finally {
    await handle.close();
  }
}

/**
 * Opens the keyring of a checked backup with the owner's Ed25519 private key
 * (32-byte seed). Throws {@link BackupOwnerMismatchError} when the backup is
 * sealed to another owner key, or its keyring does not open with this one.
 */
export function openBackupKeyring(
  backup: VerifiedBackup,
  ownerPrivateKey: Uint8Array,
): SecretKeyring {
  const { header, path } = backup;
  const given = publicKeyFromPrivateKey(ownerPrivateKey);
  if (!given.equals(header.ownerPublicKey)) {
    throw new BackupOwnerMismatchError(
      path,
      `it is sealed to owner key ${header.ownerPublicKey.toString("hex")}, not to the given key ${given.toString("hex")}`,
    );
  }
  try {
    return unwrapKeyring(
      header.sealedKeyring,
      ownerPrivateKey,
      backupKeyringAt(header.snapshotSha256),
    );
  } catch (cause) {
    if (!(cause instanceof KeyringError)) throw cause;
    throw new BackupOwnerMismatchError(
      path,
      `its keyring does not open with the given owner key: ${cause.message}`,
      { cause },
    );
  }
}

/** Copies the snapshot of a checked backup to `destination` (created, mode 0600), for etcd's restore. */
export async function extractSnapshot(backup: VerifiedBackup, destination: string): Promise<void> {
  const input = await open(backup.path, "r");
  const out = await open(destination, "wx", 0o600);
  try {
    const buffer = Buffer.alloc(readChunkBytes);
    let position = backup.snapshotOffset;
    const end = backup.snapshotOffset + backup.header.snapshotSize;
    while (position < end) {
      const { bytesRead } = await input.read(
        buffer,
        0,
        Math.min(buffer.length, end - position),
        position,
      );
      if (bytesRead === 0)
        throw new BackupTruncatedError(backup.path, "it became shorter while it was read");
      await out.write(buffer.subarray(0, bytesRead));
      position += bytesRead;
    }
    await out.sync();
  } finally {
    await out.close();
    await input.close();
  }
}

/** Whether `path` exists (a backup's target, a restore's data directory). */
export async function pathExists(path: string): Promise<boolean> {
  return stat(path).then(
    () => true,
    () => false,
  );
}
