/**
 * e2e rogue: issue 11's curator hijack, tried against real processes. Three
 * consensus members; a fourth node, enrolled the normal way and approved by
 * the owner but without roles (the test process itself, see rogue-node.ts),
 * attacks:
 *
 * - it asks the curator to record it as running a curator, and to give it
 *   a member's address: both refused (PERMISSION_DENIED, ALREADY_EXISTS), its
 *   record shows no curator;
 * - it serves, with its genuine node certificate, a fake curator on its own
 *   address — at the port it advertised and at the cluster's curator port,
 *   where every node would look for a curator on an address the cluster
 *   directory lists (and it lists the rogue, an UP node with an address):
 *   "the leader is me", and Watch answers that take every node's roles away;
 * - meanwhile the curator leader's node loses its power (SIGKILL), so that
 *   every node looks for the leader again, and comes back.
 *
 * No node may dial the rogue (not one connection reaches it), no member may
 * hear "no roles" or drop anything: every member's etcd data and sealed
 * cluster unlock key are still there, and the cluster is UP and HEALTHY with
 * three voting etcd members and one leader afterwards. Before the fixes of
 * issue 11 this attack made every member remove its etcd data.
 */
import { existsSync } from "node:fs";
import { readFile } from "node:fs/promises";
import { join } from "node:path";
import { status } from "@grpc/grpc-js";
import { CuratorConnection } from "@metropolis/curator";
import { placeNodeRoot, unsealConfiguration } from "@metropolis/localstorage";
import { api, priv } from "@metropolis/proto";
import { isProgressEvent } from "@metropolis/supervisor/node-progress";
import { eventually } from "@metropolis/supervisor/testing";
import type { ClusterNode } from "../local-cluster/src/cluster-launcher";
import { parseNodeLine, type NodeLine, type NodeProcess } from "../local-cluster/src/node-process";
import { curatorPort, E2eCluster } from "./e2e-cluster";
import {
  advertisedCuratorPort,
  enrolRogue,
  reportStatus,
  serveFakeCurator,
  watchOnce,
  type FakeCurator,
  type RogueNode,
} from "./rogue-node";

jest.setTimeout(300_000);

/**
 * What a member logs when it takes a curator's "no roles" as its own, and what it then drops
 * (this build's wording and the one before issue 11's fixes).
 */
const giveaways = [
  /^roles from the curator: none$/,
  /not a consensus member/,
  /removed .*etcd data/,
  /unlock key removed/,
];

let e2e: E2eCluster;
let nodes: ClusterNode[];
let rogue: RogueNode | undefined;
let fake: FakeCurator | undefined;
/** Each member's sealed cluster unlock key before the attack. */
const unlockKeys = new Map<string, Buffer>();

beforeAll(async () => {
  e2e = await E2eCluster.create("rogue", { nodes: 3 });
  await e2e.up();
  nodes = [1, 2, 3].map((i) => e2e.node(i));
});

afterAll(async () => {
  await fake?.stop().catch(() => undefined);
  rogue?.connection.close();
  await e2e?.teardown();
});

/** The rogue, once the first test enrolled it. */
function theRogue(): RogueNode {
  if (!rogue) throw new Error("the rogue was not enrolled (see the first test's failure)");
  return rogue;
}

/** The fake curator, once the rogue serves it. */
function theFake(): FakeCurator {
  if (!fake) throw new Error("the rogue serves no fake curator (see the earlier failure)");
  return fake;
}

/** The running (or last) process of `node`. */
function processOf(node: ClusterNode): NodeProcess {
  if (!node.process) throw new Error(`${node.name} was never started`);
  return node.process;
}

/** Node `node`'s sealed configuration, unsealed with its machine key. */
async function sealedConfiguration(node: ClusterNode): Promise<priv.SealedConfiguration> {
  const file = placeNodeRoot(node.root).esp.metropolis.sealedConfiguration;
  const bytes = await unsealConfiguration(file, { machineKeyPath: join(node.root, "machine.key") });
  return priv.SealedConfiguration.decode(bytes);
}

/** Node `node`'s etcd data: its member directory. */
const etcdData = (node: ClusterNode) => join(node.root, "data", "etcd", "data", "member");

/**
 * What node `node` logged from `since` on, in any of its processes (the
 * harness appends every process's log lines to the node's log file).
 */
async function loggedSince(node: ClusterNode, since: number): Promise<NodeLine[]> {
  const text = await readFile(join(e2e.cluster.stateDir, "logs", `${node.name}.log`), "utf8");
  return text
    .split("\n")
    .map((raw, i) => parseNodeLine(raw, node.name, "stdout", i))
    .filter((l) => l.time !== undefined && Date.parse(l.time) >= since);
}

