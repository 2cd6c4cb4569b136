/**
 * e2e partition faults: the network faults of issue 36 part 3 besides the
 * curator leader's isolation (partition.test.ts), one after the other on
 * one cluster of three consensus members, each in a network namespace of
 * its own (../local-cluster's testbed, iptables in the namespaces), healed
 * and every node HEALTHY again between them. The owner reaches every host
 * all along and probes every curator directly every 100 ms
 * (curator-probes.ts: who leads, a read of a label), while it writes that
 * label through whichever curator leads.
 *
 *   1. A follower's host isolated (a node that leads neither the curators
 *      nor raft): the leader keeps leading, named by the majority, and
 *      acknowledges writes; the follower's curator never names itself; the
 *      follower's process and Debug service keep running; healed, every
 *      node is UP and HEALTHY within 15 s.
 *   2. The etcd raft leader and the curator leader on different hosts
 *      (raft leadership moved with etcd's MoveLeader where they were on
 *      one), each isolated in turn: (a) the raft leader's host: a curator
 *      of the majority keeps or regains serving, without two leaders;
 *      (b) the curator leader's host: a successor, no stale read, the old
 *      one fenced by its lease deadline.
 *   3. A bridge: the curator leader's host and the raft leader's cannot
 *      reach each other, the third reaches both (`network.partition([[a],
 *      [b]])`: a host in no group is untouched): at most one curator
 *      leads at a time, writes go through whichever leads, all HEALTHY
 *      within 15 s of the heal.
 *   4. A gray failure: only the etcd peer port (7834) of the curator
 *      leader's host blocked — the node and its curator reachable, its etcd
 *      member cut off from its peers: fenced as in (2b).
 *
 * Every check concludes only what the calls' invocation and return times
 * prove (curator-probes.ts). With the lease deadline removed (Leadership's
 * `serving` always true, the machine's `leaseHeld` guard always true), 2b
 * and 4 fail: the old leader names itself for a second after the successor
 * was seen.
 *
 * Every heal is held to 15 s, as issue 36 asks. Scenario 4 once waited up
 * to 60 s: in about a third of the runs a node stayed HEARTBEAT_TIMEOUT for
 * more than 15 s after its heal. Its connection to a curator whose host was
 * cut off in 2b (and which restarted its listener meanwhile) had lost its
 * TCP connection, yet grpc-js kept the channel READY until the node's HTTP/2
 * keepalive gave up (30 s + 20 s); when that curator led again in 4, the
 * node's streams there got no first message. The curator client now closes
 * the connection to a leader it gives up, and makes it anew at its next use
 * (curator's README, "Serving").
 *
 * It needs root and ip, iptables, conntrack and nsenter; elsewhere it is
 * skipped with the reason in its name.
 */
import { performance } from "node:perf_hooks";
import { api } from "@metropolis/proto";
import { eventually } from "@metropolis/supervisor/testing";
import type { ClusterNode } from "../local-cluster/src/cluster-launcher";
import { testbedSuite } from "../local-cluster/src/testing";
import {
  CuratorObservation,
  fencedFailover,
  leaseTtlMs,
  moveRaftLeader,
  raftLeader,
  raftLeaderViews,
} from "./curator-probes";
import { E2eCluster } from "./e2e-cluster";

jest.setTimeout(300_000);

const suite = testbedSuite(
  "partition faults: a follower, the raft leader, a bridge, the etcd peer port",
);

/** The nodes' etcd peer port (the node configuration's `ports.consensus` default). */
const etcdPeerPort = 7834;

