/**
 * e2e cold: a whole cluster going down and coming back. Three consensus
 * members lose power at once (SIGKILL to every node's process group: node,
 * etcd and all) and are powered on together; then the same after a graceful
 * shutdown of every node (what `local-cluster` does on Ctrl-C and resume).
 * Each time every node must come back from its own disk — sealed
 * configuration, etcd data — as the same node, with no record lost: same
 * node IDs, roles and three voting etcd members, all UP and HEALTHY.
 */
import type { NodeView } from "@metropolis/metroctl";
import { eventually } from "@metropolis/supervisor/testing";
import type { ClusterNode } from "../local-cluster/src/cluster-launcher";
import { E2eCluster } from "./e2e-cluster";

jest.setTimeout(240_000);

let e2e: E2eCluster;
let nodes: ClusterNode[];
let before: NodeView[];

/** What must survive a cold start: each node's ID, state and roles. */
const records = (views: NodeView[]) =>
  views
    .map((v) => ({ id: v.id, state: v.state, roles: v.roles }))
    .sort((a, b) => a.id.localeCompare(b.id));

beforeAll(async () => {
  e2e = await E2eCluster.create("cold", { nodes: 3 });
  await e2e.up();
  nodes = [1, 2, 3].map((i) => e2e.node(i));
  before = await e2e.cluster.listNodes();
});

afterAll(async () => {
  await e2e?.teardown();
});

/** All UP and HEALTHY, nothing lost, three voting etcd members, one curator leader. */
async function expectClusterBack(): Promise<void> {
  const after = await eventually(
    async () => {
      const views = await e2e.cluster.listNodes();
      return views.every((v) => v.health === "HEALTHY") && views;
    },
    "every node HEALTHY",
    { timeoutMs: 30_000, intervalMs: 200 },
  );
  expect(records(after)).toEqual(records(before));
  expect(after.map((v) => v.state)).toEqual(["UP", "UP", "UP"]);
  for (const node of nodes) {
    const members = await e2e.etcdMembers(node);
    expect(members.map((m) => m.name).sort()).toEqual(nodes.map((n) => n.id).sort());
    expect(members.some((m) => m.isLearner)).toBe(false);
  }
  expect(nodes.map((n) => n.id)).toContain(await e2e.agreedLeader(nodes));
}

describe("cold: the whole cluster down and up", () => {
  it("comes back after a power cut of every node, with no record lost", async () => {
    expect(records(before).map((r) => r.roles)).toEqual(
      expect.arrayContaining([["consensus", "controller"], ["consensus"], ["consensus"]]),
    );
    await e2e.measure("power cut of all 3 nodes (SIGKILL)", () => e2e.cluster.kill());
    for (const node of nodes) {
      expect(node.process!.exit).toEqual({ code: null, signal: "SIGKILL" });
      expect(node.process!.groupAlive()).toBe(false);
    }
    await e2e.cluster.coldStart();
    await expectClusterBack();
  });

  it("comes back after a graceful shutdown of every node, with no record lost", async () => {
    await e2e.measure("graceful stop of all 3 nodes (SIGTERM)", () => e2e.cluster.stop());
    for (const node of nodes) {
      expect(node.process!.exit).toEqual({ code: 0, signal: null });
      expect(node.process!.leftovers).toBe(false);
    }
    await e2e.cluster.coldStart();
    await expectClusterBack();
  });
});
