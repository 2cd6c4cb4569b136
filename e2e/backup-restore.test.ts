/**
 * e2e backup and restore after quorum loss (issue 38 part 1): three real
 * consensus members; labels written; `metroctl cluster backup`; more labels
 * written; two members SIGKILLed and their roots deleted (quorum lost for
 * good) and the third stopped; then `metropolis-node --recover-from FILE
 * --owner-key KEY` on a fresh root at an address of its own. Every record and
 * label up to the backup is there, the later ones are not (and the restore's
 * report says so), new writes work, and the owner's credentials, unchanged,
 * still work. Before that, a corrupted and a foreign backup, and another
 * owner's key, are refused with a clear error, leaving the root without any
 * node state.
 *
 * Then two new nodes register into the restored cluster, are approved and
 * given the consensus role: three voting members again.
 *
 * Old members rejoining, as learners after proving their etcd data stale, are
 * restore-rejoin.test.ts's; here they are gone or stopped.
 */
import { copyFile, mkdtemp, readdir, readFile, stat, writeFile } from "node:fs/promises";
import { join } from "node:path";
import { generateKeyPair, privateKeyToPem } from "@metropolis/pki";
import { eventually } from "@metropolis/supervisor/testing";
import { removeNodeRoot } from "../local-cluster/src/node-root-removal";
import type { NodeView } from "@metropolis/metroctl";
import { curatorPort, E2eCluster, unboxed } from "./e2e-cluster";

jest.setTimeout(600_000);

let e2e: E2eCluster;

beforeAll(async () => {
  e2e = await E2eCluster.create("backup-restore", { nodes: 3 });
  await e2e.up();
});

afterAll(async () => {
  await e2e?.teardown();
});

/** metroctl as the owner (the cluster's config dir) against `endpoint` only. */
const metroctlAt = (endpoint: string, args: readonly string[]) =>
  e2e.cluster.metroctl(args, { endpoints: [endpoint] });

