/**
 * `metroctl cluster backup` against a real curator leader (real etcd, real
 * mTLS): the file it writes (mode 0600, checked header, a snapshot etcdctl
 * accepts, the keyring opening with the owner key and opening the cluster's
 * sealed secrets), what it prints in text and JSON, its spinner on a
 * terminal, and that a backup that cannot be written leaves nothing behind.
 */
import { execFile } from "node:child_process";
import { readdir, stat } from "node:fs/promises";
import { join } from "node:path";
import { promisify } from "node:util";
import {
  extractSnapshot,
  openBackupKeyring,
  readBackupFile,
  sealedKeyUsage,
} from "@metropolis/consensus";
import { common } from "@metropolis/proto";
import {
  clusterPerFile,
  metroctl,
  tempDir,
  TerminalCapture,
  type MetroctlCluster,
} from "./cluster-fixture";

let cluster: MetroctlCluster;
let config: string;

clusterPerFile((c, dir) => ((cluster = c), (config = dir)));

describe("cluster backup", () => {
  it("writes a checked backup whose keyring opens with the owner key", async () => {
    const dir = await tempDir("backup");
    const file = join(dir, "cluster.backup");
    const root = cluster.leader.member.status.client.kv;
    const before = BigInt((await root.get("anything").exec()).header.revision);
    const run = await metroctl(config, ["cluster", "backup", "-o", file]);
    expect(run.stderr).toBe("");
    expect(run.code).toBe(0);
    expect(run.stdout).toMatch(
      new RegExp(
        `^backup written to ${file}: [0-9.]+ MiB of etcd at revision \\d+, 1 nodes, taken by ${cluster.leader.ctx.self.nodeId} at `,
      ),
    );
    expect((await stat(file)).mode & 0o777).toBe(0o600);
    // Only the backup: the temporary snapshot and file are gone.
    expect(await readdir(dir)).toEqual(["cluster.backup"]);

    const backup = await readBackupFile(file);
    const { header } = backup;
    expect(BigInt(header.revision)).toBeGreaterThanOrEqual(before);
    expect(header.clusterCaCertificate.equals(cluster.leader.caCertificate)).toBe(true);
    expect(header.takenByNodeId).toBe(cluster.leader.ctx.self.nodeId);
    expect(header.nodeVersions.map((n) => n.nodeId)).toEqual([cluster.leader.ctx.self.nodeId]);
    expect(header.ownerPublicKey.equals(cluster.leader.owner.publicKey)).toBe(true);
    // The cluster's storage policy (the fixture's configuration): the restore's data partition gets it.
    expect(header.storagePolicy).toBe(common.StoragePolicy.ENCRYPTED);
    const keyring = openBackupKeyring(backup, cluster.leader.owner.privateKey);
    // The cluster's keyring: it names every key that seals a secret in etcd.
    for (const id of (await sealedKeyUsage(root)).keys()) expect(keyring.has(id)).toBe(true);

    // etcd's own check of its snapshot (its appended hash, its database).
    const snapshot = join(dir, "snapshot.db");
    await extractSnapshot(backup, snapshot);
    const { stdout } = await promisify(execFile)(
      "etcdctl",
      ["snapshot", "status", snapshot, "-w", "json"],
      {
        env: { ...process.env, ETCDCTL_API: "3" },
      },
    );
    const status: unknown = JSON.parse(stdout);
    expect(status).toMatchObject({ revision: expect.any(Number), totalKey: expect.any(Number) });
    expect(header.snapshotSize).toBe((await stat(snapshot)).size);
  }, 30_000);

  it("prints JSON with --format json, and a spinner on a terminal", async () => {
    const dir = await tempDir("backup");
    const file = join(dir, "b");
    const stderr = new TerminalCapture();
    const run = await metroctl(config, ["cluster", "backup", "-o", file, "--format", "json"], {
      stderr,
    });
    expect(run.code).toBe(0);
    const view: unknown = JSON.parse(run.stdout);
    expect(view).toMatchObject({
      file,
      sizeBytes: expect.any(Number),
      revision: expect.any(Number),
      takenBy: cluster.leader.ctx.self.nodeId,
      nodes: 1,
    });
    expect(stderr.text).toContain("taking a backup of the cluster");
  }, 30_000);

  it("leaves nothing behind when the file cannot be written", async () => {
    const dir = await tempDir("backup");
    const run = await metroctl(config, ["cluster", "backup", "-o", join(dir, "missing", "b")]);
    expect(run.code).not.toBe(0);
    expect(run.stderr).toMatch(/ENOENT/);
    expect(await readdir(dir)).toEqual([]);
  }, 30_000);

  it("is listed in the help", async () => {
    const help = await metroctl(config, ["cluster", "--help"]);
    expect(`${help.stdout}${help.stderr}`).toMatch(
      /backup \[options\]\s+write a backup of the cluster/,
    );
  });
});
