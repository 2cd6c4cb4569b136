/**
 * e2e ha: three nodes, every one a consensus member. It proves that the
 * cluster really is highly available: three voting etcd members (no
 * learner left behind), each node running a curator; a rolling restart of
 * every node, each back to HEALTHY (and a voting member) with the others
 * serving meanwhile; and a power cut of the curator leader's machine, after
 * which another curator leads once the election lease expired (the time is
 * printed; bench:curator holds the TTL + 1 s target) and the cluster answers
 * the owner again.
 */
import { api } from "@metropolis/proto";
import { isProgressEvent } from "@metropolis/supervisor/node-progress";
import { eventually } from "@metropolis/supervisor/testing";
import type { ClusterNode } from "../local-cluster/src/cluster-launcher";
import type { NodeLine } from "../local-cluster/src/node-process";
import { E2eCluster } from "./e2e-cluster";

jest.setTimeout(240_000);

/** The curator election lease of the local cluster's nodes (leaderTtlSeconds). */
const leaderTtlMs = 3000;

let e2e: E2eCluster;
let nodes: ClusterNode[];

beforeAll(async () => {
  e2e = await E2eCluster.create("ha", { nodes: 3 });
  await e2e.up();
  nodes = [1, 2, 3].map((i) => e2e.node(i));
});

afterAll(async () => {
  await e2e?.teardown();
});

/** Every node's etcd member reports the three nodes as voting members; each runs consensus. */
async function expectThreeVoters(): Promise<void> {
  const ids = nodes.map((n) => n.id).sort();
  for (const members of await e2e.votingMembers(nodes)) expect(members).toEqual(ids);
}

describe("ha: three consensus members", () => {
  it("are three voting etcd members, each running a curator, all HEALTHY", async () => {
    await expectThreeVoters();
    const views = await e2e.cluster.listNodes();
    expect(views).toHaveLength(3);
    for (const view of views) {
      expect(view).toMatchObject({ state: "UP", health: "HEALTHY" });
      expect(view.roles).toContain("consensus");
    }
    for (const node of nodes) {
      await eventually(
        async () => (await e2e.condition(node, api.Condition.CURATOR_CONNECTED)).ok,
        `${node.name} connected to the curator`,
        { timeoutMs: 30_000, intervalMs: 200 },
      );
    }
  });

  it("survive a rolling restart: each node back to HEALTHY and a voting member", async () => {
    for (const node of nodes) {
      const started = performance.now();
      await e2e.cluster.rebootNode(node);
      const ms = performance.now() - started;
      // Upstream's bound for a node's reboot.
      expect(ms).toBeLessThan(60_000);
      await eventually(
        async () => (await e2e.condition(node, api.Condition.CONSENSUS_RUNNING)).ok,
        `${node.name}'s consensus running again`,
        { timeoutMs: 30_000, intervalMs: 200 },
      );
      // A restarted leader hands over: the new one knows every node's health after its next heartbeat.
      await e2e.allHealthy(nodes);
    }
    await expectThreeVoters();
  });

  it("elect a new curator leader once the lease expires after the leader's power is cut", async () => {
    const leaderId = await e2e.agreedLeader(nodes);
    const leader = e2e.cluster.nodeById(leaderId);
    const survivors = nodes.filter((n) => n !== leader);

    const cursors = survivors.map((n) => n.process!.cursor());
    const cutAt = Date.now();
    await e2e.cluster.killNode(leader);
    expect(leader.process!.exit).toEqual({ code: null, signal: "SIGKILL" });
    expect(leader.process!.groupAlive()).toBe(false);

    const elected: NodeLine = await Promise.any(
      survivors.map((n, i) =>
        n.process!.waitForLog((l) => isProgressEvent(l.progress, "curator.leading"), 30_000, {
          since: cursors[i],
          what: "curator.leading",
        }),
      ),
    );
    const failoverMs = Date.parse(elected.time!) - cutAt;
    e2e.note(`curator failover after SIGKILL of the leader (${leader.name})`, failoverMs);
    // The target (TTL + 1 s) is a speed target: bench:curator measures it against the TTL on a
    // quiet run, and this scenario prints it. Here only a failover that clearly did not come from
    // the lease expiring (far beyond the TTL) fails, so a loaded CI machine does not.
    expect(failoverMs).toBeLessThan(leaderTtlMs + 10_000);

    const newLeader = survivors.find((n) => n.name === elected.node)!;
    expect(await e2e.agreedLeader(survivors, 10_000)).toBe(newLeader.id);
    const views = await e2e.measure("metroctl nodes answered after the failover", () =>
      e2e.cluster.listNodes(),
    );
    expect(views.map((v) => v.id).sort()).toEqual(nodes.map((n) => n.id).sort());
    // The new leader learns the survivors' health from their next heartbeats; the dead node,
    // which it never heard from, turns HEARTBEAT_TIMEOUT once the leader is older than the
    // heartbeat timeout (packages/curator's HeartbeatTracker).
    await e2e.measure("survivors HEALTHY as seen by the new leader", () =>
      e2e.allHealthy(survivors),
    );
    expect(views.find((v) => v.id === leader.id)?.health).not.toBe("HEALTHY");
    await e2e.measure("the dead leader HEARTBEAT_TIMEOUT as seen by the new leader", () =>
      e2e.cluster.metroctlOk([
        "wait",
        leader.id,
        "--health",
        "HEARTBEAT_TIMEOUT",
        "--timeout",
        "30",
        "--interval",
        "0.2",
      ]),
    );

    // Power back on: the old leader rejoins as a follower and a voting member.
    await e2e.measure(`${leader.name} UP and HEALTHY after power-on`, async () => {
      e2e.cluster.startNode(leader);
      await e2e.cluster.waitFor(leader, { state: "UP", health: "HEALTHY" }, 60_000);
    });
    await expectThreeVoters();
    expect(await e2e.agreedLeader(nodes)).toBe(newLeader.id);
  });
});
