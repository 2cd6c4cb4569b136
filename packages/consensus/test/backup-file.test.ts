/**
 * The backup file format (backup-file.ts): a round trip, and every way a
 * file is refused, each by its typed error naming the problem: not a backup,
 * another format version, a header length out of bounds, a truncated prefix,
 * header or snapshot, bytes after the snapshot, a snapshot whose SHA-256 is
 * not the header's, a keyring sealed to another owner, a keyring moved next
 * to another snapshot, a storage policy this node does not know. The header's
 * storage policy round-trips, and its absence (an older backup) reads as
 * unset. A refused write leaves nothing behind.
 */
import { createHash } from "node:crypto";
import { mkdtemp, readdir, readFile, rm, stat, truncate, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { generateKeyPair } from "@metropolis/pki";
import { api, common } from "@metropolis/proto";
import {
  BackupFormatError,
  BackupHashMismatchError,
  BackupOwnerMismatchError,
  BackupTruncatedError,
} from "../src/backup-errors";
import {
  backupKeyringAt,
  backupPrefixBytes,
  encodeBackupPrefix,
  extractSnapshot,
  maxHeaderBytes,
  openBackupKeyring,
  readBackupFile,
  writeBackupFile,
} from "../src/backup-file";
import { wrapKeyring } from "../src/keyring-wrap";
import { SecretKeyring } from "../src/secret-keyring";

let dir: string;
beforeEach(async () => {
  dir = await mkdtemp(join(tmpdir(), "backup-file-"));
});
afterEach(async () => {
  await rm(dir, { recursive: true, force: true });
});

const owner = generateKeyPair();
const keyring = SecretKeyring.generate();

/** A header for `snapshot`, its keyring sealed to `to` (default: the owner). */
function headerFor(snapshot: Buffer, to: Uint8Array = owner.publicKey): api.BackupHeader {
  const sha256 = createHash("sha256").update(snapshot).digest();
  return {
    clusterCaCertificate: Buffer.from("not parsed here"),
    etcdClusterId: "1234abcd",
    etcdMemberId: "5678ef",
    takenByNodeId: "metropolis-0123",
    revision: 42,
    takenAtUnixMs: 1_700_000_000_000,
    nodeVersions: [{ nodeId: "metropolis-0123", version: "0.1.0", state: "NODE_STATE_UP" }],
    snapshotSize: snapshot.length,
    snapshotSha256: sha256,
    ownerPublicKey: Buffer.from(to),
    sealedKeyring: wrapKeyring(keyring, to, backupKeyringAt(sha256)),
    nodeVersion: "0.1.0",
    storagePolicy: common.StoragePolicy.AUTHENTICATED_ENCRYPTED,
  };
}

/** Writes a backup of `snapshot` and returns its path. */
async function backup(snapshot: Buffer, header = headerFor(snapshot)): Promise<string> {
  const snapshotPath = join(dir, "snapshot");
  await writeFile(snapshotPath, snapshot);
  const path = join(dir, "cluster.backup");
  await writeBackupFile(path, header, snapshotPath);
  return path;
}

const snapshot = Buffer.concat([
  Buffer.from("etcd bbolt database "),
  Buffer.alloc(3 * 1024 * 1024, 7),
]);

describe("backup file", () => {
  it("round-trips: header, snapshot, keyring opened with the owner's key; mode 0600, no temporary left", async () => {
    const path = await backup(snapshot);
    expect((await stat(path)).mode & 0o777).toBe(0o600);
    expect((await readdir(dir)).sort()).toEqual(["cluster.backup", "snapshot"]);
    const verified = await readBackupFile(path);
    expect(verified.header.revision).toBe(42);
    expect(verified.header.snapshotSize).toBe(snapshot.length);
    expect(verified.header.storagePolicy).toBe(common.StoragePolicy.AUTHENTICATED_ENCRYPTED);
    expect(openBackupKeyring(verified, owner.privateKey).equals(keyring)).toBe(true);
    const out = join(dir, "extracted");
    await extractSnapshot(verified, out);
    expect((await readFile(out)).equals(snapshot)).toBe(true);
    expect((await stat(out)).mode & 0o777).toBe(0o600);
  });

  it("refuses a file that is not a backup", async () => {
    const path = join(dir, "other");
    await writeFile(path, "hello, this is some other file entirely");
    await expect(readBackupFile(path)).rejects.toThrow(
      new BackupFormatError(path, "it is not a Metropolis-TS backup (no MTBACKUP magic)"),
    );
    await writeFile(path, "");
    await expect(readBackupFile(path)).rejects.toBeInstanceOf(BackupFormatError);
  });

  it("refuses another format version", async () => {
    const path = await backup(snapshot);
    const bytes = await readFile(path);
    bytes.writeUInt32BE(2, 8);
    await writeFile(path, bytes);
    await expect(readBackupFile(path)).rejects.toThrow(
      /format version is 2; this node reads version 1/,
    );
  });

  it("refuses a header length out of bounds before reading the header", async () => {
    const path = await backup(snapshot);
    const bytes = await readFile(path);
    bytes.writeUInt32BE(maxHeaderBytes + 1, 12);
    await writeFile(path, bytes);
    await expect(readBackupFile(path)).rejects.toThrow(
      new BackupFormatError(
        path,
        `its header length is ${maxHeaderBytes + 1} bytes (1 to ${maxHeaderBytes})`,
      ),
    );
  });

  it("refuses a truncated file: within the prefix, the header, the snapshot", async () => {
    const path = await backup(snapshot);
    const prefix = encodeBackupPrefix(headerFor(snapshot));
    await truncate(path, backupPrefixBytes - 2);
    await expect(readBackupFile(path)).rejects.toBeInstanceOf(BackupTruncatedError);
    await backup(snapshot);
    await truncate(path, prefix.length - 10);
    await expect(readBackupFile(path)).rejects.toThrow(/ends within its header/);
    await backup(snapshot);
    await truncate(path, prefix.length + 1000);
    await expect(readBackupFile(path)).rejects.toThrow(
      new BackupTruncatedError(path, `it holds 1000 of the snapshot's ${snapshot.length} bytes`),
    );
  });

  it("refuses bytes after the snapshot", async () => {
    const path = await backup(snapshot);
    await writeFile(path, Buffer.concat([await readFile(path), Buffer.from("x")]));
    await expect(readBackupFile(path)).rejects.toThrow(/1 bytes after the snapshot/);
  });

  it("refuses a snapshot whose SHA-256 is not the header's (one flipped byte)", async () => {
    const path = await backup(snapshot);
    const bytes = await readFile(path);
    bytes[bytes.length - 100] ^= 1;
    await writeFile(path, bytes);
    await expect(readBackupFile(path)).rejects.toBeInstanceOf(BackupHashMismatchError);
    await expect(readBackupFile(path)).rejects.toThrow(/the file is corrupted or was altered/);
  });

  it("refuses a malformed header", async () => {
    const path = await backup(snapshot, {
      ...headerFor(snapshot),
      snapshotSha256: Buffer.alloc(5),
    });
    await expect(readBackupFile(path)).rejects.toThrow(
      new BackupFormatError(path, "its header has a 5-byte snapshot SHA-256, not 32"),
    );
    const garbage = Buffer.concat([
      encodeBackupPrefix(headerFor(snapshot)).subarray(0, backupPrefixBytes),
    ]);
    garbage.writeUInt32BE(4, 12);
    await writeFile(path, Buffer.concat([garbage, Buffer.from([0xff, 0xff, 0xff, 0xff])]));
    await expect(readBackupFile(path)).rejects.toThrow(/its header does not decode/);
  });

  it("reads a header without a storage policy (an older backup) as unset, and refuses one it does not know", async () => {
    const older = await readBackupFile(
      await backup(snapshot, {
        ...headerFor(snapshot),
        storagePolicy: common.StoragePolicy.UNSPECIFIED,
      }),
    );
    expect(older.header.storagePolicy).toBe(common.StoragePolicy.UNSPECIFIED);
    const path = await backup(snapshot, {
      ...headerFor(snapshot),
      storagePolicy: common.StoragePolicy.UNRECOGNIZED,
    });
    await expect(readBackupFile(path)).rejects.toThrow(
      new BackupFormatError(
        path,
        "its header names storage policy -1, which this node does not know (it knows STORAGE_POLICY_UNSPECIFIED, STORAGE_POLICY_INSECURE, STORAGE_POLICY_ENCRYPTED, STORAGE_POLICY_AUTHENTICATED_ENCRYPTED)",
      ),
    );
  });

  it("does not open for another owner's key", async () => {
    const verified = await readBackupFile(await backup(snapshot));
    const thief = generateKeyPair();
    expect(() => openBackupKeyring(verified, thief.privateKey)).toThrow(BackupOwnerMismatchError);
    expect(() => openBackupKeyring(verified, thief.privateKey)).toThrow(
      /it is sealed to owner key [0-9a-f]{64}, not to the given key [0-9a-f]{64}/,
    );
  });

  it("does not open a keyring moved next to another snapshot", async () => {
    const other = Buffer.from("another snapshot");
    const moved = { ...headerFor(other), sealedKeyring: headerFor(snapshot).sealedKeyring };
    const verified = await readBackupFile(await backup(other, moved));
    expect(() => openBackupKeyring(verified, owner.privateKey)).toThrow(
      /its keyring does not open with the given owner key/,
    );
  });

  it("leaves nothing behind when the snapshot to write cannot be read", async () => {
    const path = join(dir, "cluster.backup");
    await expect(writeBackupFile(path, headerFor(snapshot), join(dir, "missing"))).rejects.toThrow(
      /ENOENT/,
    );
    expect(await readdir(dir)).toEqual([]);
  });
});