/** Every node's etcd member reports the three nodes as voting members; each runs consensus. */
async function expectThreeVoters(): Promise<void> {
  const ids = nodes.map((n) => n.id).sort();
  for (const members of await e2e.votingMembers(nodes)) expect(members).toEqual(ids);
}

/** The rogue's view of its own record at the real curator. */
async function rogueRecord(r: RogueNode) {
  const answer = await watchOnce(r.connection, {
    $case: "nodeInCluster",
    nodeInCluster: { nodeId: r.nodeId },
  });
  return answer.nodes.find((n) => n.id === r.nodeId);
}

describe("rogue: an approved node without roles poses as the curator", () => {
  it("is enrolled the normal way, and each member holds its etcd data and sealed unlock key", async () => {
    for (const node of nodes) {
      expect(existsSync(etcdData(node))).toBe(true);
      const { clusterUnlockKey } = await sealedConfiguration(node);
      expect(clusterUnlockKey).toHaveLength(32);
      unlockKeys.set(node.id, Buffer.from(clusterUnlockKey));
    }
    // An address of this file's /24 that no node uses, where this process can listen: on the
    // testbed the bridge's own (the owner's side), on loopback any.
    const host = e2e.testbed ? e2e.testbed.ownerAddress : e2e.address(10);
    expect(nodes.map((n) => n.address)).not.toContain(host);
    const r = await e2e.measure("rogue enrolled (RegisterNode, approve, CommitNode)", () =>
      enrolRogue(e2e, nodes, host),
    );
    rogue = r;
    const view = (await e2e.cluster.listNodes()).find((v) => v.id === r.nodeId);
    expect(view).toMatchObject({ state: "UP", roles: [] });
  });

  it("the curator refuses its claim of a curator, and of a member's address", async () => {
    const r = theRogue();
    const member = e2e.node(2);
    // Every claim is made before any is checked, the attack's own last: a curator that accepted
    // them would leave the rogue where issue 11 found it (its own address, a curator at 17835),
    // and the attack below would still run. First what any node reports: its own address, no
    // curator (the rogue is in every node's cluster directory from now on).
    const own = await reportStatus(r, { externalAddress: r.host });
    const taken = await reportStatus(r, { externalAddress: member.address });
    const claim = await reportStatus(r, {
      externalAddress: r.host,
      runningCurator: { port: advertisedCuratorPort },
    });

    expect(own).toBeUndefined();
    expect(taken?.code).toBe(status.ALREADY_EXISTS);
    expect(taken?.details).toContain(
      `external address ${member.address} is held by node ${member.id}`,
    );
    expect(claim?.code).toBe(status.PERMISSION_DENIED);
    expect(claim?.details).toMatch(/is not a consensus member.*may not report running_curator/);

    const record = await rogueRecord(r);
    expect(record?.status?.externalAddress).toBe(r.host);
    expect(record?.status?.runningCurator).toBeUndefined();
    expect(record?.roles?.consensusMember).toBeUndefined();
    expect((await e2e.cluster.listNodes()).find((v) => v.id === r.nodeId)?.address).toBe(r.host);
  });

  it("serves a fake leader that no node dials, through a failover of the real leader", async () => {
    const r = theRogue();
    // Before this, node2 and node3 had no roles for a while (enrolled, then made members).
    const attackStartedAt = Date.now();
    // The real records, which the fake curator replays without roles.
    const records = (
      await watchOnce(r.connection, {
        $case: "nodesInCluster",
        nodesInCluster: { resumeFromRevision: 0, resumeEtcdClusterId: "" },
      })
    ).nodes;
    expect(records.map((n) => n.id)).toEqual(expect.arrayContaining([...nodes.map((n) => n.id)]));
    const served = await serveFakeCurator(r, [advertisedCuratorPort, curatorPort], records);
    fake = served;

    // It works: a client that takes any node of the cluster as a curator (what every node did
    // before issue 11) is told the rogue leads, and that it has no roles.
    for (const port of [advertisedCuratorPort, curatorPort]) {
      const naive = new CuratorConnection({
        endpoints: [{ host: r.host, port }],
        ca: r.tls.ca,
        identity: { cert: r.tls.cert, key: r.tls.key },
      });
      try {
        expect((await naive.leader(5_000)).nodeId).toBe(r.nodeId);
        const own = await watchOnce(naive, {
          $case: "nodeInCluster",
          nodeInCluster: { nodeId: e2e.node(1).id },
        });
        expect(own.nodes[0]?.roles).toEqual({});
      } finally {
        naive.close();
      }
    }
    expect(served.calls.map((c) => c.method)).toEqual(
      expect.arrayContaining(["CuratorLocal.GetCurrentLeader", "Curator.Watch"]),
    );
    served.reset();

    // Where the rogue wants to be: in every node's cluster directory (an UP node with an address),
    // where a curator answers at the cluster's curator port.
    for (const node of nodes) {
      await eventually(
        async () => {
          const directory = await placeNodeRoot(node.root).esp.metropolis.clusterDirectory.read();
          const listed = directory.nodes.find((n) => n.id === r.nodeId);
          return listed?.addresses[0]?.host === r.host && !listed.consensusMember;
        },
        `${node.name}'s cluster directory to list the rogue, not as a consensus member`,
        { timeoutMs: 30_000, intervalMs: 200 },
      );
    }

    // The attack: the leader's machine loses power while the rogue serves.
    const leaderId = await e2e.agreedLeader(nodes);
    const leader = e2e.cluster.nodeById(leaderId);
    const survivors = nodes.filter((n) => n !== leader);
    const cursors = survivors.map((n) => processOf(n).cursor());
    const cutAt = Date.now();
    await e2e.cluster.killNode(leader);
    expect(processOf(leader).exit).toEqual({ code: null, signal: "SIGKILL" });
    const elected = await Promise.any(
      survivors.map((n, i) =>
        processOf(n).waitForLog((l) => isProgressEvent(l.progress, "curator.leading"), 30_000, {
          since: cursors[i],
          what: "curator.leading",
        }),
      ),
    );
    e2e.note(
      `curator failover after SIGKILL of the leader (${leader.name}) under attack`,
      Date.parse(elected.time ?? "") - cutAt,
    );
    const newLeader = await e2e.agreedLeader(survivors, 10_000);
    expect(newLeader).toBe(survivors.find((n) => n.name === elected.node)?.id);
    expect(survivors.map((n) => n.id)).toContain(newLeader);
    await e2e.measure("survivors HEALTHY as seen by the new leader", () =>
      e2e.allHealthy(survivors),
    );

    await e2e.measure(`${leader.name} UP and HEALTHY after power-on`, async () => {
      e2e.cluster.startNode(leader);
      await e2e.cluster.waitFor(leader, { state: "UP", health: "HEALTHY" }, 60_000);
    });
    // Every node found the leader again since the cut (the survivors after losing it, the
    // restarted one at its start): each had every reason to ask the curators it knows.
    for (const node of nodes) {
      await eventually(
        async () => (await e2e.condition(node, api.Condition.CURATOR_CONNECTED)).ok,
        `${node.name} connected to the curator`,
        { timeoutMs: 30_000, intervalMs: 200 },
      );
    }
    await expectThreeVoters();

    expect(served.calls).toEqual([]);
    expect(served.connections).toEqual([]);
    for (const node of nodes) {
      const lines = await loggedSince(node, attackStartedAt);
      const messages = lines.map((l) => l.message ?? l.raw);
      // The logs of the attack are read: the new leader's taking over is in one of them.
      if (node.id === newLeader) {
        expect(lines.map((l) => l.progress)).toContainEqual(
          expect.objectContaining({ event: "curator.leading", nodeId: newLeader }),
        );
      }
      for (const giveaway of giveaways) {
        expect(messages.filter((m) => giveaway.test(m))).toEqual([]);
      }
      expect(
        messages.filter(
          (m) => m.startsWith("curators to ask for the leader") && m.includes(r.nodeId),
        ),
      ).toEqual([]);
    }
  });

  it("leaves every member's etcd data and sealed unlock key intact, the cluster UP and HEALTHY", async () => {
    for (const node of nodes) {
      expect(existsSync(etcdData(node))).toBe(true);
      const { clusterUnlockKey } = await sealedConfiguration(node);
      expect(Buffer.from(clusterUnlockKey)).toEqual(unlockKeys.get(node.id));
    }
    await e2e.allHealthy(nodes);
    const leader = await e2e.agreedLeader(nodes);
    expect(nodes.map((n) => n.id)).toContain(leader);

    // The owner deletes the rogue (it never heartbeats, so it is UP by its record only).
    await e2e.cluster.metroctlOk(["delete", theRogue().nodeId, "--bypass", "node-up"]);
    const views = await e2e.cluster.listNodes();
    expect(views.map((v) => v.id).sort()).toEqual(nodes.map((n) => n.id).sort());
    for (const view of views) {
      expect(view).toMatchObject({ state: "UP", health: "HEALTHY" });
      expect(view.roles).toContain("consensus");
    }
    await expectThreeVoters();
    expect(theFake().calls).toEqual([]);
    expect(theFake().connections).toEqual([]);
  });
});
