/**
 * e2e core: the smallest real cluster — a bootstrapped node and one node
 * that registered with a ticket and was approved — as separate
 * `metropolis-node` processes with real etcd and mutual TLS. It proves what
 * every other scenario builds on: the cluster directory lists both nodes,
 * health comes from heartbeats (it is lost when a node goes down and comes
 * back with it), and a rebooted node rejoins from its sealed configuration as
 * the same node.
 */
import { runMetroctl, type ClusterInfoView, type NodeView } from "@metropolis/metroctl";
import { eventually } from "@metropolis/supervisor/testing";
import { E2eCluster } from "./e2e-cluster";

jest.setTimeout(180_000);

let e2e: E2eCluster;

beforeAll(async () => {
  e2e = await E2eCluster.create("core", { nodes: 2, consensusOnEveryNode: false });
  await e2e.up();
});

afterAll(async () => {
  await e2e?.teardown();
});

const byId = (nodes: NodeView[], id: string) => nodes.find((n) => n.id === id);

describe("core: a bootstrapped and a registered node", () => {
  it("cluster-info lists both nodes with their addresses", async () => {
    const info = JSON.parse(
      await e2e.cluster.metroctlOk(["cluster-info", "-o", "json"]),
    ) as ClusterInfoView;
    const listed = Object.fromEntries(info.nodes.map((n) => [n.id, n.addresses]));
    expect(listed).toEqual({
      [e2e.node(1).id]: [e2e.node(1).address],
      [e2e.node(2).id]: [e2e.node(2).address],
    });
    expect(info.caSha256).toMatch(/^[0-9a-f]{64}$/);
  });

  it("both nodes are UP and HEALTHY, kept so by fresh heartbeats", async () => {
    const first = await e2e.cluster.listNodes();
    for (const node of [e2e.node(1), e2e.node(2)]) {
      const view = byId(first, node.id);
      expect(view).toMatchObject({ state: "UP", health: "HEALTHY", address: node.address });
      expect(view!.heartbeatAgeSeconds).not.toBeNull();
    }
    expect(byId(first, e2e.node(1).id)!.roles).toEqual(["consensus", "controller"]);
    expect(byId(first, e2e.node(2).id)!.roles).toEqual([]);
    // A new heartbeat arrives from each node: its age goes down again.
    const polledAt = Date.now();
    await eventually(
      async () => {
        const now = await e2e.cluster.listNodes();
        const grown = (Date.now() - polledAt) / 1000;
        return [e2e.node(1), e2e.node(2)].every(
          (n) =>
            byId(now, n.id)!.health === "HEALTHY" &&
            byId(now, n.id)!.heartbeatAgeSeconds! <
              byId(first, n.id)!.heartbeatAgeSeconds! + grown - 0.3,
        );
      },
      "a new heartbeat from both nodes",
      { timeoutMs: 15_000, intervalMs: 200 },
    );
  });

  it("metroctl shows a node's own supervision tree and logs, from its Debug service", async () => {
    const node = e2e.node(2);
    const tree = await e2e.cluster.metroctlOk(["tree", node.id]);
    for (const dn of ["enrolment", "roleserver", "heartbeat", "rolefetch", "debug"]) {
      expect(tree).toMatch(new RegExp(`${dn}\\s+HEALTHY`));
    }
    // Node 2 runs no control plane: no consensus or curator in its tree.
    expect(tree).not.toMatch(/curator|etcd/);
    const logs = await e2e.cluster.metroctlOk([
      "logs",
      node.id,
      "root.roleserver.heartbeat",
      "--tail",
      "5",
    ]);
    expect(logs).toMatch(/root\.roleserver\.heartbeat heartbeats answered by the curator/);
    expect(logs).not.toMatch(/root\.roleserver\.rolefetch/);
  });

  it("metroctl watches a node's tree redrawn live and prints its supervisor reports", async () => {
    const node = e2e.node(2);
    const stdout = { text: "", write: (s: string) => void (stdout.text += s) };
    const stderr = { text: "", write: (s: string) => void (stderr.text += s) };
    const interrupt = new AbortController();
    // In-process, with the cluster's metroctl config dir (its endpoints are remembered there).
    const watching = runMetroctl(
      ["--config", e2e.cluster.metroctlDir, "tree", node.id, "--watch"],
      { stdout, stderr, signal: interrupt.signal },
    );
    try {
      await eventually(() => /workloads\s+HEALTHY\s+0/.test(stdout.text), "the first frame", {
        timeoutMs: 30_000,
      });
      // Giving the worker role restarts the node's workloads launcher (RolesChangedError).
      await e2e.cluster.metroctlOk(["set-role", node.id, "--worker", "on"]);
      await eventually(
        () => /workloads\s+HEALTHY\s+1/.test(stdout.text),
        "the restarted workloads launcher in a redrawn frame",
        { timeoutMs: 30_000 },
      );
    } finally {
      interrupt.abort();
    }
    expect(await watching).toBe(0);
    expect(stderr.text).toBe("");
    // Frames a blank line apart (not a terminal): the first showed it unrestarted.
    expect(stdout.text.split("\n\n").length).toBeGreaterThanOrEqual(2);

    const reports = await e2e.cluster.metroctlOk([
      "reports",
      node.id,
      "--dn",
      "root.roleserver.workloads",
    ]);
    expect(reports).toMatch(/ started root\.roleserver\.workloads\n/);
    expect(reports).toMatch(/ died root\.roleserver\.workloads RolesChangedError: /);
    expect(reports).toMatch(
      / restart-scheduled root\.roleserver\.workloads in \d+ ms \(attempt 1\)/,
    );
    expect(reports).toMatch(/ started root\.roleserver\.workloads restart 1\n/);
    expect(reports).not.toMatch(/root\.roleserver\.heartbeat/);
    await e2e.cluster.metroctlOk(["set-role", node.id, "--worker", "off"]);
  });

  it("a rebooted node loses its health while down, then rejoins as itself and is HEALTHY", async () => {
    const node = e2e.node(2);
    await e2e.measure("node2 graceful stop (SIGTERM)", () => e2e.cluster.stopNode(node));
    expect(node.process!.exit).toEqual({ code: 0, signal: null });
    expect(node.process!.leftovers).toBe(false);
    await e2e.measure("node2 HEARTBEAT_TIMEOUT after stop", () =>
      e2e.cluster.waitFor(node, { health: "HEARTBEAT_TIMEOUT" }, 30_000),
    );
    await e2e.measure("node2 UP and HEALTHY after restart", async () => {
      const proc = e2e.cluster.startNode(node);
      const { nodeId } = await proc.waitForProgress("cluster.enrolled", 60_000, {
        where: (e) => e.flow === "rejoin",
      });
      expect(nodeId).toBe(node.id);
      await e2e.cluster.waitFor(node, { state: "UP", health: "HEALTHY" }, 60_000);
    });
    const nodes = await e2e.cluster.listNodes();
    expect(nodes.map((n) => n.id).sort()).toEqual([e2e.node(1).id, e2e.node(2).id].sort());
    expect(byId(nodes, node.id)).toMatchObject({ state: "UP", health: "HEALTHY", roles: [] });
  });
});
