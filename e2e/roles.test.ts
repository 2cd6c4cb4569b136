/**
 * e2e roles: roles decide what a node runs, and the cluster enforces the
 * rules of taking them away. On a three-node cluster (all consensus
 * members, so that one can leave and two keep a quorum): taking the
 * consensus role away stops the node's curator and etcd member and removes
 * it from etcd; the worker role starts the workloads the node was
 * configured with and taking it away stops them; a node is deleted only
 * once it has no roles and is down, or with an explicit bypass; and the
 * curator leader's own node gives up the consensus role by handing the
 * leadership over first; a running node the owner deletes stops.
 */
import { readFile } from "node:fs/promises";
import { join } from "node:path";
import { api } from "@metropolis/proto";
import { eventually } from "@metropolis/supervisor/testing";
import type { ClusterNode } from "../local-cluster/src/cluster-launcher";
import { E2eCluster, unboxed } from "./e2e-cluster";

jest.setTimeout(240_000);

/** The workload: writes its PID to `$PID_DIR/sleeper-<node's pid>.pid`, then idles. */
const sleeper = [
  "const { writeFileSync } = require('node:fs');",
  "writeFileSync(require('node:path').join(process.env.PID_DIR, `sleeper-${process.ppid}.pid`), String(process.pid));",
  "setInterval(() => {}, 1000);",
].join(" ");

let e2e: E2eCluster;
let node3: ClusterNode;

beforeAll(async () => {
  e2e = await E2eCluster.create("roles", {
    nodes: 3,
    nodeConfig: (dir) => ({
      workloads: [
        {
          name: "sleeper",
          command: process.execPath,
          args: ["-e", sleeper],
          env: { PID_DIR: dir },
        },
      ],
    }),
  });
  await e2e.up();
  node3 = e2e.node(3);
});

afterAll(async () => {
  await e2e?.teardown();
});

const alive = (pid: number) => {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
};

/** The PID the sleeper of the node with process `nodePid` wrote, if it did. */
async function sleeperPid(nodePid: number): Promise<number | undefined> {
  try {
    return Number(await readFile(join(e2e.dir, `sleeper-${nodePid}.pid`), "utf8"));
  } catch {
    return undefined;
  }
}

async function roles(node: ClusterNode): Promise<string[] | undefined> {
  return (await e2e.cluster.listNodes()).find((v) => v.id === node.id)?.roles;
}

