/**
 * e2e hosts: a cluster whose nodes really talk over a network. Three nodes,
 * every one a consensus member, each in a network namespace of its own on
 * a bridge (../local-cluster's testbed.ts), at its host's address in a /24
 * of 198.18.0.0/15; the owner's metroctl, in this process, reaches them
 * from the bridge. It proves that the cluster comes up like on loopback
 * (3 UP and HEALTHY through metroctl, 3 voting etcd members); that each
 * node, its etcd and everything it runs are in its host's namespace and
 * nowhere else; that a node the network cuts off from the others (iptables
 * in the namespaces, network.ts) is seen missing its heartbeats by the
 * curator leader while the others keep quorum, and is HEALTHY again once
 * the network heals; and that teardown leaves nothing behind: no process,
 * namespace, veth, bridge nor rule.
 *
 * It needs root and ip, iptables, conntrack and nsenter; elsewhere it is
 * skipped with the reason in its name.
 */
import { readlinkSync, statSync } from "node:fs";
import { api } from "@metropolis/proto";
import { eventually } from "@metropolis/supervisor/testing";
import type { ClusterNode } from "../local-cluster/src/cluster-launcher";
import { processGroupMembers } from "../local-cluster/src/node-process";
import { Testbed } from "../local-cluster/src/testbed";
import { testbedSuite } from "../local-cluster/src/testing";
import { linkNames, namespaceNames } from "../local-cluster/src/testbed-slot";
import { E2eCluster } from "./e2e-cluster";

jest.setTimeout(240_000);

const suite = testbedSuite(
  "hosts: three consensus members, each in a network namespace of its own",
);

/** The heartbeat timeout of the local cluster's nodes (heartbeatTimeoutMs). */
const heartbeatTimeoutMs = 4000;

(suite.runs ? describe : describe.skip)(suite.title, () => {
  let e2e: E2eCluster;
  let testbed: Testbed;
  let nodes: ClusterNode[];

  beforeAll(async () => {
    e2e = await E2eCluster.create("hosts", { nodes: 3, hosts: true });
    const made = e2e.testbed;
    if (!made) throw new Error("hosts mode without a testbed");
    testbed = made;
    await e2e.up();
    nodes = [1, 2, 3].map((i) => e2e.node(i));
  });

  afterAll(async () => {
    await e2e?.teardown();
  });

  it("are UP and HEALTHY through metroctl, three voting etcd members, each at its host's address", async () => {
    const views = await e2e.cluster.listNodes();
    expect(views).toHaveLength(3);
    for (const node of nodes) {
      expect(node.address).toBe(testbed.address(node.index));
      const view = views.find((v) => v.id === node.id);
      expect(view).toMatchObject({ state: "UP", health: "HEALTHY" });
      expect(view?.roles).toContain("consensus");
    }
    const ids = nodes.map((n) => n.id).sort();
    for (const members of await e2e.votingMembers(nodes)) expect(members).toEqual(ids);
    process.stdout.write(`e2e hosts:\n${await e2e.cluster.nodeTable()}\n`);
  });

  it("run each node, its etcd and all it started in its host's network namespace, and only there", () => {
    const ownNetns = readlinkSync("/proc/self/ns/net");
    for (const node of nodes) {
      const proc = node.process;
      if (!proc) throw new Error(`${node.name} has no process`);
      expect(proc.netns).toBe(testbed.namespace(node.index));
      const want = `net:[${statSync(testbed.namespacePath(node.index)).ino}]`;
      const group = processGroupMembers(proc.pid) ?? [];
      // The node and its etcd at least.
      expect(group.length).toBeGreaterThanOrEqual(2);
      for (const pid of group) {
        expect([node.name, pid, readlinkSync(`/proc/${pid}/ns/net`)]).toEqual([
          node.name,
          pid,
          want,
        ]);
      }
      expect(want).not.toBe(ownNetns);
    }
  });

  it("a node cut off by the network misses its heartbeats, the others keep quorum; healed, it is HEALTHY again", async () => {
    const leaderId = await e2e.agreedLeader(nodes);
    const cut = nodes.find((n) => n.id !== leaderId);
    if (!cut) throw new Error("no node but the leader");
    const others = nodes.filter((n) => n !== cut);

    await e2e.network.isolate(cut.index);
    await e2e.measure(`${cut.name} isolated: HEARTBEAT_TIMEOUT as seen by the leader`, () =>
      e2e.cluster.metroctlOk([
        "wait",
        cut.id,
        "--health",
        "HEARTBEAT_TIMEOUT",
        "--timeout",
        String((heartbeatTimeoutMs * 5) / 1000),
        "--interval",
        "0.2",
      ]),
    );
    // Still running, and the owner still reaches it over the bridge: only the nodes are cut apart.
    expect(cut.process?.running).toBe(true);
    await e2e.condition(cut, api.Condition.CURATOR_CONNECTED);
    // The two others are a quorum: the cluster still answers and writes.
    await e2e.allHealthy(others);
    expect(await e2e.agreedLeader(others)).toBe(leaderId);

    await e2e.network.heal();
    await e2e.measure(`${cut.name} HEALTHY again after the network healed`, () =>
      e2e.allHealthy(nodes),
    );
    const ids = nodes.map((n) => n.id).sort();
    for (const members of await e2e.votingMembers(nodes)) expect(members).toEqual(ids);
    expect(e2e.network.faults()).toEqual([]);
  });

  it("tears down leaving no process, namespace, veth nor bridge", async () => {
    // Each node's process group: the node, its etcd, anything it started.
    const groups = nodes.flatMap((n) => (n.process ? [n.process.pid] : []));
    expect(groups).toHaveLength(3);
    await e2e.teardown();
    for (const node of nodes) expect(node.process?.running).toBe(false);
    await eventually(
      () => groups.every((pgid) => (processGroupMembers(pgid) ?? []).length === 0),
      "every node's process group gone",
    );
    const mine = (name: string) =>
      name.startsWith(testbed.tag) && /^(br|h\d+|v\d+)$/.test(name.slice(testbed.tag.length));
    expect([...(await namespaceNames()), ...(await linkNames())].filter(mine)).toEqual([]);
    expect(testbed.destroyed).toBe(true);
  });
});
