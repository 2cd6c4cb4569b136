/**
 * No secret rests in plaintext in etcd's files. A cluster is bootstrapped,
 * two nodes register and commit (each CommitNode stores a cluster unlock
 * key), both become consensus members, the owner fetches the register
 * ticket; then every node stops, and every file under every member's etcd
 * data directory (the bbolt database under member/snap and the WAL under
 * member/wal) is read byte by byte. Neither the cluster CA's private key, nor
 * the etcd CA's, nor any cluster unlock key, nor the register ticket may
 * appear in them: not raw, not hex, not base64.
 */
import { readdir, readFile } from "node:fs/promises";
import { join } from "node:path";
import { waitFor } from "@metropolis/event";
import { etcdCertificateKv } from "@metropolis/consensus";
import { clusterCa } from "@metropolis/curator";
import { common } from "@metropolis/proto";
import { eventually } from "@metropolis/supervisor/testing";
import { homeOf, loopbackNet, TestClusterNode, TestOwner, type NodeRun } from "./cluster-fixture";

jest.setTimeout(180_000);

const address = loopbackNet();
const owner = new TestOwner();
const nodes: TestClusterNode[] = [];

afterAll(async () => {
  owner.close();
  for (const node of nodes) await node.remove();
});

/** Every file below `dir`, recursively. */
async function filesUnder(dir: string): Promise<string[]> {
  const entries = await readdir(dir, { withFileTypes: true, recursive: true });
  return entries.filter((e) => e.isFile()).map((e) => join(e.parentPath, e.name));
}

/** The forms a secret could be written in. */
function encodings(secret: Buffer): Array<[string, Buffer]> {
  return [
    ["raw", secret],
    ["hex", Buffer.from(secret.toString("hex"))],
    ["HEX", Buffer.from(secret.toString("hex").toUpperCase())],
    ["base64", Buffer.from(secret.toString("base64"))],
    ["base64url", Buffer.from(secret.toString("base64url"))],
  ];
}

async function register(node: TestClusterNode): Promise<{ run: NodeRun; id: string }> {
  const known = new Set((await owner.nodes()).map((n) => n.id));
  const run = await node.start(await owner.registerParameters());
  const pending = await eventually(
    async () =>
      (await owner.nodes()).find((n) => n.state === common.NodeState.NEW && !known.has(n.id)),
    "the node to register",
  );
  await owner.approve(pending.id);
  const home = await homeOf(run);
  return { run, id: home.credentials!.nodeId };
}

it("leaves no CA key, unlock key or register ticket in any etcd file of any member", async () => {
  for (let i = 1; i <= 3; i++) nodes.push(await TestClusterNode.create(address(i)));
  const [first, second, third] = nodes;
  const firstRun = await first.start(owner.bootstrapParameters());
  const firstHome = await homeOf(firstRun);
  await owner.takeOwnership(
    { host: first.address, port: 7835 },
    firstHome.credentials!.caCertificate,
  );
  const ids = [firstHome.credentials!.nodeId];
  for (const node of [second, third]) {
    const { run, id } = await register(node);
    ids.push(id);
    await eventually(
      async () => (await owner.nodes()).find((n) => n.id === id)?.status?.externalAddress,
      "the node to report its address",
    );
    await owner.setRoles(id, { consensusMember: true });
    await waitFor(run.manager.status, (s) => s.hasLocalConsensus);
  }
  const plane = await waitFor(firstRun.roleserver.values.localControlPlane, (c) => !!c);
  await eventually(async () => {
    const members = await plane!.consensus.members();
    return members.length === 3 && members.every((m) => !m.isLearner && m.name !== "");
  }, "three voting members");
  const ticket = Buffer.from(await owner.registerTicket());

  // The secrets, opened with the first member's keyring.
  const root = plane!.consensus.client;
  const curator = root.sub("curator");
  const consensus = root.sub("consensus");
  const open = async (client: typeof curator, key: string) => {
    const sealed = await client.kv.get(key).buffer();
    if (sealed === null) throw new Error(`${client.prefix}${key} is not in etcd`);
    return client.secrets.open(key, sealed);
  };
  const clusterCaKey = (await clusterCa(curator.secrets).load(etcdCertificateKv(curator.kv)))!
    .privateKey!;
  const secrets: Array<[string, Buffer]> = [
    ["the cluster CA seed", clusterCaKey],
    ["the etcd CA seed", await open(consensus, "keys/etcd-ca-privkey.bin")],
    ["the register ticket", ticket],
    ...(await Promise.all(
      ids.map(async (id): Promise<[string, Buffer]> => [
        `${id}'s cluster unlock key`,
        await open(curator, `/node_secrets/${id}/cluster_unlock_key`),
      ]),
    )),
  ];
  for (const [, secret] of secrets) expect(secret).toHaveLength(32);

  for (const node of nodes) await node.stop();
  let scanned = 0;
  let namesSeen = 0;
  for (const node of nodes) {
    const dataDir = join(node.dir, "root", "data", "etcd", "data");
    const files = await filesUnder(dataDir);
    expect(files.some((f) => f.endsWith(join("member", "snap", "db")))).toBe(true);
    expect(files.some((f) => f.includes(join("member", "wal")) && f.endsWith(".wal"))).toBe(true);
    for (const file of files) {
      const content = await readFile(file);
      scanned += content.length;
      // A positive control: what is not secret is there in plaintext.
      if (content.includes(Buffer.from(`/node_secrets/${ids[1]}/cluster_unlock_key`))) namesSeen++;
      for (const [what, secret] of secrets) {
        for (const [form, bytes] of encodings(secret)) {
          if (content.includes(bytes)) throw new Error(`${file} holds ${what} (${form})`);
        }
      }
    }
  }
  expect(namesSeen).toBeGreaterThanOrEqual(3);
  expect(scanned).toBeGreaterThan(0);
});
