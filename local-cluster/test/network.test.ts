/**
 * Network, on a real 3-host testbed with real iptables: a TCP echo server
 * on each host, probes dialling between hosts (each from inside its host's
 * namespace) and the owner dialling from the test process. Each fault is
 * shown to cut what it says, and only that: a control that must still get
 * through is checked next to every connection that must not, and `heal()`
 * brings everything back. Established connections are cut too.
 *
 * It needs root and ip, iptables, conntrack and nsenter; elsewhere the
 * suite is skipped with the reason in its name.
 */
import { spawnSync } from "node:child_process";
import { eventually } from "@metropolis/supervisor/testing";
import { describeFault, Network, NetworkFaultError } from "../src/network";
import { Testbed } from "../src/testbed";
import { testbedSuite } from "../src/testing";
import { ownerReaches, Probe } from "./netns-probe";

jest.setTimeout(60_000);

const suite = testbedSuite("Network (3 namespaces, real iptables)");

/** The echo ports: an "etcd peer" one and a "curator" one. */
const peerPort = 7834;
const curatorPort = 7835;

(suite.runs ? describe : describe.skip)(suite.title, () => {
  let testbed: Testbed;
  let network: Network;
  const probes = new Map<number, Probe>();
  const probe = (host: number): Probe => {
    const p = probes.get(host);
    if (!p) throw new Error(`no probe on host${host}`);
    return p;
  };
  const addr = (host: number) => testbed.address(host);

  /** Waits until every host reaches every other (and the owner every host) on both ports. */
  async function allConnected(): Promise<void> {
    for (const from of [1, 2, 3]) {
      for (const to of [1, 2, 3]) {
        if (from === to) continue;
        for (const port of [peerPort, curatorPort]) {
          await eventually(
            () => probe(from).reaches(addr(to), port),
            `host${from} reaching host${to}:${port}`,
            { timeoutMs: 10_000 },
          );
        }
      }
      await eventually(() => ownerReaches(addr(from), peerPort), `the owner reaching host${from}`, {
        timeoutMs: 10_000,
      });
    }
  }

  beforeAll(async () => {
    testbed = await Testbed.create({ hosts: 3 });
    network = await Network.create(testbed);
    for (const host of [1, 2, 3]) {
      const p = await Probe.start(testbed, host);
      probes.set(host, p);
      await p.listen(peerPort);
      await p.listen(curatorPort);
    }
  });

  afterAll(async () => {
    await Promise.all([...probes.values()].map((p) => p.stop()));
    const killed = await testbed?.destroy();
    expect(killed).toEqual([]);
  });

  afterEach(async () => {
    await network.heal();
  });

  it("isolate(1) cuts host1 off from the other hosts, established connections too; the owner still reaches it; heal() restores", async () => {
    await allConnected();
    const kept = await probe(2).open(addr(1), peerPort);
    expect(await probe(2).echoes(kept)).toBe(true);

    await network.isolate(1);
    expect(await probe(2).reaches(addr(1), peerPort)).toBe(false);
    expect(await probe(3).reaches(addr(1), curatorPort)).toBe(false);
    expect(await probe(1).reaches(addr(2), peerPort)).toBe(false);
    expect(await probe(2).echoes(kept)).toBe(false);
    // Controls: the owner reaches host1; host2 and host3 still talk.
    expect(await ownerReaches(addr(1), peerPort)).toBe(true);
    expect(await probe(2).reaches(addr(3), peerPort)).toBe(true);
    expect(network.faults()).toEqual([{ kind: "isolate", host: 1 }]);

    await network.heal();
    expect(network.faults()).toEqual([]);
    await allConnected();
  });

  it("partition([[1], [2, 3]]): no traffic across the groups, within a group as before", async () => {
    await allConnected();
    await network.partition([[1], [2, 3]]);
    for (const [from, to] of [
      [2, 1],
      [3, 1],
      [1, 2],
      [1, 3],
    ]) {
      expect([from, to, await probe(from).reaches(addr(to), peerPort)]).toEqual([from, to, false]);
    }
    expect(await probe(2).reaches(addr(3), peerPort)).toBe(true);
    expect(await probe(3).reaches(addr(2), curatorPort)).toBe(true);
    expect(await ownerReaches(addr(1), curatorPort)).toBe(true);
    await network.heal();
    await allConnected();
  });

  it("partition leaves hosts in no group alone", async () => {
    await allConnected();
    await network.partition([[1], [2]]);
    expect(await probe(1).reaches(addr(2), peerPort)).toBe(false);
    expect(await probe(3).reaches(addr(1), peerPort)).toBe(true);
    expect(await probe(3).reaches(addr(2), peerPort)).toBe(true);
  });

  it("blockPort(1, 7834) is a gray failure: only that port of host1 is dead to the other hosts", async () => {
    await allConnected();
    const kept = await probe(2).open(addr(1), peerPort);
    await network.blockPort(1, peerPort);
    expect(await probe(2).reaches(addr(1), peerPort)).toBe(false);
    expect(await probe(2).echoes(kept)).toBe(false);
    // host1 no longer reaches that port on others either (etcd dials its peers there too) …
    expect(await probe(1).reaches(addr(3), peerPort)).toBe(false);
    // … but everything else gets through.
    expect(await probe(2).reaches(addr(1), curatorPort)).toBe(true);
    expect(await probe(1).reaches(addr(3), curatorPort)).toBe(true);
    expect(await probe(2).reaches(addr(3), peerPort)).toBe(true);
    expect(await ownerReaches(addr(1), peerPort)).toBe(true);
    await network.heal();
    await allConnected();
  });

  it("loss(1, 1.0) drops everything from other hosts to host1; the owner still gets through", async () => {
    await allConnected();
    await network.loss(1, 1.0);
    expect(await probe(2).reaches(addr(1), peerPort)).toBe(false);
    expect(await probe(3).reaches(addr(1), curatorPort)).toBe(false);
    // host1's own dials get no answers back.
    expect(await probe(1).reaches(addr(2), peerPort)).toBe(false);
    expect(await ownerReaches(addr(1), peerPort)).toBe(true);
    expect(await probe(2).reaches(addr(3), peerPort)).toBe(true);
    await network.heal();
    await allConnected();
  });

  it("faults add up until heal(); history() keeps when each began and ended", async () => {
    const before = Date.now();
    await network.partition([[1], [2]]);
    await network.loss(3, 0.5);
    await network.blockPort(2, curatorPort);
    expect(network.faults()).toEqual([
      { kind: "partition", groups: [[1], [2]] },
      { kind: "loss", host: 3, probability: 0.5 },
      { kind: "blockPort", host: 2, port: curatorPort },
    ]);
    expect(await network.rules(3)).toEqual([
      `-A MTB -s ${addr(1)}/32 -m statistic --mode random --probability 0.50000000000 -j DROP`,
      `-A MTB -s ${addr(2)}/32 -m statistic --mode random --probability 0.50000000000 -j DROP`,
    ]);
    await network.heal();
    expect(network.faults()).toEqual([]);
    for (const host of [1, 2, 3]) expect(await network.rules(host)).toEqual([]);
    const history = network.history().filter((r) => r.since >= before);
    expect(history.map((r) => r.fault.kind)).toEqual(["partition", "loss", "blockPort"]);
    for (const record of history) {
      expect(record.healedAt).toBeGreaterThanOrEqual(record.since);
    }
    // Every earlier test's faults are in it too, each healed.
    expect(network.history().every((r) => r.healedAt !== undefined)).toBe(true);
  });

  it("refuses faults that make no sense", () => {
    expect(() => network.isolate(4)).toThrow(NetworkFaultError);
    expect(() => network.partition([[1, 2], [2]])).toThrow(NetworkFaultError);
    expect(() => network.loss(1, 0)).toThrow(NetworkFaultError);
    expect(() => network.loss(1, 1.5)).toThrow(NetworkFaultError);
    expect(() => network.blockPort(1, 70_000)).toThrow(NetworkFaultError);
  });

  it("writes nothing to the host namespace's iptables", async () => {
    await network.isolate(2);
    const host = spawnSync("iptables", ["-S"], { encoding: "utf8" });
    expect(host.status).toBe(0);
    expect(host.stdout).not.toContain("MTB");
    expect(host.stdout).not.toContain(testbed.subnet.replace(".0/24", "."));
  });
});

describe("describeFault", () => {
  it("says a fault in a timeline's words", () => {
    expect(describeFault({ kind: "partition", groups: [[1], [2, 3]] })).toBe(
      "partition [1] | [2,3]",
    );
    expect(describeFault({ kind: "isolate", host: 2 })).toBe("isolate host2");
    expect(describeFault({ kind: "blockPort", host: 1, port: 7834 })).toBe(
      "block tcp port 7834 of host1",
    );
    expect(describeFault({ kind: "loss", host: 3, probability: 0.07 })).toBe(
      "drop 7% of packets from other hosts to host3",
    );
  });
});
