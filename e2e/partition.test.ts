/**
 * e2e partition: the curator leader's host cut off from the other two by
 * the network (iptables in the namespaces of ../local-cluster's testbed),
 * while the owner still reaches every host. Three consensus members, each
 * in a network namespace of its own.
 *
 * What must hold (issue 36 part 3):
 *   - the two others elect a new curator leader, and a label write through
 *     it is acknowledged;
 *   - the old leader stops claiming and serving once its lease deadline
 *     passes (lease-deadline.ts): no call invoked later than TTL after the
 *     cut is answered by it as the leader, and after a successor was seen
 *     leading it never names itself (two leaders at once);
 *   - an owner client that talks only to the old leader, after a write
 *     acknowledged by the new one, gets UNAVAILABLE or that write, never
 *     the older state (a stale read);
 *   - after healing every node is UP and HEALTHY again, and no
 *     acknowledged write is lost.
 *
 * Every call to the old leader is recorded with the monotonic times it was
 * invoked and returned; the checks only conclude what those times prove (a
 * call's answer was made after its invocation). Before the lease deadline,
 * the old leader kept naming itself for 25 s after such a cut, and served
 * stale reads 17.7 s after it.
 *
 * It needs root and ip, iptables, conntrack and nsenter; elsewhere it is
 * skipped with the reason in its name.
 */
import { performance } from "node:perf_hooks";
import { eventually } from "@metropolis/supervisor/testing";
import type { ClusterNode } from "../local-cluster/src/cluster-launcher";
import { localNodeConfig } from "../local-cluster/src/cluster-launcher";
import { ownerTowardsNode } from "../local-cluster/src/cluster-view";
import { testbedSuite } from "../local-cluster/src/testing";
import { E2eCluster } from "./e2e-cluster";
import { DirectCurator, probeIntervalMs, startProbing } from "./direct-curator";

jest.setTimeout(300_000);

const suite = testbedSuite("partition: the curator leader's host cut off from the two others");

/** The nodes' election lease TTL (local clusters' configuration). */
const ttlMs = (localNodeConfig.leaderTtlSeconds ?? 10) * 1000;
(suite.runs ? describe : describe.skip)(suite.title, () => {
  let e2e: E2eCluster;
  let nodes: ClusterNode[];
  const clients: DirectCurator[] = [];

  beforeAll(async () => {
    e2e = await E2eCluster.create("partition", { nodes: 3, hosts: true });
    await e2e.up();
    nodes = [1, 2, 3].map((i) => e2e.node(i));
    const ids = nodes.map((n) => n.id).sort();
    for (const members of await e2e.votingMembers(nodes)) expect(members).toEqual(ids);
  });

  afterAll(async () => {
    for (const c of clients) c.close();
    await e2e?.teardown();
  });

  const direct = async (node: ClusterNode) => {
    const client = new DirectCurator(node, ownerTowardsNode(await e2e.owner(), node.id));
    clients.push(client);
    return client;
  };

  it("fences the old leader: a successor leads, the old one neither claims nor serves stale reads, and all heal", async () => {
    const leaderId = await e2e.agreedLeader(nodes);
    const oldNode = nodes.find((n) => n.id === leaderId);
    if (!oldNode) throw new Error(`the leader ${leaderId} is not a node of the cluster`);
    const others = nodes.filter((n) => n !== oldNode);
    const subject = others[0];
    const key = "partition";
    // The operator sees who leads in the supervision tree: the leadership machine's state.
    expect(await e2e.cluster.metroctlOk(["tree", oldNode.id])).toMatch(
      /curator +HEALTHY.*state: leading\.serving/,
    );
    const old = await direct(oldNode);
    // A write the old leader acknowledged before the cut.
    await old.setLabel(subject.id, key, "before");
    expect(await old.label(subject.id, key)).toBe("before");

    await e2e.network.isolate(oldNode.index);
    const cutAt = performance.now();
    const probing = new AbortController();
    const probed = startProbing(old, subject.id, key, probing.signal);
    try {
      // The two others elect a successor, and a write through it is acknowledged.
      const successorId = await e2e.measure("a new curator leader among the majority", () =>
        eventually(
          async () => {
            const id = await e2e.agreedLeader(others);
            return id !== leaderId && id;
          },
          "a successor of the isolated leader",
          { timeoutMs: 60_000, intervalMs: 100 },
        ),
      );
      const successorSeenAt = performance.now();
      e2e.note("the successor seen leading, after the cut", successorSeenAt - cutAt);
      const successorNode = others.find((n) => n.id === successorId);
      if (!successorNode) throw new Error(`the successor ${successorId} is not a node`);
      const successor = await direct(successorNode);
      await eventually(
        () => successor.setLabel(subject.id, key, "after").then(() => true),
        "the successor to acknowledge a label write",
        { timeoutMs: 30_000, intervalMs: 100 },
      );
      const ackedAt = performance.now();
      // Read from the old leader for a while after the acknowledgement.
      await eventually(
        () =>
          probed.probes.filter((p) => p.kind === "GetNodes" && p.invokedAt > ackedAt).length >= 10,
        "ten reads of the old leader after the acknowledged write",
        { timeoutMs: 30_000, intervalMs: probeIntervalMs },
      );
      probing.abort();
      await probed.done;
      const seen = probed.probes;

      // No stale read: a read invoked after the acknowledgement fails or shows the write.
      const stale = seen.filter(
        (p) => p.kind === "GetNodes" && p.invokedAt > ackedAt && p.answer === "before",
      );
      expect(stale).toEqual([]);
      // No two leaders: once a successor was seen, the old one never names itself.
      const claims = seen.filter(
        (p) =>
          p.kind === "GetCurrentLeader" && p.answer === leaderId && p.invokedAt > successorSeenAt,
      );
      expect(claims).toEqual([]);
      // It stopped serving as the leader within TTL of the cut (its last confirmed renewal).
      const servedLate = seen.filter(
        (p) =>
          p.invokedAt > cutAt + ttlMs &&
          (p.kind === "GetNodes" ? p.failed === undefined : p.answer === leaderId),
      );
      expect(servedLate).toEqual([]);
      const lastServed = Math.max(
        ...seen
          .filter((p) => (p.kind === "GetNodes" ? p.failed === undefined : p.answer === leaderId))
          .map((p) => p.returnedAt),
      );
      e2e.note("the old leader's last answer as the leader, after the cut", lastServed - cutAt);
      const refusals = seen.filter((p) => p.kind === "GetNodes" && p.invokedAt > ackedAt);
      process.stdout.write(
        `e2e partition: ${seen.length} calls to the old leader; after the acknowledged write its reads failed with: ${[
          ...new Set(refusals.map((p) => p.failed ?? `answered ${p.answer}`)),
        ].join(" | ")}\n`,
      );
    } finally {
      probing.abort();
      await probed.done;
    }

    await e2e.network.heal();
    // Within 15 s of the heal, by their own means (issue 36).
    await e2e.measure("every node UP and HEALTHY after the network healed", () =>
      e2e.allHealthy(nodes, 15_000),
    );
    // No acknowledged write lost: the last one holds, through any curator.
    const views = await e2e.cluster.listNodes();
    expect(views.find((v) => v.id === subject.id)?.labels).toMatchObject({ [key]: "after" });
    expect(await old.label(subject.id, key).catch(() => "")).toMatch(/^(after|)$/);
    const ids = nodes.map((n) => n.id).sort();
    for (const members of await e2e.votingMembers(nodes)) expect(members).toEqual(ids);
  });
});
