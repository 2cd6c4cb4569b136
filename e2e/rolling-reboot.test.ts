/**
 * e2e rolling reboot: `metroctl cluster rolling-reboot` on three consensus
 * members and a worker reboots the worker first, then each member alone,
 * the curator leader last, each only once the one before is back (a new
 * boot ID, UP, HEALTHY, a voting etcd member); a node that does not come
 * back stops the run, which names it and what it did not reboot.
 *
 * The nodes' service manager is the local cluster, which starts a node
 * again when it exits with the reboot status (75), as systemd's
 * RestartForceExitStatus=75 does; "does not come back" is that restarted
 * process killed.
 */
import { eventually } from "@metropolis/supervisor/testing";
import type { ClusterNode } from "../local-cluster/src/cluster-launcher";
import { E2eCluster } from "./e2e-cluster";

jest.setTimeout(300_000);

let e2e: E2eCluster;
let nodes: ClusterNode[];

/** Each node's boot ID as the curator has it. */
async function bootIds(): Promise<Map<string, string>> {
  const ids = new Map<string, string>();
  for (const node of nodes) {
    const text = await e2e.cluster.metroctlOk(["node", "describe", node.id, "-o", "json"]);
    const parsed: unknown = JSON.parse(text);
    const bootId =
      typeof parsed === "object" && parsed !== null && "bootId" in parsed ? parsed.bootId : null;
    ids.set(node.id, typeof bootId === "string" ? bootId : "");
  }
  return ids;
}

beforeAll(async () => {
  e2e = await E2eCluster.create("rolling-reboot", { nodes: 3 });
  await e2e.up();
  nodes = [1, 2, 3].map((i) => e2e.node(i));
  // A worker besides the members: it goes first.
  nodes.push(await e2e.cluster.addNode());
});

afterAll(async () => {
  await e2e?.teardown();
});

describe("rolling reboot", () => {
  it("reboots the worker, then each member, the curator leader last, each after the last is back", async () => {
    const leader = await e2e.agreedLeader(nodes.slice(0, 3));
    const before = await bootIds();
    const pids = new Map(nodes.map((n) => [n.id, n.process?.pid]));
    const res = await e2e.measure("rolling reboot of 4 nodes", () =>
      e2e.cluster.metroctl(["cluster", "rolling-reboot", "--timeout", "120"]),
    );
    expect(res.stderr).toBe("");
    expect(res.exitCode).toBe(0);
    const lines = res.stdout.trimEnd().split("\n");
    const worker = nodes[3].id;
    const members = nodes
      .slice(0, 3)
      .map((n) => n.id)
      .filter((id) => id !== leader)
      .sort();
    expect(lines[0]).toBe(
      `rolling reboot of 4 nodes in 4 steps: ${worker} → ${members[0]} (member) → ${members[1]} (member) → ${leader} (leader)`,
    );
    expect(lines.at(-1)).toBe("rolling reboot done: 4 nodes rebooted");
    // Each step said it was back before the next began (the order of its lines).
    const order = lines.filter((l) => / is rebooting$/.test(l));
    expect(order).toEqual([worker, ...members, leader].map((id) => `node ${id} is rebooting`));
    // Every node has a new boot and a new process; all HEALTHY, three voters.
    const after = await bootIds();
    for (const node of nodes) {
      expect(after.get(node.id)).not.toBe(before.get(node.id));
      expect(node.process?.pid).not.toBe(pids.get(node.id));
    }
    await e2e.allHealthy(nodes, 60_000);
    await e2e.votingMembers(nodes.slice(0, 3));
  });

  it("stops at the first node that does not come back, naming it and what it did not reboot", async () => {
    const leader = await e2e.agreedLeader(nodes.slice(0, 3));
    // The two members that do not lead, in the order the run takes them (by ID).
    const [a, b] = nodes
      .slice(0, 3)
      .filter((n) => n.id !== leader)
      .sort((x, y) => (x.id < y.id ? -1 : 1));
    const pid = a.process?.pid;
    const run = e2e.cluster.metroctl([
      "cluster",
      "rolling-reboot",
      "--nodes",
      `${b.id},${a.id}`,
      "--timeout",
      "15",
    ]);
    // The node's service manager starts it again; that process dies at once.
    await eventually(
      () => a.process !== undefined && a.process.pid !== pid,
      "the rebooted node started again",
      { timeoutMs: 60_000 },
    );
    await e2e.cluster.killNode(a);
    const res = await run;
    expect(res.exitCode).toBe(1);
    expect(res.stderr).toMatch(
      new RegExp(
        `rolling reboot stopped at step 1 of 2 \\(${a.id}\\): not back within 15 s: .*; rebooted: none; not rebooted: ${b.id}`,
      ),
    );
    // b was left alone: the same process.
    expect(res.stdout).not.toContain(`node ${b.id} is rebooting`);
    // Back to a whole cluster for the teardown.
    e2e.cluster.startNode(a);
    await e2e.allHealthy(nodes, 60_000);
  });
});
