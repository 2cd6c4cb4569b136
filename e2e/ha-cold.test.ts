/**
 * e2e ha-cold: Monogon's ha_cold scenario, and a cold start with a machine
 * gone. On a testbed (each node in a network namespace of its own) where
 * there is one, on loopback elsewhere; the title says which.
 *
 * 1. Three consensus members (the node that bootstrapped the cluster and two
 *    registered, approved ones, all voters) hold some records (labels). The
 *    bootstrap node gives up the consensus role (handing the curator
 *    leadership over when it leads) and leaves etcd; the owner deletes it,
 *    and it stops for good (its machine gone: in hosts mode its host is cut
 *    off, so that a dial to it hangs rather than being refused). Then both
 *    others lose power at once (SIGKILL) and are powered on: the cluster
 *    comes back UP and HEALTHY with every record, the two as its only
 *    voting etcd members, one curator leader, and the deleted node's
 *    certificate refused as revoked ("its node was deleted").
 * 2. A third member is added again; all three lose power, and only two are
 *    powered on: the curator leader's machine never comes back (its host cut
 *    off too), so that its election key, which outlives it until its lease
 *    expires, names a leader no one can reach. The two elect a curator
 *    leader, rejoin, acknowledge writes and answer `metroctl nodes`, which
 *    shows the missing node as not HEALTHY (HEARTBEAT_TIMEOUT). Each
 *    enrolment call then gave that stale leader no more than 10 s; without
 *    that bound JoinNode waited on it for the kernel's TCP timeout.
 *
 * The waits are polls with deadlines; every process is stopped by PID and
 * the testbed (or loopback state) removed at teardown.
 */
import { status } from "@grpc/grpc-js";
import type { NodeView } from "@metropolis/metroctl";
import { eventually } from "@metropolis/supervisor/testing";
import { rejoined } from "../local-cluster/src/bring-up-steps";
import type { ClusterNode } from "../local-cluster/src/cluster-launcher";
import type { NodeProcess } from "../local-cluster/src/node-process";
import { Testbed } from "../local-cluster/src/testbed";
import { E2eCluster, E2eHarnessError, unboxed } from "./e2e-cluster";
import { consensusStatusAs, nodeTls } from "./node-tls";

jest.setTimeout(420_000);

const availability = Testbed.available();
const hosts = availability.ok;
const where = hosts
  ? "on a testbed (a network namespace per node)"
  : `on loopback (no testbed here: ${availability.reason})`;

/** The node's current process. @throws E2eHarnessError when it was never started. */
function processOf(node: ClusterNode): NodeProcess {
  if (!node.process) throw new E2eHarnessError(`${node.name} was never started`);
  return node.process;
}

/** What must survive a cold start: each node's ID, state, roles and labels, by ID. */
const records = (views: readonly NodeView[]) =>
  views
    .map((v) => ({ id: v.id, state: v.state, roles: v.roles, labels: v.labels }))
    .sort((a, b) => a.id.localeCompare(b.id));

