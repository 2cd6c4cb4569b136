/**
 * e2e: a former consensus member rejoins a cluster restored from a backup
 * (issue 38 part 1, its last piece). Three real consensus members; `metroctl
 * cluster backup`; two members SIGKILLed (quorum lost), the third stopped;
 * only the killed n3's root is removed — n2's machine survives, its etcd data
 * holding the old cluster's member. The restore runs on a fresh root
 * (`metropolis-node --recover-from`): a new one-member etcd cluster, with a
 * new cluster ID, holding the old cluster's records.
 *
 * n2 is then started again on its kept root. It finds the restored curator
 * through its cluster directory — written onto its ESP by `metroctl cluster
 * directory`, the operator's one step (nodes find curators only through their
 * directory, and the restored node is a new node at a new address): the
 * restored cluster's directory from its leader, the very bytes the restored
 * node keeps — comes back UP as
 * itself, without the consensus role (the restore took it away), its stale
 * etcd data kept: nothing proved it stale yet. Given the consensus role by
 * the owner, the restored cluster adds it as a learner; n2 asks that cluster
 * over etcd's peer TLS which cluster it is, finds another cluster ID than
 * its data's and its own peer URL among the members, removes its etcd data
 * (only that), joins as a learner and is promoted: a voting member of the
 * restored cluster, with its node ID unchanged.
 *
 * n1, stopped since the quorum loss, is started last, with nothing copied:
 * its directory names n2, whose curator now follows the restored leader and
 * names it, so n1 reconnects by itself; given the role, it rejoins the same
 * way. Three voting members of the restored cluster.
 */
import { mkdtemp, readFile, stat } from "node:fs/promises";
import { join } from "node:path";
import { hexId, readMemberIdentity } from "@metropolis/consensus";
import { placeNodeRoot } from "@metropolis/localstorage";
import { eventually } from "@metropolis/supervisor/testing";
import { removeNodeRoot } from "../local-cluster/src/node-root-removal";
import type { NodeView } from "@metropolis/metroctl";
import { curatorPort, E2eCluster } from "./e2e-cluster";

jest.setTimeout(600_000);

let e2e: E2eCluster;

beforeAll(async () => {
  e2e = await E2eCluster.create("restore-rejoin", { nodes: 3 });
  await e2e.up();
});

afterAll(async () => {
  await e2e?.teardown();
});

/** metroctl as the owner (the cluster's config dir) against `endpoint` only. */
const metroctlAt = (endpoint: string, args: readonly string[]) =>
  e2e.cluster.metroctl(args, { endpoints: [endpoint] });

interface MembersJson {
  members: Array<{ nodeId: string; memberId: string; status: string }>;
  summary: string | null;
}

