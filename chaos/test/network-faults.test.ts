/**
 * The network faults' topologies, without a testbed: over many seeds, a
 * majorities ring gives every member a majority of the members and no two
 * the same; a split leaves exactly one side with a majority; a bridge
 * reaches both halves, which do not reach each other; every host is placed
 * exactly once; and a seed replays the same shape.
 */
import {
  bridgeGroups,
  planNetworkFault,
  reachability,
  ringCuts,
  splitGroups,
  type NetworkFaultKind,
  type PlanContext,
} from "../src/network-faults";
import { Prng } from "../src/prng";

const seeds = Array.from({ length: 200 }, (_, i) => i + 1);

function members(n: number): number[] {
  return Array.from({ length: n }, (_, i) => i + 1);
}

describe("ringCuts", () => {
  it.each([4, 5, 6, 7])("gives each of %i members a majority of them, no two the same", (m) => {
    for (const seed of seeds) {
      const hosts = members(m);
      const { cycle, cuts } = ringCuts(hosts, new Prng(seed));
      expect([...cycle].sort((a, b) => a - b)).toEqual(hosts);
      const sees = reachability(
        hosts,
        cuts.map(([a, b]) => [[a], [b]]),
      );
      const views = new Set<string>();
      for (const h of hosts) {
        const seen = sees.get(h) ?? [];
        expect(seen.length).toBeGreaterThan(m / 2);
        expect(seen.length).toBeLessThan(m);
        views.add(seen.join(","));
      }
      expect(views.size).toBe(m);
    }
  });

  it("with 5 members, each reaches exactly its two neighbours on the ring", () => {
    const { cycle, cuts } = ringCuts(members(5), new Prng(7));
    expect(cuts).toHaveLength(5);
    const sees = reachability(
      members(5),
      cuts.map(([a, b]) => [[a], [b]]),
    );
    cycle.forEach((h, i) => {
      const neighbours = [cycle[(i + 4) % 5], h, cycle[(i + 1) % 5]].sort((a, b) => a - b);
      expect(sees.get(h)).toEqual(neighbours);
    });
  });

  it("cuts nothing for 3 members: every majority is everyone", () => {
    expect(ringCuts(members(3), new Prng(1)).cuts).toEqual([]);
  });
});

describe("splitGroups", () => {
  it("leaves exactly one side with a majority of the members, every host placed once", () => {
    for (const seed of seeds) {
      const [minority, majority] = splitGroups(members(5), [6], new Prng(seed));
      expect([...minority, ...majority].sort((a, b) => a - b)).toEqual(members(6));
      const inMinority = minority.filter((h) => h <= 5).length;
      expect(inMinority).toBeGreaterThanOrEqual(1);
      expect(inMinority).toBeLessThanOrEqual(2);
      expect(majority.filter((h) => h <= 5).length).toBeGreaterThanOrEqual(3);
    }
  });
});

describe("bridgeGroups", () => {
  it("has the bridge reach every host and the halves not reach each other", () => {
    for (const seed of seeds) {
      const hosts = members(6);
      const { bridge, halves } = bridgeGroups(members(5), [6], new Prng(seed));
      expect(bridge).toBeLessThanOrEqual(5);
      expect([bridge, ...halves[0], ...halves[1]].sort((a, b) => a - b)).toEqual(hosts);
      const sees = reachability(hosts, [halves]);
      expect(sees.get(bridge)).toEqual(hosts);
      for (const h of halves[0]) for (const o of halves[1]) expect(sees.get(h)).not.toContain(o);
      // Two members a half: with the bridge, each side has 3 of the 5.
      expect(halves[0].filter((h) => h <= 5)).toHaveLength(2);
      expect(halves[1].filter((h) => h <= 5)).toHaveLength(2);
    }
  });
});

describe("planNetworkFault", () => {
  const context = (seed: number, leader?: number): PlanContext => ({
    prng: new Prng(seed),
    members: members(5),
    others: [6],
    curatorLeader: () => Promise.resolve(leader),
    raftLeader: () => Promise.resolve(leader === undefined ? undefined : leader + 1),
  });

  it("replays the same fault for the same seed", async () => {
    const kinds: NetworkFaultKind[] = ["split", "ring", "bridge", "loss", "block-port", "isolate"];
    for (const kind of kinds) {
      expect(await planNetworkFault(kind, context(11))).toEqual(
        await planNetworkFault(kind, context(11)),
      );
    }
  });

  it("isolates the leaders' hosts, and gives up when no leader is known", async () => {
    expect(await planNetworkFault("isolate-leader", context(1, 3))).toMatchObject({
      change: { kind: "isolate", host: 3 },
      label: "isolate curator leader host3",
    });
    expect(await planNetworkFault("isolate-raft-leader", context(1, 3))).toMatchObject({
      change: { kind: "isolate", host: 4 },
    });
    expect(await planNetworkFault("isolate-leader", context(1))).toBeUndefined();
  });

  it("blocks etcd's peer port or the curator's, and loses 20–40 % of the packets", async () => {
    for (const seed of seeds.slice(0, 50)) {
      const block = await planNetworkFault("block-port", context(seed));
      expect(block?.change).toMatchObject({ kind: "block-port" });
      if (block?.change.kind === "block-port") expect([7834, 7835]).toContain(block.change.port);
      const loss = await planNetworkFault("loss", context(seed));
      if (loss?.change.kind !== "loss") throw new Error("not a loss");
      expect(loss.change.probability).toBeGreaterThanOrEqual(0.2);
      expect(loss.change.probability).toBeLessThanOrEqual(0.4);
    }
  });
});
