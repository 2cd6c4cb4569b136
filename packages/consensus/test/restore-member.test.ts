/**
 * restoreMember against real etcd processes: a member's snapshot (etcd's
 * Maintenance.Snapshot) restored on another node as a new one-member cluster
 * (a new etcd cluster ID), the old cluster's leases revoked, the old members'
 * keyring copies dropped, the caller's writes run on it, and the member then
 * started from that data as after any restart: its keyring loads (from the
 * copy the restore wrote) and opens the secrets sealed before the snapshot.
 * A snapshot etcd refuses leaves nothing behind.
 */
import { access, readFile, writeFile } from "node:fs/promises";
import { join } from "node:path";
import { generateKeyPair } from "@metropolis/pki";
import { snapshotMemberToFile, TestMembers } from "@metropolis/consensus/testing";
import { localTimings } from "../src/etcd-flags";
import { unwrapKeyring } from "../src/keyring-wrap";
import { hasMemberData } from "../src/member-data";
import { restoreMember } from "../src/restore-member";
import { SecretKeyring } from "../src/secret-keyring";

jest.setTimeout(120_000);

const fixture = new TestMembers();
afterEach(() => fixture.cleanup());

it("restores a snapshot as a new one-member cluster whose member then restarts from it", async () => {
  const a = await fixture.node("ra");
  const old = await fixture.run(a, { bootstrap: true, timings: localTimings });
  const app = old.status.client.sub("restoretest");
  await app.kv.put("plain").value("before").exec();
  await app.kv
    .put("secret")
    .value(app.secrets.seal("secret", Buffer.from("s3cret")))
    .exec();
  // A lease of the old cluster, with a key on it: the restore revokes it.
  const lease = app.kv.lease(600);
  await lease.put("leased").value("x").exec();
  const oldCluster = (await old.status.client.kv.get("x").exec()).header.cluster_id;
  // The keyring as a backup carries it: wrapped for an owner key.
  const owner = generateKeyPair();
  const wrapped = old.status.wrapKeyringFor(owner.publicKey, "test backup");
  const keyring = unwrapKeyring(wrapped, owner.privateKey, "test backup");
  const snapshotPath = join(a.dir, "snapshot.db");
  const revision = await snapshotMemberToFile(old.status.clientSocket, snapshotPath);
  await app.kv.put("plain").value("after").exec();
  // Its keepalives stop; the lease itself stays in etcd, as a crashed holder's would.
  lease.release();
  await fixture.stop(old);

  const b = await fixture.node("rb");
  const restored = await restoreMember(
    {
      storage: b.storage,
      nodePrivateKey: b.privateKey,
      peer: b.peer,
      keyring,
      snapshotPath,
      timings: localTimings,
    },
    async (root) => {
      const sub = root.sub("restoretest");
      const plain = (await sub.kv.get("plain").string()) ?? "";
      const sealed = await sub.kv.get("secret").buffer();
      const leased = await sub.kv.get("leased").string();
      await sub.kv.put("written-by-restore").value("yes").exec();
      return {
        plain,
        secret: sealed ? (await sub.secrets.open("secret", sealed)).toString() : undefined,
        leased,
      };
    },
  );
  expect(restored.result).toEqual({ plain: "before", secret: "s3cret", leased: null });
  expect(restored.leasesRevoked).toBeGreaterThanOrEqual(1);
  expect(restored.droppedKeyringCopies).toEqual([a.nodeId]);
  expect(restored.clusterId).not.toBe(BigInt(oldCluster).toString(16));
  expect(restored.revision).toBeGreaterThan(revision);
  expect(await hasMemberData(b.storage)).toBe(true);

  // Started from the restored data as after any restart: its own keyring copy loads.
  const member = await fixture.run(b, { timings: localTimings });
  const sub = member.status.client.sub("restoretest");
  expect(await sub.kv.get("written-by-restore").string()).toBe("yes");
  const sealed = await sub.kv.get("secret").buffer();
  expect(sealed && (await sub.secrets.open("secret", sealed)).toString()).toBe("s3cret");
  expect((await member.status.members()).map((m) => m.name)).toEqual([b.nodeId]);
});

it("leaves nothing behind when etcd refuses the snapshot", async () => {
  const b = await fixture.node("rc");
  const snapshotPath = join(b.dir, "broken.db");
  await writeFile(snapshotPath, Buffer.alloc(64 * 1024, 1));
  const keyring = SecretKeyring.generate();
  await expect(
    restoreMember(
      {
        storage: b.storage,
        nodePrivateKey: b.privateKey,
        peer: b.peer,
        keyring,
        snapshotPath,
        timings: localTimings,
      },
      () => Promise.resolve(undefined),
    ),
  ).rejects.toThrow(/etcdctl snapshot restore failed/);
  expect(await hasMemberData(b.storage)).toBe(false);
  await expect(access(b.storage.data.etcd.data.fullPath)).rejects.toThrow(/ENOENT/);
  await expect(access(b.storage.data.etcd.peerPKI.key.fullPath)).rejects.toThrow(/ENOENT/);
  expect((await readFile(snapshotPath)).length).toBe(64 * 1024);
});

it("refuses a root too deep for the member's socket before writing anything", async () => {
  // A root whose ephemeral/consensus/restore.sock:0 is longer than a unix socket's path may be.
  const b = await fixture.node("r".repeat(80));
  const snapshotPath = join(b.dir, "never-read.db");
  await expect(
    restoreMember(
      {
        storage: b.storage,
        nodePrivateKey: b.privateKey,
        peer: b.peer,
        keyring: SecretKeyring.generate(),
        snapshotPath,
        timings: localTimings,
      },
      () => Promise.resolve(undefined),
    ),
  ).rejects.toThrow(
    /restore\.sock:0" is 1[0-9]{2} bytes long; a unix socket's path may be at most 107/,
  );
  expect(await hasMemberData(b.storage)).toBe(false);
  await expect(access(b.storage.data.etcd.peerPKI.key.fullPath)).rejects.toThrow(/ENOENT/);
});