it("a former member whose etcd data is stale rejoins the restored cluster as a learner, then votes", async () => {
  const [n1, n2, n3] = [e2e.node(1), e2e.node(2), e2e.node(3)];
  const file = join(e2e.dir, "cluster.backup");
  await e2e.cluster.metroctlOk(["cluster", "backup", "-o", file]);

  // Quorum lost: two members killed, the third stopped. Only n3's root goes.
  await e2e.cluster.killNode(n2);
  await e2e.cluster.killNode(n3);
  await removeNodeRoot(n3.root);
  await e2e.cluster.stopNode(n1);
  const n2Root = placeNodeRoot(n2.root);
  const old = await readMemberIdentity(n2Root);

  // The restore, on a fresh root at a new address.
  const root = await mkdtemp(join(e2e.dir, "restored-"));
  const ownerKey = join(e2e.cluster.metroctlDir, "owner-key.pem");
  const restored = await e2e.spawn({
    name: "restored",
    root,
    configPath: e2e.cluster.nodeConfigPath,
    extraArgs: ["--recover-from", file, "--owner-key", ownerKey],
  });
  const leading = await restored.waitForProgress("curator.leading", 120_000);
  const endpoint = `${restored.address}:${curatorPort}`;
  const restoredIdentity = await readMemberIdentity(placeNodeRoot(root));
  expect(restoredIdentity.clusterId).not.toBe(old.clusterId);
  const nodeOf = async (id: string): Promise<NodeView | undefined> => {
    const res = await metroctlAt(endpoint, ["nodes", "-o", "json"]);
    if (res.exitCode !== 0) throw new Error(res.stderr);
    const list: NodeView[] = JSON.parse(res.stdout);
    return list.find((n) => n.id === id);
  };
  const upAndHealthy = (id: string, what: string) =>
    eventually(
      async () => {
        const node = await nodeOf(id);
        if (node?.state !== "UP" || node.health !== "HEALTHY") {
          throw new Error(`${what} not UP and HEALTHY yet: ${JSON.stringify(node)}`);
        }
        return node;
      },
      `${what} UP and HEALTHY`,
      { timeoutMs: 120_000 },
    );
  await upAndHealthy(leading.nodeId, "the restored node");

  // The operator's one step: `metroctl cluster directory` writes the restored cluster's directory
  // (it names the restored node as the cluster's curator) onto n2's ESP. Refused, writing
  // nothing, until the restored node has reported its address.
  const n2Directory = n2Root.esp.metropolis.clusterDirectory;
  await eventually(
    async () => {
      const res = await metroctlAt(endpoint, ["cluster", "directory", "-o", n2Directory.fullPath]);
      if (res.exitCode !== 0) throw new Error(res.stderr);
      return res;
    },
    "metroctl cluster directory naming the restored node",
    { timeoutMs: 60_000 },
  );
  const written = await n2Directory.read();
  expect(written.nodes.filter((n) => n.consensusMember).map((n) => n.id)).toEqual([leading.nodeId]);
  expect((await stat(n2Directory.fullPath)).mode & 0o777).toBe(0o644);
  // The same bytes as the directory the restored node keeps, once its worker has written it.
  const restoredDirectory = placeNodeRoot(root).esp.metropolis.clusterDirectory;
  await eventually(
    async () => {
      const own = await readFile(restoredDirectory.fullPath);
      const copy = await readFile(n2Directory.fullPath);
      if (!own.equals(copy))
        throw new Error("the restored node's directory differs from metroctl's");
      return true;
    },
    "metroctl's directory equal to the restored node's own",
    { timeoutMs: 60_000 },
  );

  const rejoinStarted = performance.now();
  e2e.cluster.startNode(n2);
  // Back as itself, without the consensus role, its stale data kept: nothing proved it stale.
  const back = await upAndHealthy(n2.id, "n2");
  expect(back.roles).not.toContain("consensus");
  expect((await readMemberIdentity(n2Root)).clusterId).toBe(old.clusterId);
  e2e.note("n2 UP and HEALTHY in the restored cluster", performance.now() - rejoinStarted);

  // The consensus role: the restored cluster adds n2 as a learner, n2 proves its data stale,
  // removes it and joins; promoted, it votes.
  const roleStarted = performance.now();
  const role = await metroctlAt(endpoint, ["set-role", n2.id, "--consensus", "on"]);
  expect(role).toMatchObject({ exitCode: 0 });
  const members = await eventually(
    async () => {
      const res = await metroctlAt(endpoint, ["cluster", "members", "-o", "json"]);
      if (res.exitCode !== 0) throw new Error(res.stderr);
      const view: MembersJson = JSON.parse(res.stdout);
      const voters = view.members.filter((m) => m.status === "voter").map((m) => m.nodeId);
      if (!(voters.includes(n2.id) && voters.includes(leading.nodeId))) {
        throw new Error(`not both voters yet: ${res.stdout}`);
      }
      return view;
    },
    "n2 a voting member of the restored cluster",
    { timeoutMs: 180_000 },
  );
  e2e.note("n2: consensus role to voting member", performance.now() - roleStarted);
  // The restored cluster's etcd member list, as its owner sees it.
  e2e.cluster.record(
    `restored cluster's members: ${members.members.map((m) => `${m.nodeId} ${m.memberId} ${m.status}`).join("; ")} (${members.summary ?? ""})`,
    0,
  );
  expect(members.members.map((m) => [m.nodeId, m.status]).sort()).toEqual(
    [
      [leading.nodeId, "voter"],
      [n2.id, "voter"],
    ].sort(),
  );
  // n2's own etcd member, asked over its unix socket: both voting.
  expect((await e2e.etcdMembers(n2)).map((m) => [m.name, m.isLearner]).sort()).toEqual(
    [
      [leading.nodeId, false],
      [n2.id, false],
    ].sort(),
  );

  // Its data now belongs to the restored cluster, as another member: the stale data is gone.
  const now = await readMemberIdentity(n2Root);
  expect(hexId(now.clusterId)).toBe(hexId(restoredIdentity.clusterId));
  expect(now.memberId).not.toBe(old.memberId);
  // Its node identity is unchanged: the same node ID, UP and HEALTHY, now with the role.
  const after = await upAndHealthy(n2.id, "n2 as a member");
  expect(after.roles).toContain("consensus");
  // It said why it removed the data.
  const said = n2.process?.lines().map((l) => l.message ?? l.raw) ?? [];
  expect(said.join("\n")).toMatch(
    new RegExp(
      `belongs to cluster ${hexId(old.clusterId)} .*answers for cluster ${hexId(restoredIdentity.clusterId)}, which counts https://`,
    ),
  );

  // n1, stopped since the quorum loss, comes back by itself: nothing copied. Its directory names
  // n2, whose curator (a follower again) names the restored leader. Given the role, it too proves
  // its data stale and joins: three voting members.
  const n1Root = placeNodeRoot(n1.root);
  const n1Old = await readMemberIdentity(n1Root);
  expect(n1Old.clusterId).toBe(old.clusterId);
  const n1Started = performance.now();
  e2e.cluster.startNode(n1);
  await upAndHealthy(n1.id, "n1");
  e2e.note("n1 UP and HEALTHY in the restored cluster, by itself", performance.now() - n1Started);
  expect((await readMemberIdentity(n1Root)).clusterId).toBe(old.clusterId);
  expect(await metroctlAt(endpoint, ["set-role", n1.id, "--consensus", "on"])).toMatchObject({
    exitCode: 0,
  });
  const three = await eventually(
    async () => {
      const res = await metroctlAt(endpoint, ["cluster", "members", "-o", "json"]);
      if (res.exitCode !== 0) throw new Error(res.stderr);
      const view: MembersJson = JSON.parse(res.stdout);
      const voters = view.members.filter((m) => m.status === "voter").map((m) => m.nodeId);
      if (voters.length !== 3 || !voters.includes(n1.id)) {
        throw new Error(`not three voters yet: ${res.stdout}`);
      }
      return view;
    },
    "n1 a voting member of the restored cluster",
    { timeoutMs: 180_000 },
  );
  e2e.note("n1: start to voting member", performance.now() - n1Started);
  e2e.cluster.record(
    `restored cluster's members: ${three.members.map((m) => `${m.nodeId} ${m.memberId} ${m.status}`).join("; ")} (${three.summary ?? ""})`,
    0,
  );
  expect(three.members.map((m) => m.nodeId).sort()).toEqual([leading.nodeId, n1.id, n2.id].sort());
  expect((await readMemberIdentity(n1Root)).clusterId).toBe(restoredIdentity.clusterId);
  expect((await upAndHealthy(n1.id, "n1 as a member")).roles).toContain("consensus");
});
