/**
 * The storage policy of a node restored from a backup (recoverNode): the
 * backup's header carries the cluster's storage policy, read from its
 * configuration when Management.BackupCluster builds the header, and the
 * restore creates its data partition with it and seals it in the node's
 * configuration. A backup whose header has no policy (taken before the field
 * existed) is restored `encrypted`, and the restore says so.
 *
 * Real etcd throughout: a bootstrapped cluster whose curator leader serves
 * Management over mTLS (the owner takes the backups through it), and each
 * restore runs etcd's own snapshot restore and a restored member on a fresh
 * node root.
 */
import { randomInt } from "node:crypto";
import { createWriteStream } from "node:fs";
import { mkdtemp, readFile, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import {
  localTimings,
  openBackupKeyring,
  readBackupFile,
  writeBackupFile,
  type VerifiedBackup,
} from "@metropolis/consensus";
import { freePort } from "@metropolis/consensus/testing";
import { managementServer, managementService } from "@metropolis/curator";
import { startLeader, type LeaderFixture } from "@metropolis/curator/testing";
import { placeNodeRoot } from "@metropolis/localstorage";
import { api, common } from "@metropolis/proto";
import { recoverNode, type RecoveryReport } from "../src/recover-node";
import { readSealedConfiguration } from "../src/sealed-configuration";
import { dataPolicyOf } from "../src/storage-policy";

jest.setTimeout(120_000);

let leader: LeaderFixture;
let management: api.ManagementClient;
const dirs: string[] = [];

beforeAll(async () => {
  leader = await startLeader({
    configuration: { storagePolicy: common.StoragePolicy.INSECURE, heartbeatTimeoutMs: 0 },
    services: (ctx) => [[managementService, managementServer(ctx)]],
  });
  management = await leader.client(api.ManagementClient, "owner");
}, 60_000);

afterAll(async () => {
  await leader?.stop();
  for (const dir of dirs) await rm(dir, { recursive: true, force: true });
});

async function tempDir(name: string): Promise<string> {
  const dir = await mkdtemp(join(tmpdir(), `recover-node-${name}-`));
  dirs.push(dir);
  return dir;
}

/** Takes a backup through Management.BackupCluster as the owner and writes it as `metroctl cluster backup` does. */
async function takeBackup(name: string): Promise<VerifiedBackup> {
  const dir = await tempDir(name);
  const snapshotPath = join(dir, "snapshot.db");
  const out = createWriteStream(snapshotPath, { mode: 0o600 });
  let header: api.BackupHeader | undefined;
  for await (const message of management.backupCluster({})) {
    const m: api.BackupClusterResponse = message;
    if (m.kind?.$case === "chunk") {
      const chunk = m.kind.chunk;
      if (!out.write(chunk)) await new Promise<void>((resolve) => out.once("drain", resolve));
    } else if (m.kind?.$case === "finished") {
      header = m.kind.finished;
    }
  }
  await new Promise<void>((resolve, reject) =>
    out.end((e?: Error | null) => (e ? reject(e) : resolve())),
  );
  if (header === undefined) throw new Error("the backup stream ended without its header");
  const path = join(dir, "cluster.backup");
  await writeBackupFile(path, header, snapshotPath);
  return readBackupFile(path);
}

/** The same backup rewritten as a backup of the older format (its header without a storage policy). */
async function withoutStoragePolicy(backup: VerifiedBackup): Promise<VerifiedBackup> {
  const dir = await tempDir("older");
  const snapshotPath = join(dir, "snapshot.db");
  const bytes = await readFile(backup.path);
  await writeFile(snapshotPath, bytes.subarray(backup.snapshotOffset), { flag: "wx", mode: 0o600 });
  const path = join(dir, "older.backup");
  await writeBackupFile(
    path,
    { ...backup.header, storagePolicy: common.StoragePolicy.UNSPECIFIED },
    snapshotPath,
  );
  return readBackupFile(path);
}

/** What a restore left on the node's root: its sealed configuration's policy and its data partition's. */
interface Restored {
  report: RecoveryReport;
  said: string[];
  sealedPolicy: common.StoragePolicy;
  partitionPolicy: string | undefined;
  marker: unknown;
}

/** Restores `backup` onto a fresh node root, as `metropolis-node --recover-from` does. */
async function restore(name: string, backup: VerifiedBackup): Promise<Restored> {
  const root = await tempDir(name);
  // As metropolis-node places it before the restore: its ESP directory made, its ephemeral one empty.
  const storage = placeNodeRoot(root);
  await storage.esp.metropolis.mkdirAll();
  await storage.ephemeral.wipe();
  const address = `127.${randomInt(100, 250)}.${randomInt(1, 250)}.${randomInt(2, 250)}`;
  const said: string[] = [];
  const report = await recoverNode({
    storage,
    machineKeyPath: join(root, "machine.key"),
    address,
    consensusPort: await freePort(address),
    curatorPort: await freePort(address),
    backup,
    keyring: openBackupKeyring(backup, leader.owner.privateKey),
    timings: localTimings,
    log: (line) => said.push(line),
  });
  // The node's next start: its sealed configuration names the policy its data partition mounts with.
  const again = placeNodeRoot(root);
  const sealed = await readSealedConfiguration(again, join(root, "machine.key"));
  if (sealed === undefined) throw new Error(`the restore on ${root} sealed no configuration`);
  await again.data.mountExisting({
    policy: dataPolicyOf(sealed.storagePolicy),
    nodeUnlockKey: sealed.nodeUnlockKey,
    clusterUnlockKey: sealed.clusterUnlockKey,
  });
  const partitionPolicy = again.data.policy;
  again.data.unmount();
  const marker: unknown = JSON.parse(
    await readFile(join(root, "data", ".metropolis-data.json"), "utf8"),
  );
  return { report, said, sealedPolicy: sealed.storagePolicy, partitionPolicy, marker };
}

it("carries the cluster's storage policy in the backup's header, and the restore's data partition has it", async () => {
  // The cluster was bootstrapped insecure.
  const insecure = await takeBackup("insecure");
  expect(insecure.header.storagePolicy).toBe(common.StoragePolicy.INSECURE);
  const first = await restore("restore-insecure", insecure);
  expect(first.report).toMatchObject({
    storagePolicy: "STORAGE_POLICY_INSECURE",
    storagePolicyFromBackup: true,
  });
  expect(first.sealedPolicy).toBe(common.StoragePolicy.INSECURE);
  expect(first.partitionPolicy).toBe("insecure");
  expect(first.marker).toMatchObject({ policy: "insecure" });
  expect(first.said).toContain(
    "data partition created with storage policy STORAGE_POLICY_INSECURE, the cluster's as the backup records it",
  );

  // The owner changes the policy: the next backup carries the new one, and its restore uses it.
  await new Promise<void>((resolve, reject) =>
    management.configureCluster(
      api.ConfigureClusterRequest.fromPartial({
        baseConfig: { storagePolicy: common.StoragePolicy.INSECURE },
        newConfig: { storagePolicy: common.StoragePolicy.AUTHENTICATED_ENCRYPTED },
        updateMask: ["storage_policy"],
      }),
      (e) => (e ? reject(e) : resolve()),
    ),
  );
  const authenticated = await takeBackup("authenticated");
  expect(authenticated.header.storagePolicy).toBe(common.StoragePolicy.AUTHENTICATED_ENCRYPTED);
  const second = await restore("restore-authenticated", authenticated);
  expect(second.report).toMatchObject({
    storagePolicy: "STORAGE_POLICY_AUTHENTICATED_ENCRYPTED",
    storagePolicyFromBackup: true,
  });
  expect(second.sealedPolicy).toBe(common.StoragePolicy.AUTHENTICATED_ENCRYPTED);
  expect(second.partitionPolicy).toBe("authenticated-encrypted");
  expect(second.marker).toMatchObject({ policy: "authenticated-encrypted" });
});

it("restores a backup of the older format, without a storage policy, encrypted, and says so", async () => {
  const older = await withoutStoragePolicy(await takeBackup("before-older"));
  expect(older.header.storagePolicy).toBe(common.StoragePolicy.UNSPECIFIED);
  const restored = await restore("restore-older", older);
  expect(restored.report).toMatchObject({
    storagePolicy: "STORAGE_POLICY_ENCRYPTED",
    storagePolicyFromBackup: false,
  });
  expect(restored.sealedPolicy).toBe(common.StoragePolicy.ENCRYPTED);
  expect(restored.partitionPolicy).toBe("encrypted");
  expect(restored.said).toContain(
    "data partition created with storage policy STORAGE_POLICY_ENCRYPTED: the backup (an older format) does not record the cluster's storage policy, so the restore uses STORAGE_POLICY_ENCRYPTED; the cluster's own is in its configuration (`metroctl cluster configure get storage_policy`)",
  );
});