describe(`ha-cold ${where}: cold starts after the bootstrap node was removed, and with a machine gone`, () => {
  let e2e: E2eCluster;
  let node1: ClusterNode;
  let node2: ClusterNode;
  let node3: ClusterNode;

  beforeAll(async () => {
    e2e = await E2eCluster.create("ha-cold", { nodes: 3, hosts });
    await e2e.up();
    [node1, node2, node3] = [1, 2, 3].map((i) => e2e.node(i));
    const ids = [node1, node2, node3].map((n) => n.id).sort();
    for (const members of await e2e.votingMembers([node1, node2, node3])) {
      expect(members).toEqual(ids);
    }
  });

  afterAll(async () => {
    await e2e?.teardown();
  });

  /** Powers `nodes` on, each rejoining as itself; resolves once the cluster sees them UP and HEALTHY. */
  async function powerOn(nodes: readonly ClusterNode[]): Promise<void> {
    await Promise.all(
      nodes.map(async (node) => {
        const proc = e2e.cluster.startNode(node);
        await rejoined(e2e.cluster, node, proc);
        await e2e.cluster.waitFor(node, { state: "UP", health: "HEALTHY" }, 90_000);
      }),
    );
  }

  /** SIGKILL to the process groups of `nodes`, all at once: a power cut. */
  async function powerCut(nodes: readonly ClusterNode[]): Promise<void> {
    await Promise.all(nodes.map((n) => e2e.cluster.killNode(n)));
    for (const node of nodes) {
      expect(processOf(node).exit).toEqual({ code: null, signal: "SIGKILL" });
      expect(processOf(node).groupAlive()).toBe(false);
    }
  }

  it("comes back after the bootstrap node left consensus, was deleted, and the rest lost power", async () => {
    const survivors = [node2, node3];
    const survivorIds = survivors.map((n) => n.id).sort();
    // The bootstrap node's own credentials, while it still seals the cluster unlock key.
    const deletedTls = await nodeTls(node1);

    // Records: labels on every node.
    for (const node of [node1, node2, node3]) {
      await e2e.cluster.metroctlOk(["label", node.id, `written-by=ha-cold`, `node=${node.name}`]);
    }
    const before = (await e2e.cluster.listNodes()).filter((v) => v.id !== node1.id);
    expect(before.map((v) => v.labels)).toEqual([
      expect.objectContaining({ "written-by": "ha-cold" }),
      expect.objectContaining({ "written-by": "ha-cold" }),
    ]);

    // The bootstrap node gives up its roles (metroctl retries the leader's hand-over) and leaves etcd.
    await e2e.measure("node1's roles taken away, out of etcd", async () => {
      await e2e.cluster.metroctlOk([
        "set-role",
        node1.id,
        "--controller",
        "off",
        "--consensus",
        "off",
      ]);
      await eventually(
        async () => {
          const names = (await e2e.etcdMembers(node2)).map((m) => m.name).sort();
          return names.join() === survivorIds.join();
        },
        "etcd to have removed node1's member",
        { timeoutMs: 60_000, intervalMs: 200 },
      );
    });
    for (const members of await e2e.votingMembers(survivors)) {
      expect(members).toEqual(survivorIds);
    }
    const leaderNode = e2e.cluster.nodeById(await e2e.agreedLeader(survivors));
    expect(survivors).toContain(leaderNode);
    // Its certificate still lets it in: it is a node of the cluster without roles.
    expect(await consensusStatusAs(deletedTls, leaderNode)).toBe("answered");

    // Deleted while it runs (it is UP, hence the bypass): it stops, saying why.
    const proc1 = processOf(node1);
    await e2e.cluster.metroctlOk(["delete", node1.id, "--bypass", "node-up"]);
    const exit = await e2e.measure("node1 stopped after its deletion", () => proc1.exited);
    expect(exit).toEqual({ code: 1, signal: null });
    expect(unboxed(proc1.stderr())).toContain(`node ${node1.id} is no longer part of its cluster`);
    // For good: nothing of it runs (stop() by PID is a no-op once it exited).
    await proc1.stop();
    expect(proc1.running).toBe(false);
    expect(proc1.leftovers).toBe(false);
    // Its machine gone: a dial to its address hangs instead of being refused.
    if (hosts) await e2e.network.isolate(node1.index);
    const refusedBefore = await consensusStatusAs(deletedTls, leaderNode);
    expect(refusedBefore).toEqual({
      code: status.UNAUTHENTICATED,
      details: expect.stringMatching(/revoked by the cluster CA: its node was deleted/),
    });

    await e2e.measure("power cut of node2 and node3 (SIGKILL)", () => powerCut(survivors));
    await e2e.measure("node2 and node3 UP and HEALTHY after power-on", () => powerOn(survivors));

    const after = await e2e.cluster.listNodes();
    expect(records(after)).toEqual(records(before));
    expect(after.map((v) => [v.state, v.health])).toEqual([
      ["UP", "HEALTHY"],
      ["UP", "HEALTHY"],
    ]);
    for (const members of await e2e.votingMembers(survivors)) {
      expect(members).toEqual(survivorIds);
    }
    const leader = e2e.cluster.nodeById(await e2e.agreedLeader(survivors));
    expect(survivors).toContain(leader);
    // Writes are acknowledged again.
    await e2e.cluster.metroctlOk(["label", node2.id, "after=cold-start"]);
    expect((await e2e.cluster.listNodes()).find((v) => v.id === node2.id)?.labels).toMatchObject({
      after: "cold-start",
      "written-by": "ha-cold",
    });
    // The deleted node's certificate is refused by every curator, the leader as revoked.
    expect(await consensusStatusAs(deletedTls, leader)).toEqual({
      code: status.UNAUTHENTICATED,
      details: expect.stringMatching(/revoked by the cluster CA: its node was deleted/),
    });
    for (const node of survivors) {
      expect(await consensusStatusAs(deletedTls, node)).not.toBe("answered");
    }
  });

  it("reaches a working control plane with two of three members after a power cut, the leader's machine never back", async () => {
    const node4 = await e2e.measure("node4 registered, approved, UP and HEALTHY", () =>
      e2e.cluster.addNode(),
    );
    await e2e.cluster.setConsensus(node4, true);
    const members = [node2, node3, node4];
    const ids = members.map((n) => n.id).sort();
    for (const seen of await e2e.votingMembers(members)) expect(seen).toEqual(ids);
    await e2e.cluster.metroctlOk(["label", node4.id, "written-by=ha-cold"]);
    const before = await e2e.cluster.listNodes();
    // The machine that never comes back is the curator leader's: after the power cut its
    // election key names it until the key's lease expires, and every curator says it leads.
    const gone = e2e.cluster.nodeById(await e2e.agreedLeader(members));
    const back = members.filter((n) => n !== gone);
    const [survivor] = back;

    await e2e.measure("power cut of node2, node3 and node4 (SIGKILL)", () => powerCut(members));
    if (hosts) await e2e.network.isolate(gone.index);
    await e2e.measure(
      `${back.map((n) => n.name).join(" and ")} UP and HEALTHY after power-on, ${gone.name} (the leader's) gone`,
      () => powerOn(back),
    );

    const leaderId = await e2e.agreedLeader(back);
    expect(back.map((n) => n.id)).toContain(leaderId);
    // Writes are acknowledged.
    await e2e.cluster.metroctlOk(["label", survivor.id, "after=two-of-three"]);
    // `metroctl nodes` answers: the two HEALTHY, the missing one not (timed out once the
    // leader is older than the heartbeat timeout).
    const views = await eventually(
      async () => {
        const v = await e2e.cluster.listNodes();
        return v.find((x) => x.id === gone.id)?.health === "HEARTBEAT_TIMEOUT" && v;
      },
      `${gone.name} to be shown HEARTBEAT_TIMEOUT`,
      { timeoutMs: 60_000, intervalMs: 500 },
    );
    expect(records(views).map((r) => r.id)).toEqual(records(before).map((r) => r.id));
    for (const view of views) {
      expect([view.id, view.state, view.health]).toEqual([
        view.id,
        "UP",
        view.id === gone.id ? "HEARTBEAT_TIMEOUT" : "HEALTHY",
      ]);
    }
    expect(views.find((v) => v.id === survivor.id)?.labels).toMatchObject({
      after: "two-of-three",
      "written-by": "ha-cold",
    });
    for (const node of members) {
      expect(views.find((v) => v.id === node.id)?.labels).toMatchObject({
        "written-by": "ha-cold",
      });
    }
    const table = await e2e.cluster.nodeTable();
    expect(table).toMatch(new RegExp(`${gone.id}.*HEARTBEAT_TIMEOUT`));
    // etcd keeps the gone node as a member (two of three voters are a quorum).
    for (const node of back) {
      expect((await e2e.etcdMembers(node)).map((m) => m.name).sort()).toEqual(ids);
    }
  });
});