it("restores a cluster that lost its quorum from a backup, up to the backup and no further", async () => {
  const [n1, n2, n3] = [e2e.node(1), e2e.node(2), e2e.node(3)];
  const members = [n1, n2, n3];
  for (const n of members) await e2e.cluster.metroctlOk(["label", n.id, "backup=before"]);

  const file = join(e2e.dir, "cluster.backup");
  const started = performance.now();
  const backup = await e2e.cluster.metroctlOk([
    "cluster",
    "backup",
    "-o",
    file,
    "--format",
    "json",
  ]);
  e2e.note("cluster backup", performance.now() - started);
  const view: { sizeBytes: number; revision: number; nodes: number } = JSON.parse(backup);
  expect(view.nodes).toBe(3);
  expect((await stat(file)).mode & 0o777).toBe(0o600);
  e2e.cluster.record(
    `backup: ${view.sizeBytes} bytes at revision ${view.revision}`,
    view.sizeBytes,
  );

  for (const n of members) await e2e.cluster.metroctlOk(["label", n.id, "after=1"]);

  // Quorum lost for good: two members killed and their roots gone; the third stopped.
  await e2e.cluster.killNode(n2);
  await e2e.cluster.killNode(n3);
  await removeNodeRoot(n2.root);
  await removeNodeRoot(n3.root);
  await e2e.cluster.stopNode(n1);

  const ownerKey = join(e2e.cluster.metroctlDir, "owner-key.pem");
  const refused = async (what: string, backupFile: string, key: string, expected: RegExp) => {
    const root = await mkdtemp(join(e2e.dir, `refused-${what}-`));
    const proc = await e2e.spawn({
      name: `refused-${what}`,
      root,
      configPath: e2e.cluster.nodeConfigPath,
      extraArgs: ["--recover-from", backupFile, "--owner-key", key],
    });
    const exit = await proc.exited;
    expect({ what, exit }).toEqual({ what, exit: { code: 1, signal: null } });
    expect(unboxed(proc.stderr())).toMatch(expected);
    // Nothing of a node was written: no data, no sealed configuration.
    expect(await readdir(join(root, "esp", "metropolis")).catch(() => [])).toEqual([]);
    expect(await readdir(join(root, "data")).catch(() => [])).toEqual([]);
  };
  const corrupted = join(e2e.dir, "corrupted.backup");
  const bytes = await readFile(file);
  bytes[bytes.length - 64] ^= 0xff;
  await writeFile(corrupted, bytes);
  await refused(
    "corrupted",
    corrupted,
    ownerKey,
    /snapshot's SHA-256 is [0-9a-f]+, but its header says/,
  );
  const truncated = join(e2e.dir, "truncated.backup");
  await writeFile(truncated, bytes.subarray(0, bytes.length - 1000));
  await refused("truncated", truncated, ownerKey, /holds \d+ of the snapshot's \d+ bytes/);
  const foreignKey = join(e2e.dir, "foreign-owner-key.pem");
  await writeFile(foreignKey, privateKeyToPem(generateKeyPair().privateKey), { mode: 0o600 });
  await refused("foreign", file, foreignKey, /sealed to owner key [0-9a-f]+, not to the given key/);

  // The restore, on a fresh root at a new address.
  const root = await mkdtemp(join(e2e.dir, "restored-"));
  const kept = join(e2e.dir, "kept.backup");
  await copyFile(file, kept);
  const restoreStarted = performance.now();
  const restored = await e2e.spawn({
    name: "restored",
    root,
    configPath: e2e.cluster.nodeConfigPath,
    extraArgs: ["--recover-from", kept, "--owner-key", ownerKey],
  });
  const leading = await restored.waitForProgress("curator.leading", 120_000);
  e2e.note("restore: start to curator leading", performance.now() - restoreStarted);
  const report = restored
    .lines()
    .map((l) => l.message ?? l.raw)
    .filter((t) => t.includes("recover: "));
  expect(report.join("\n")).toMatch(
    new RegExp(
      `every write up to revision ${view.revision} is restored; writes made after the backup was taken are lost`,
    ),
  );
  expect(report.join("\n")).toMatch(/no longer consensus members .*: /);

  const endpoint = `${restored.address}:${curatorPort}`;
  const nodes = async (): Promise<NodeView[]> => {
    const res = await metroctlAt(endpoint, ["nodes", "-o", "json"]);
    if (res.exitCode !== 0) throw new Error(res.stderr);
    const list: NodeView[] = JSON.parse(res.stdout);
    return list;
  };
  const restoredNodes = await eventually(
    async () => {
      const list = await nodes();
      const self = list.find((n) => n.id === leading.nodeId);
      if (self?.state !== "UP" || self.health !== "HEALTHY") {
        throw new Error(`restored node not UP and HEALTHY yet: ${JSON.stringify(self)}`);
      }
      return list;
    },
    "the restored node UP and HEALTHY",
    { timeoutMs: 120_000 },
  );
  e2e.note("restore: start to restored node UP and HEALTHY", performance.now() - restoreStarted);
  // Every record of the backup, with the label written before it and none written after.
  for (const n of members) {
    const found = restoredNodes.find((r) => r.id === n.id);
    expect({ id: n.id, labels: found?.labels, roles: found?.roles }).toEqual({
      id: n.id,
      labels: { backup: "before" },
      // Their etcd members belong to the old cluster: the restore took the role away.
      roles: expect.not.arrayContaining(["consensus"]),
    });
  }
  const self = restoredNodes.find((r) => r.id === leading.nodeId);
  expect(self?.roles).toEqual(["consensus", "controller"]);

  // New writes work; the owner's certificate, unchanged, still works (every call above used it).
  const label = await metroctlAt(endpoint, ["label", leading.nodeId, "restored=yes"]);
  expect(label).toMatchObject({ exitCode: 0 });
  expect((await nodes()).find((n) => n.id === leading.nodeId)?.labels).toEqual({
    restored: "yes",
  });
  // The secrets as of the backup open with the restored keyring: the register ticket (sealed) is
  // read, and a rotation re-seals every secret of the cluster under a new key.
  const params = await metroctlAt(endpoint, [
    "register-params",
    "-o",
    join(e2e.dir, "register.pb"),
  ]);
  expect(params).toMatchObject({ exitCode: 0, stderr: "" });
  const rotation = await metroctlAt(endpoint, ["rotate-secrets-key", "-o", "json"]);
  expect(rotation).toMatchObject({ exitCode: 0, stderr: "" });
  const rotated: { resealed: number } = JSON.parse(rotation.stdout);
  expect(rotated.resealed).toBeGreaterThan(0);
  const members2 = await metroctlAt(endpoint, ["cluster", "members", "-o", "json"]);
  expect(members2.exitCode).toBe(0);
  const consensus: { members: Array<{ nodeId: string; status: string }> } = JSON.parse(
    members2.stdout,
  );
  expect(consensus.members.map((m) => [m.nodeId, m.status])).toEqual([[leading.nodeId, "voter"]]);

  // Two new nodes register into the restored cluster, are approved and become members.
  const joinStarted = performance.now();
  const newIds: string[] = [];
  for (const name of ["new1", "new2"]) {
    const params = join(e2e.dir, `${name}.pb`);
    expect(await metroctlAt(endpoint, ["register-params", "-o", params])).toMatchObject({
      exitCode: 0,
    });
    const proc = await e2e.spawn({
      name,
      root: await mkdtemp(join(e2e.dir, `${name}-`)),
      parametersPath: params,
      configPath: e2e.cluster.nodeConfigPath,
    });
    const id = await eventually(
      async () => {
        if (!proc.running) throw new Error(`${name} exited: ${proc.stderr()}`);
        const pending: NodeView[] = JSON.parse(
          (await metroctlAt(endpoint, ["approve", "-o", "json"])).stdout,
        );
        return pending.find((n) => !newIds.includes(n.id))?.id;
      },
      `${name} registered (NEW)`,
      { timeoutMs: 60_000 },
    );
    newIds.push(id);
    const step = async (args: string[]) => {
      const res = await metroctlAt(endpoint, args);
      if (res.exitCode !== 0) throw new Error(`metroctl ${args.join(" ")}: ${res.stderr}`);
    };
    await step(["approve", id]);
    await step([
      "wait",
      id,
      "--state",
      "UP",
      "--health",
      "HEALTHY",
      "--timeout",
      "90",
      "--interval",
      "0.2",
    ]);
    // HEALTHY is its heartbeat; its address comes with its status, which the consensus role needs
    // (FAILED_PRECONDITION "has not reported its external address yet" otherwise: seen once).
    await eventually(
      async () => {
        const node = (await nodes()).find((n) => n.id === id);
        if (!node?.address) throw new Error(`${name} has reported no address yet`);
        return node.address;
      },
      `${name}'s address reported`,
      { timeoutMs: 60_000 },
    );
    await step(["set-role", id, "--consensus", "on"]);
    // etcd takes one learner at a time: the next node's role waits for this one to vote.
    await eventually(
      async () => {
        const res = await metroctlAt(endpoint, ["cluster", "members", "-o", "json"]);
        const now: { members: Array<{ nodeId: string; status: string }> } = JSON.parse(res.stdout);
        const voters = now.members.filter((m) => m.status === "voter").map((m) => m.nodeId);
        return [leading.nodeId, ...newIds].every((v) => voters.includes(v));
      },
      `${name} a voting member`,
      { timeoutMs: 120_000 },
    );
  }
  e2e.note("two new members joined the restored cluster", performance.now() - joinStarted);
});