describe("roles: what a node runs follows its roles", () => {
  it("without the consensus role, a node runs no curator and leaves etcd", async () => {
    const [node1, node2] = [e2e.node(1), e2e.node(2)];
    expect((await e2e.etcdMembers(node1)).length).toBe(3);
    await e2e.cluster.setConsensus(node3, false);
    expect(await roles(node3)).toEqual([]);
    await eventually(
      async () => !(await e2e.condition(node3, api.Condition.CONSENSUS_RUNNING)).ok,
      "node3's consensus to stop",
      { timeoutMs: 30_000, intervalMs: 200 },
    );
    // Its curator's listener drains its calls for a moment after the launcher stopped.
    await eventually(
      () =>
        e2e.currentLeader(node3).then(
          () => false,
          () => true,
        ),
      "node3's curator to stop answering",
      { timeoutMs: 10_000, intervalMs: 200 },
    );
    const members = await eventually(
      async () => {
        const m = await e2e.etcdMembers(node1);
        return m.length === 2 && m;
      },
      "etcd to have two members",
      { timeoutMs: 30_000, intervalMs: 200 },
    );
    expect(members.map((m) => m.name).sort()).toEqual([node1.id, node2.id].sort());
    // Still a working node of the cluster: it reaches the curator as a client.
    await eventually(
      async () => (await e2e.condition(node3, api.Condition.CURATOR_CONNECTED)).ok,
      "node3 connected to the curator as a client",
      { timeoutMs: 30_000, intervalMs: 200 },
    );
    await e2e.cluster.waitFor(node3, { state: "UP", health: "HEALTHY" }, 30_000);
  });

  it("the worker role starts the configured workload, and taking it away stops it", async () => {
    const nodePid = node3.process!.pid;
    expect(await sleeperPid(nodePid)).toBeUndefined();
    const pid = await e2e.measure("workload running after set-role --worker on", async () => {
      await e2e.cluster.metroctlOk(["set-role", node3.id, "--worker", "on"]);
      return eventually(
        async () => {
          const p = await sleeperPid(nodePid);
          return p !== undefined && alive(p) && p;
        },
        "node3's sleeper to run",
        { timeoutMs: 30_000, intervalMs: 100 },
      );
    });
    expect(await roles(node3)).toEqual(["worker"]);
    await node3.process!.waitForProgress("workloads.changed", 10_000, {
      where: (e) => e.worker && e.workloads.length === 1,
    });
    // Only the worker runs it.
    for (const other of [e2e.node(1), e2e.node(2)]) {
      expect(await sleeperPid(other.process!.pid)).toBeUndefined();
    }

    await e2e.measure("workload gone after set-role --worker off", async () => {
      await e2e.cluster.metroctlOk(["set-role", node3.id, "--worker", "off"]);
      await eventually(() => !alive(pid), "node3's sleeper to exit", {
        timeoutMs: 30_000,
        intervalMs: 100,
      });
    });
    expect(await roles(node3)).toEqual([]);
    expect(node3.process!.running).toBe(true);
  });

  it("a node is deleted only without roles and down, or with a bypass", async () => {
    const refusal = async (args: string[]) => {
      const result = await e2e.cluster.metroctl(args);
      expect(result.exitCode).toBe(1);
      return result.stderr;
    };
    await e2e.cluster.metroctlOk(["set-role", node3.id, "--worker", "on"]);
    expect(await refusal(["delete", node3.id])).toMatch(
      /FAILED_PRECONDITION: node metropolis-[0-9a-f]+ still has roles/,
    );
    await e2e.cluster.metroctlOk(["set-role", node3.id, "--worker", "off"]);
    expect(await refusal(["delete", node3.id])).toMatch(
      /FAILED_PRECONDITION: node metropolis-[0-9a-f]+ is UP/,
    );
    await e2e.cluster.stopNode(node3);
    expect(node3.process!.exit).toEqual({ code: 0, signal: null });
    // Down, but still UP in the cluster's records: deleting it takes the bypass.
    expect(await refusal(["delete", node3.id])).toMatch(/is UP/);
    expect((await e2e.cluster.listNodes()).map((v) => v.id)).toContain(node3.id);

    await e2e.cluster.metroctlOk(["delete", node3.id, "--bypass", "node-up"]);
    const views = await e2e.cluster.listNodes();
    expect(views.map((v) => v.id).sort()).toEqual([e2e.node(1).id, e2e.node(2).id].sort());
    for (const view of views) expect(view).toMatchObject({ state: "UP", health: "HEALTHY" });
    expect((await e2e.etcdMembers(e2e.node(1))).length).toBe(2);
  });

  it("taking the consensus role from the curator leader's node hands the leadership over first", async () => {
    const node1 = e2e.node(1);
    const others = e2e.cluster.nodes.filter((n) => n !== node1 && n.process?.running);
    expect(await e2e.agreedLeader([node1, ...others])).toBe(node1.id);
    const staying = (await e2e.etcdMembers(node1)).map((m) => m.name).filter((n) => n !== node1.id);
    expect(staying.length).toBeGreaterThan(0);
    // metroctl is told to retry (UNAVAILABLE: handed over) and does, with the new leader.
    await e2e.measure("consensus role taken from the leader's node (hand-over, removal)", () =>
      e2e.cluster.metroctlOk(["set-role", node1.id, "--controller", "off", "--consensus", "off"]),
    );
    await node1.process!.waitForProgress("curator.handed-over", 10_000, {
      where: (e) => e.nodeId === node1.id,
    });
    expect(await roles(node1)).toEqual([]);
    const members = others.filter((n) => staying.includes(n.id));
    expect(await e2e.agreedLeader(members)).not.toBe(node1.id);
    await eventually(
      async () => {
        const names = (await e2e.etcdMembers(members[0])).map((m) => m.name);
        return names.sort().join() === [...staying].sort().join();
      },
      `etcd to have lost node1 as a member`,
      { timeoutMs: 30_000, intervalMs: 200 },
    );
    await eventually(
      async () => !(await e2e.condition(node1, api.Condition.CONSENSUS_RUNNING)).ok,
      "node1's consensus to stop",
      { timeoutMs: 30_000, intervalMs: 200 },
    );
    // All still working nodes of the cluster, node1 now a client of another node's curator.
    for (const node of [node1, ...others]) {
      await e2e.cluster.waitFor(node, { state: "UP", health: "HEALTHY" }, 30_000);
    }
  });

  it("a running node the owner deletes stops, saying why", async () => {
    const node4 = await e2e.cluster.addNode();
    const proc = node4.process!;
    await e2e.cluster.metroctlOk(["delete", node4.id, "--bypass", "node-up"]);
    const exit = await e2e.measure("node4 stopped after its deletion", () => proc.exited);
    expect(exit).toEqual({ code: 1, signal: null });
    expect(proc.leftovers).toBe(false);
    expect(proc.stderr()).toContain("metropolis-node stopped");
    expect(unboxed(proc.stderr())).toMatch(
      new RegExp(
        `this node was deleted from its cluster NodeDeletedError: node ${node4.id} is no longer part of its cluster`,
      ),
    );
    expect((await e2e.cluster.listNodes()).map((v) => v.id)).not.toContain(node4.id);
  });
});