(suite.runs ? describe : describe.skip)(suite.title, () => {
  let e2e: E2eCluster;
  let nodes: ClusterNode[];
  const observations: CuratorObservation[] = [];

  beforeAll(async () => {
    e2e = await E2eCluster.create("partition-faults", { nodes: 3, hosts: true });
    await e2e.up();
    nodes = [1, 2, 3].map((i) => e2e.node(i));
    const ids = nodes.map((n) => n.id).sort();
    for (const members of await e2e.votingMembers(nodes)) expect(members).toEqual(ids);
  });

  afterEach(async () => {
    // A failed scenario leaves no fault behind for the next one.
    await e2e?.network.heal();
  });

  afterAll(async () => {
    for (const o of observations) o.close();
    await e2e?.teardown();
  });

  const nodeById = (id: string): ClusterNode => {
    const node = nodes.find((n) => n.id === id);
    if (!node) throw new Error(`${id} is not a node of the cluster`);
    return node;
  };

  const observe = async (subject: ClusterNode, key: string) => {
    const observation = await CuratorObservation.create(e2e, nodes, subject, key);
    observations.push(observation);
    return observation;
  };

  /** The curator leader, and the raft leader on another host (moved there if it was not). */
  const leadersApart = async (what: string) => {
    const curatorLeader = nodeById(await e2e.agreedLeader(nodes));
    let raft = await raftLeader(nodes);
    if (raft === curatorLeader) {
      const to = nodes.filter((n) => n !== curatorLeader)[0];
      await e2e.measure(`${what}: raft leadership moved off the curator leader's host`, () =>
        moveRaftLeader(nodes, curatorLeader, to),
      );
      raft = to;
    }
    // The curator leader must not have changed meanwhile.
    expect(await e2e.agreedLeader(nodes)).toBe(curatorLeader.id);
    return { curatorLeader, raft };
  };

  /**
   * Heals the network and waits until every node is UP and HEALTHY: within
   * 15 s (issue 36); then the last write acknowledged holds, and all three
   * are voting etcd members again. Returns when the heal began.
   */
  const healed = async (what: string, o: CuratorObservation, timeoutMs = 15_000) => {
    const healAt = performance.now();
    await e2e.network.heal();
    await e2e
      .measure(`${what}: every node UP and HEALTHY after the heal`, () =>
        e2e.allHealthy(nodes, timeoutMs),
      )
      .catch(async (e: unknown) => {
        // What a failed heal leaves to read: the nodes as the leader sees them, their last troubles.
        const table = await e2e.cluster.nodeTable().catch((t: unknown) => String(t));
        process.stdout.write(
          `e2e partition-faults ${what}: not all HEALTHY ${timeoutMs / 1000} s after the heal:\n${table}\n${e2e.cluster.recentTrouble(10).join("\n")}\n`,
        );
        throw e;
      });
    const last = o.writes[o.writes.length - 1];
    const views = await e2e.cluster.listNodes();
    expect(views.find((v) => v.id === o.subject.id)?.labels).toMatchObject({ [o.key]: last.value });
    const ids = nodes.map((n) => n.id).sort();
    for (const members of await e2e.votingMembers(nodes)) expect(members).toEqual(ids);
    return healAt;
  };

  it("1. a follower cut off: the leader keeps leading and writing, the follower never claims, keeps running, and heals", async () => {
    const leader = nodeById(await e2e.agreedLeader(nodes));
    const raft = await raftLeader(nodes);
    // A follower that leads neither the curators nor raft (the raft leader's turn is 2a).
    const follower =
      nodes.find((n) => n !== leader && n !== raft) ?? nodes.filter((n) => n !== leader)[0];
    const majority = nodes.filter((n) => n !== follower);
    const subject = majority.filter((n) => n !== leader)[0];
    const o = await observe(subject, "follower-cut");
    await o.write("0", [leader]);
    o.start(leader.id);

    await e2e.network.isolate(follower.index);
    const cutAt = performance.now();
    await e2e.measure(`1: ${follower.name} cut off: HEARTBEAT_TIMEOUT at the leader`, () =>
      eventually(
        async () =>
          (await e2e.cluster.listNodes()).find((v) => v.id === follower.id)?.health ===
          "HEARTBEAT_TIMEOUT",
        `${follower.name} HEARTBEAT_TIMEOUT at the leader`,
        { timeoutMs: 30_000, intervalMs: 200 },
      ),
    );
    expect((await o.write("1", majority)).through).toBe(leader.id);
    // Its local services run on: the process, its Debug service (answering the owner).
    expect(follower.process?.running).toBe(true);
    const conditions = await Promise.all(
      [api.Condition.CONSENSUS_RUNNING, api.Condition.CLUSTER_HOME].map(
        async (c) => `${api.Condition[c]} ${(await e2e.condition(follower, c)).ok}`,
      ),
    );
    // CURATOR_CONNECTED asks the node's curator connection for the leader (2 s), which joins
    // a search under way with the deadline of whoever began it: timed, not asserted.
    const askedAt = performance.now();
    const connected = e2e.view.condition(follower, api.Condition.CURATOR_CONNECTED, 40_000).then(
      (r) =>
        `CURATOR_CONNECTED ${r.ok} after ${((performance.now() - askedAt) / 1000).toFixed(1)} s`,
      (e: unknown) => `CURATOR_CONNECTED failed: ${String(e).slice(0, 80)}`,
    );
    // Long enough for the follower's own lease, and any other, to have run out (3 TTLs).
    await o.probedAfter(cutAt + 3 * leaseTtlMs, "3 TTLs after the cut");
    expect((await o.write("2", majority)).through).toBe(leader.id);
    expect(follower.process?.running).toBe(true);
    conditions.push(await connected);

    const healAt = await healed("1", o);
    await o.stop();
    // The majority named the same leader all along, which served every call while the cut lasted.
    for (const n of majority) expect([n.name, o.named(n, leader.id)]).toEqual([n.name, []]);
    const failed = o.curator(leader).probes.filter((p) => p.failed !== undefined);
    expect(failed.filter((p) => p.invokedAt < healAt)).toEqual([]);
    // The follower's curator never named itself, nor served a read.
    expect(o.served(follower)).toEqual([]);
    // No new leadership anywhere, no stale read, no two leaders.
    for (const n of nodes)
      expect([n.name, o.leaderships(n)]).toEqual([n.name, n === leader ? 1 : 0]);
    expect(o.staleReads()).toEqual([]);
    expect(o.doubleLeaders()).toEqual({ proven: [], unconcluded: [] });
    process.stdout.write(
      `e2e partition-faults 1: ${follower.name} cut off (raft leader ${raft.name}, curator leader ${leader.name}); its Debug service answered: ${conditions.join(", ")}; ${o.summary()}\n`,
    );
  });

  it("2a. the etcd raft leader's host cut off (not the curator leader's): a curator of the majority keeps or regains serving, never two", async () => {
    const { curatorLeader, raft } = await leadersApart("2a");
    const third = nodes.filter((n) => n !== curatorLeader && n !== raft)[0];
    const majority = [curatorLeader, third];
    const o = await observe(third, "raft-leader-cut");
    await o.write("0", [curatorLeader]);
    o.start(curatorLeader.id);

    await e2e.network.isolate(raft.index);
    const cutAt = performance.now();
    const first = await e2e.measure(
      `2a: ${raft.name} (raft leader) cut off: a write acknowledged by the majority's curator leader`,
      () => o.write("1", majority),
    );
    const newRaft = await e2e.measure("2a: a new raft leader among the majority", () =>
      raftLeader(majority),
    );
    await o.probedAfter(cutAt + 3 * leaseTtlMs, "3 TTLs after the cut");
    const second = await o.write("2", majority);

    await healed("2a", o);
    await o.stop();
    expect(o.staleReads()).toEqual([]);
    const { proven, unconcluded } = o.doubleLeaders();
    expect(proven).toEqual([]);
    // The cut-off raft leader's curator, a follower, never claimed nor served.
    expect(o.served(raft)).toEqual([]);
    // Whether the curator leader kept leading: its longest stretch without serving after the cut.
    const served = o.served(curatorLeader).filter((p) => p.invokedAt > cutAt);
    const gap = Math.max(0, ...served.slice(1).map((p, i) => p.invokedAt - served[i].returnedAt));
    e2e.note(`2a: ${curatorLeader.name}'s longest gap in serving after the cut`, gap);
    process.stdout.write(
      `e2e partition-faults 2a: raft ${raft.name} → ${newRaft.name}; writes acknowledged by ${[first, second].map((w) => nodeById(w.through).name).join(", ")}; leaderships: ${nodes.map((n) => `${n.name} ${o.leaderships(n)}`).join(", ")}; unconcluded X-Y-X: ${unconcluded.length}; ${o.summary()}\n`,
    );
  });

  it("2b. the curator leader's host cut off while raft leads elsewhere: a successor, no stale read, the old one fenced", async () => {
    const { curatorLeader, raft } = await leadersApart("2b");
    process.stdout.write(
      `e2e partition-faults 2b: curator leader ${curatorLeader.name}, raft leader ${raft.name}\n`,
    );
    const { observation } = await fencedFailover(e2e, nodes, curatorLeader, "2b", () =>
      e2e.network.isolate(curatorLeader.index),
    );
    await healed("2b", observation);
  });

  it("3. a bridge (the curator leader's and the raft leader's hosts apart, the third reaching both): one leader at a time, writes go on", async () => {
    const { curatorLeader, raft } = await leadersApart("3");
    const bridge = nodes.filter((n) => n !== curatorLeader && n !== raft)[0];
    const o = await observe(bridge, "bridge");
    await o.write("0", [curatorLeader]);
    o.start(curatorLeader.id);

    // Only the pair apart: the bridge is in no group, so untouched.
    await e2e.network.partition([[curatorLeader.index], [raft.index]]);
    const cutAt = performance.now();
    const first = await e2e.measure("3: bridge: a write acknowledged through whichever leads", () =>
      o.write("1", nodes),
    );
    await o.probedAfter(cutAt + 3 * leaseTtlMs, "3 TTLs after the cut");
    const second = await o.write("2", nodes);
    const raftDuring = await raftLeaderViews(nodes);

    await healed("3", o);
    await o.stop();
    expect(o.staleReads()).toEqual([]);
    const { proven, unconcluded } = o.doubleLeaders();
    expect(proven).toEqual([]);
    process.stdout.write(
      `e2e partition-faults 3: ${curatorLeader.name} (curator leader) | ${bridge.name} (bridge) | ${raft.name} (raft leader); raft leader during the bridge as each member saw it: ${raftDuring}; writes acknowledged by ${[first, second].map((w) => nodeById(w.through).name).join(", ")}; leaderships: ${nodes.map((n) => `${n.name} ${o.leaderships(n)}`).join(", ")}; unconcluded X-Y-X: ${JSON.stringify(unconcluded)}; ${o.summary()}\n`,
    );
  });

  it("4. only the etcd peer port of the curator leader's host blocked (gray failure): fenced as when isolated", async () => {
    const curatorLeader = nodeById(await e2e.agreedLeader(nodes));
    const raft = await raftLeader(nodes);
    const grayChecks: string[] = [];
    const { observation } = await fencedFailover(
      e2e,
      nodes,
      curatorLeader,
      "4",
      () => e2e.network.blockPort(curatorLeader.index, etcdPeerPort),
      async (o) => {
        // Gray: the node and its curator are still reachable, only its etcd is cut off.
        expect(curatorLeader.process?.running).toBe(true);
        const running = await e2e.condition(curatorLeader, api.Condition.CONSENSUS_RUNNING);
        grayChecks.push(`CONSENSUS_RUNNING ${running.ok}`);
        const answered = o.curator(curatorLeader).probes.filter((p) => p.failed === undefined);
        grayChecks.push(`${answered.length} calls answered by its curator`);
      },
    );
    process.stdout.write(
      `e2e partition-faults 4: ${curatorLeader.name}'s port ${etcdPeerPort} blocked (raft leader before: ${raft.name}); during: ${grayChecks.join(", ")}\n`,
    );
    await healed("4", observation);
  });
});
