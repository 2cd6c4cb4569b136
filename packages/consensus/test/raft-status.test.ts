/**
 * `raftStatus()` of the running consensus on a real 3-member etcd: every
 * member names the same raft leader, the one whose own etcd says it leads
 * (its `etcd_server_is_leader` gauge); every member is connected to the other
 * two, and a stopped member drops out of the others' connections. The
 * parsing of etcd's metrics and IDs on their own.
 */
import { request } from "node:http";
import { RaftStatusError } from "@metropolis/consensus";
import { TestMembers, type TestMember } from "@metropolis/consensus/testing";
import { eventually } from "@metropolis/supervisor/testing";
import { activePeers, hexMemberId } from "../src/raft-status";

const fixture = new TestMembers();
afterEach(() => fixture.cleanup());

/** A gauge of the member's own /metrics (etcd's word, read without raft-status.ts). */
function gauge(member: TestMember, name: string): Promise<number> {
  return new Promise((resolve, reject) => {
    request({ socketPath: member.status.clientSocket, path: "/metrics", agent: false }, (res) => {
      let text = "";
      res.setEncoding("utf8");
      res.on("data", (chunk: string) => (text += chunk));
      res.on("end", () => {
        const line = text.split("\n").find((l) => l.startsWith(`${name} `));
        if (line === undefined) reject(new Error(`no ${name} in /metrics`));
        else resolve(Number(line.split(" ")[1]));
      });
    })
      .on("error", reject)
      .end();
  });
}

describe("raftStatus on a 3-member etcd", () => {
  it("names one raft leader, the one etcd says leads; members see each other connected", async () => {
    const [a, b, c] = [
      await fixture.node("ra"),
      await fixture.node("rb"),
      await fixture.node("rc"),
    ];
    const first = await fixture.run(a, { bootstrap: true });
    const running = [first, await fixture.join(first, b), await fixture.join(first, c)];
    const ids = new Map(
      (await first.status.members()).map((m): [string, string] => [m.name, hexMemberId(m.ID)]),
    );
    const idOf = (i: number): string => {
      const id = ids.get([a, b, c][i].nodeId);
      if (id === undefined) throw new Error(`member ${i} is not listed`);
      return id;
    };

    // Every member connected to the other two (streams come up shortly after a join).
    await eventually(async () => {
      const statuses = await Promise.all(running.map((m) => m.status.raftStatus()));
      return statuses.every((s, i) => {
        const others = [0, 1, 2].filter((j) => j !== i).map(idOf);
        return s.connectedPeers?.size === 2 && others.every((o) => s.connectedPeers?.has(o));
      });
    }, "every member connected to both others");

    const statuses = await Promise.all(running.map((m) => m.status.raftStatus()));
    const isLeader = await Promise.all(running.map((m) => gauge(m, "etcd_server_is_leader")));
    expect(isLeader.filter((x) => x === 1)).toHaveLength(1);
    const etcdLeader = idOf(isLeader.indexOf(1));
    statuses.forEach((s, i) => {
      expect(s.memberId).toBe(idOf(i));
      expect(s.isLearner).toBe(false);
      // A member is never connected to itself.
      expect(s.connectedPeers?.has(s.memberId)).toBe(false);
    });
    // Every member names the same leader, in the same term: the one etcd says leads.
    expect(new Set(statuses.map((s) => s.leaderId))).toEqual(new Set([etcdLeader]));
    expect(new Set(statuses.map((s) => s.raftTerm)).size).toBe(1);
    expect(statuses[0].raftTerm).toBeGreaterThanOrEqual(2);

    // c stops: the others lose their connection to it, and still name a leader.
    await fixture.stop(running[2]);
    await eventually(async () => {
      const s = await first.status.raftStatus();
      return s.connectedPeers !== undefined && !s.connectedPeers.has(idOf(2));
    }, "c no longer connected to a");
    const after = await first.status.raftStatus();
    expect(after.connectedPeers).toEqual(new Set([idOf(1)]));
    expect([idOf(0), idOf(1)]).toContain(after.leaderId);
  });

  it("fails typed when etcd does not answer in time", async () => {
    const node = await fixture.node("slow");
    const member = await fixture.run(node, { bootstrap: true });
    // 0 ms: the deadline has passed before the call is made.
    await expect(member.status.raftStatus(0)).rejects.toBeInstanceOf(RaftStatusError);
  });
});

describe("parsing", () => {
  it("reads active peers of the local member only, those with a positive gauge", () => {
    const metrics = [
      "# HELP etcd_network_active_peers The current number of active peer connections.",
      "# TYPE etcd_network_active_peers gauge",
      'etcd_network_active_peers{Local="a1",Remote="b2"} 1',
      'etcd_network_active_peers{Local="a1",Remote="c3"} 0',
      'etcd_network_active_peers{Local="ff",Remote="d4"} 1',
      'etcd_network_disconnected_peers_total{Local="a1",Remote="c3"} 1',
      'etcd_network_active_peers{Remote="e5",Local="a1"} 2',
    ].join("\n");
    expect(activePeers(metrics, "a1")).toEqual(new Set(["b2", "e5"]));
    expect(activePeers("", "a1")).toEqual(new Set());
  });

  it("turns etcd3's decimal member IDs into etcdctl's hex", () => {
    // 2^64 - 1, beyond a JavaScript number's exact range.
    expect(hexMemberId("18446744073709551615")).toBe("ffffffffffffffff");
    expect(hexMemberId("3319814642761637952")).toBe("2e1259d415f2a040");
    expect(() => hexMemberId("0x12")).toThrow(RaftStatusError);
    expect(() => hexMemberId("")).toThrow(RaftStatusError);
  });
});
