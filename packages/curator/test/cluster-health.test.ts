import { common } from "@metropolis/proto";
import { ClockSamples } from "../src/clock-samples";
import { ConsensusViews, maxViewDatabaseBytes } from "../src/consensus-views";
import {
  healthChecks,
  maxDetailLength,
  worstVerdict,
  type HealthCheckResult,
  type HealthInputs,
  type HealthMember,
  type HealthNode,
} from "../src/cluster-health";

const id = (n: number) => `metropolis-${n.toString(16).padStart(32, "0")}`;

/** The member IDs of the healthy cluster's three members (see `member`). */
const threeMembers = [1, 2, 3].map((n) => (0xabc0 + n).toString(16));

const MiB = 1024 * 1024;
/** A healthy member's database: 20 MiB of a 2 GiB quota. */
const smallDatabase = { sizeBytes: 20 * MiB, quotaBytes: 2048 * MiB };

const node = (n: number, over: Partial<HealthNode> = {}): HealthNode => ({
  id: id(n),
  state: common.NodeState.UP,
  consensus: true,
  health: common.NodeHealth.HEALTHY,
  sinceHeartbeatMs: 1200,
  version: "0.1.0",
  clock: { offsetMs: 3, uncertaintyMs: 1 },
  consensusView: {
    memberIds: threeMembers,
    raftLeaderId: threeMembers[0],
    database: smallDatabase,
    ageMs: 800,
  },
  ...over,
});

const member = (n: number, over: Partial<HealthMember> = {}): HealthMember => ({
  nodeId: id(n),
  memberId: (0xabc0 + n).toString(16),
  voter: true,
  reachable: true,
  ...over,
});

/** A healthy three-node cluster, changed by `over`. */
const inputs = (over: Partial<HealthInputs> = {}): HealthInputs => ({
  leader: { nodeId: id(1), term: 42 },
  nodes: [node(1), node(2), node(3)],
  members: { ok: [member(1), member(2), member(3)] },
  raftLeaderId: threeMembers[0],
  alarms: { ok: [] },
  database: { ok: smallDatabase },
  heartbeatTimeoutMs: 10_000,
  ...over,
});

const byName = (checks: HealthCheckResult[]) => new Map(checks.map((c) => [c.name, c]));
const check = (over: Partial<HealthInputs>, name: string): HealthCheckResult => {
  const found = byName(healthChecks(inputs(over))).get(name);
  if (found === undefined) throw new Error(`no check ${name}`);
  return found;
};

describe("health checks", () => {
  test("a healthy cluster: every check ok, in a fixed order", () => {
    const checks = healthChecks(inputs());
    expect(checks.map((c) => [c.name, c.verdict])).toEqual([
      ["curator-leader", "ok"],
      ["nodes-up", "ok"],
      ["etcd-members", "ok"],
      ["etcd-voters", "ok"],
      ["etcd-alarms", "ok"],
      ["etcd-database-size", "ok"],
      ["clock-skew", "ok"],
      ["access-expiry", "ok"],
      ["versions", "ok"],
    ]);
    expect(worstVerdict(checks.map((c) => c.verdict))).toBe("ok");
    expect(checks[0].detail).toBe(`node ${id(1)} leads (term 42)`);
    expect(checks[1].detail).toBe("3 nodes UP and heartbeating");
    expect(checks[5].detail).toBe(
      `20.0 MiB of 2048.0 MiB (1.0 %) on node ${id(1)}'s member, the largest share of 3 members`,
    );
  });

  test("nodes-up: a silent UP node fails, naming it and its last heartbeat", () => {
    const c = check(
      {
        nodes: [
          node(1),
          node(2, { health: common.NodeHealth.HEARTBEAT_TIMEOUT, sinceHeartbeatMs: 14_600 }),
          node(3),
        ],
      },
      "nodes-up",
    );
    expect(c.verdict).toBe("fail");
    expect(c.nodeIds).toEqual([id(2)]);
    expect(c.detail).toContain(`${id(2)} (last heartbeat 15 s ago)`);
    expect(c.detail).toContain("1 of 3 UP nodes not heartbeating (timeout 10 s)");
  });

  test("nodes-up: NEW nodes and nodes a new leader has not heard from warn; DECOMMISSIONED ones do not count", () => {
    const c = check(
      {
        nodes: [
          node(1),
          node(2, { health: common.NodeHealth.UNKNOWN, sinceHeartbeatMs: undefined }),
          node(3, { state: common.NodeState.NEW, consensus: false }),
          node(4, { state: common.NodeState.DECOMMISSIONED, consensus: false }),
        ],
      },
      "nodes-up",
    );
    expect(c.verdict).toBe("warn");
    expect(c.nodeIds).toEqual([id(2), id(3)]);
    expect(c.detail).toContain(`not UP: ${id(3)} (NEW)`);
    expect(
      check({ nodes: [node(1, { state: common.NodeState.STANDBY })] }, "nodes-up").verdict,
    ).toBe("fail");
  });

  test("etcd-members: a consensus-role node without a member, a stray member, an unreachable one fail", () => {
    const missing = check({ members: { ok: [member(1), member(2)] } }, "etcd-members");
    expect(missing.verdict).toBe("fail");
    expect(missing.detail).toContain(`consensus-role nodes without a started member: ${id(3)}`);
    const stray = check(
      { members: { ok: [member(1), member(2), member(3), member(9, { nodeId: "" })] } },
      "etcd-members",
    );
    expect(stray.verdict).toBe("fail");
    expect(stray.detail).toContain("(not started)");
    const cut = check(
      { members: { ok: [member(1), member(2, { reachable: false }), member(3)] } },
      "etcd-members",
    );
    expect(cut.verdict).toBe("fail");
    expect(cut.nodeIds).toEqual([id(2)]);
    const unknown = check(
      { members: { ok: [member(1), member(2, { reachable: undefined }), member(3)] } },
      "etcd-members",
    );
    expect(unknown.verdict).toBe("warn");
    const unread = check({ members: { failed: "no answer within 3000 ms" } }, "etcd-members");
    expect(unread).toMatchObject({
      verdict: "fail",
      detail: "etcd's members could not be read: no answer within 3000 ms",
    });
  });

  test("etcd-members: each member's own view must list the leader's members and follow its raft leader", () => {
    const ids = [member(1), member(2), member(3)].map((m) => m.memberId);
    const view = (memberIds: string[], raftLeaderId: string | undefined = ids[0], ageMs = 500) => ({
      memberIds,
      raftLeaderId,
      ageMs,
    });
    const withViews = (views: (HealthNode["consensusView"] | undefined)[]) =>
      check(
        {
          raftLeaderId: ids[0],
          nodes: views.map((v, i) => node(i + 1, { consensusView: v })),
        },
        "etcd-members",
      );
    expect(withViews([view(ids), view(ids), view(ids)])).toMatchObject({
      verdict: "ok",
      detail:
        "3 members, one per consensus-role node, in raft contact with the leader's member, each listing the same members",
    });
    const behind = withViews([view(ids), view(ids.slice(0, 2)), view(ids)]);
    expect(behind).toMatchObject({ verdict: "fail", nodeIds: [id(2)] });
    expect(behind.detail).toBe(
      `${id(2)}'s member lists ${ids[0]}, ${ids[1]} where the leader's lists ${ids.join(", ")}`,
    );
    const astray = withViews([view(ids), view(ids), view(ids, ids[2])]);
    expect(astray).toMatchObject({ verdict: "fail", nodeIds: [id(3)] });
    expect(astray.detail).toContain(`follows raft leader ${ids[2]}, the leader's member ${ids[0]}`);
    // A member with no view, or only one older than the heartbeat timeout: a warning.
    expect(withViews([view(ids), undefined, view(ids, ids[0], 60_000)])).toMatchObject({
      verdict: "warn",
      nodeIds: [id(2), id(3)],
    });
  });

  test("etcd-voters: a learner fails", () => {
    const c = check(
      { members: { ok: [member(1), member(2), member(3, { voter: false })] } },
      "etcd-voters",
    );
    expect(c).toMatchObject({ verdict: "fail", nodeIds: [id(3)] });
    expect(c.detail).toBe(`1 of 3 members are learners: ${id(3)}`);
  });

  test("etcd-alarms: a raised alarm fails; alarms that could not be read fail", () => {
    const c = check(
      { alarms: { ok: [{ memberId: "abc2", nodeId: id(2), alarm: "NOSPACE" }] } },
      "etcd-alarms",
    );
    expect(c.verdict).toBe("fail");
    expect(c.detail).toContain(`NOSPACE of member abc2 (${id(2)})`);
    expect(check({ alarms: { failed: "unavailable" } }, "etcd-alarms").verdict).toBe("fail");
  });

  test("etcd-database-size: warn from 80 % of the quota, fail from 95 %", () => {
    const at = (share: number) =>
      check(
        { database: { ok: { sizeBytes: share * 1000, quotaBytes: 1000 } } },
        "etcd-database-size",
      ).verdict;
    expect(at(0.79)).toBe("ok");
    expect(at(0.8)).toBe("warn");
    expect(at(0.95)).toBe("fail");
    expect(at(1.2)).toBe("fail");
    expect(
      check(
        { database: { ok: { sizeBytes: 1946 * MiB, quotaBytes: 2048 * MiB } } },
        "etcd-database-size",
      ),
    ).toMatchObject({
      verdict: "fail",
      nodeIds: [id(1)],
      detail: `1946.0 MiB of 2048.0 MiB (95.0 %) on node ${id(1)}'s member: defragment or compact (metroctl cluster defrag); the other 2 members below 80.0 %`,
    });
  });

  test("etcd-database-size: every member's own reading counts, the largest share judged, each member over it named", () => {
    /** Node n's view, carrying `database`, heard `ageMs` ago. */
    const viewed = (
      n: number,
      database: { sizeBytes: number; quotaBytes: number } | undefined,
      ageMs = 800,
    ) =>
      node(n, {
        consensusView: {
          memberIds: threeMembers,
          raftLeaderId: threeMembers[0],
          ...(database === undefined ? {} : { database }),
          ageMs,
        },
      });
    const of = (sizeMiB: number, quotaMiB = 2048) => ({
      sizeBytes: sizeMiB * MiB,
      quotaBytes: quotaMiB * MiB,
    });
    // The leader's member is small; node 3's is near its (smaller) quota.
    const warned = check(
      { nodes: [node(1), viewed(2, of(100)), viewed(3, of(850, 1024))] },
      "etcd-database-size",
    );
    expect(warned).toMatchObject({
      verdict: "warn",
      nodeIds: [id(3)],
      detail: `850.0 MiB of 1024.0 MiB (83.0 %) on node ${id(3)}'s member; the other 2 members below 80.0 %`,
    });
    // Two members over: the worst first, the advice saying whose member defrag reaches.
    const failed = check(
      { nodes: [node(1), viewed(2, of(1700)), viewed(3, of(2000))] },
      "etcd-database-size",
    );
    expect(failed).toMatchObject({ verdict: "fail", nodeIds: [id(3), id(2)] });
    expect(failed.detail).toBe(
      `2000.0 MiB of 2048.0 MiB (97.7 %) on node ${id(3)}'s member, 1700.0 MiB of 2048.0 MiB (83.0 %) on node ${id(2)}'s member: defragment or compact (metroctl cluster defrag --node ID, one member at a time); the other 1 members below 80.0 %`,
    );
    // A member's node whose view is stale, carries no size, or that sent none: named, a warning.
    const unread = check(
      {
        nodes: [node(1), viewed(2, of(100), 60_000), viewed(3, undefined), node(4)],
        members: { ok: [member(1), member(2), member(3), member(4)] },
      },
      "etcd-database-size",
    );
    expect(unread).toMatchObject({ verdict: "warn", nodeIds: [id(2), id(3)] });
    expect(unread.detail).toBe(
      `20.0 MiB of 2048.0 MiB (1.0 %) on node ${id(1)}'s member, the largest share of 2 members; no recent reading from ${id(2)}, ${id(3)}'s member (its heartbeats carry none)`,
    );
    // A stale view does not hide a member over the share: it is judged only on a recent one.
    expect(
      check({ nodes: [node(1), viewed(2, of(2040), 60_000), node(3)] }, "etcd-database-size"),
    ).toMatchObject({ verdict: "warn", nodeIds: [id(2)] });
    // A member not started yet has no node to read; a node without a member is not asked.
    expect(
      check(
        {
          nodes: [
            node(1),
            node(2),
            node(3),
            node(5, { consensus: false, consensusView: undefined }),
          ],
          members: { ok: [member(1), member(2), member(3), member(9, { nodeId: "" })] },
        },
        "etcd-database-size",
      ).verdict,
    ).toBe("ok");
    // etcd's members unread: the consensus-role nodes are the members accounted for.
    expect(
      check(
        {
          members: { failed: "unavailable" },
          nodes: [node(1), viewed(2, undefined), node(3), node(4, { consensus: false })],
        },
        "etcd-database-size",
      ),
    ).toMatchObject({ verdict: "warn", nodeIds: [id(2)] });
  });

  test("etcd-database-size: the leader's own reading failing fails, with what the other members said", () => {
    const c = check(
      {
        database: { failed: "no answer within 3000 ms" },
        nodes: [
          node(1),
          node(2),
          node(3, {
            consensusView: {
              memberIds: threeMembers,
              raftLeaderId: threeMembers[0],
              database: { sizeBytes: 1700 * MiB, quotaBytes: 2048 * MiB },
              ageMs: 800,
            },
          }),
        ],
      },
      "etcd-database-size",
    );
    expect(c).toMatchObject({ verdict: "fail", nodeIds: [id(1), id(3)] });
    expect(c.detail).toBe(
      `the database size could not be read on node ${id(1)}'s member: no answer within 3000 ms; 1700.0 MiB of 2048.0 MiB (83.0 %) on node ${id(3)}'s member; the other 1 members below 80.0 %`,
    );
  });

  test("clock-skew: beyond 1 s give or take the sample's uncertainty fails; a node without a sample warns", () => {
    const off = check(
      { nodes: [node(1), node(2, { clock: { offsetMs: -1600, uncertaintyMs: 4 } }), node(3)] },
      "clock-skew",
    );
    expect(off).toMatchObject({ verdict: "fail", nodeIds: [id(2)] });
    expect(off.detail).toBe(`1 nodes off: ${id(2)} -1.600 s`);
    // 1.05 s off, but the round trip leaves 0.1 s of doubt: not proven off.
    expect(
      check(
        { nodes: [node(1), node(2, { clock: { offsetMs: 1050, uncertaintyMs: 100 } })] },
        "clock-skew",
      ).verdict,
    ).toBe("ok");
    expect(check({ nodes: [node(1), node(2, { clock: undefined })] }, "clock-skew").verdict).toBe(
      "warn",
    );
  });

  test("access-expiry: active credentials expiring within 7 days are listed, soonest first; revoked and expired ones are not", () => {
    const now = new Date("2026-12-02T00:00:00Z");
    const at = (days: number) => new Date(now.getTime() + days * 24 * 3600 * 1000);
    const credential = (name: string, days: number, revoked = false) => ({
      name,
      role: "reader",
      serial: `5e${name.length}`,
      notAfter: at(days),
      revoked,
    });
    const c = check(
      {
        now,
        credentials: {
          ok: [
            credential("alice", 30),
            credential("bob", 6.5),
            credential("carol", 0.25),
            credential("dave", 2, true),
            credential("erin", -1),
          ],
        },
      },
      "access-expiry",
    );
    expect(c.verdict).toBe("warn");
    expect(c.detail).toBe(
      "2 of 3 active credentials expire within 7 days: carol (reader, serial 5e5) in 6 h, bob (reader, serial 5e3) in 6 d 12 h",
    );
    expect(
      check({ now, credentials: { ok: [credential("alice", 30)] } }, "access-expiry"),
    ).toMatchObject({ verdict: "ok", detail: "1 active credentials, none expiring within 7 days" });
    expect(check({ now }, "access-expiry").detail).toBe("no active access credentials");
    expect(check({ credentials: { failed: "etcd down" } }, "access-expiry").verdict).toBe("warn");
  });

  test("versions: mixed versions warn, naming the nodes off the common one", () => {
    const c = check({ nodes: [node(1), node(2), node(3, { version: "0.2.0" })] }, "versions");
    expect(c).toMatchObject({ verdict: "warn", nodeIds: [id(3)] });
    expect(c.detail).toBe("2 versions: 0.1.0 on 2, 0.2.0 on 1");
    expect(check({ nodes: [node(1), node(2, { version: undefined })] }, "versions").verdict).toBe(
      "warn",
    );
  });

  test("details and node lists stay bounded with thousands of failing nodes", () => {
    const nodes = Array.from({ length: 3000 }, (_, i) =>
      node(i + 1, { health: common.NodeHealth.HEARTBEAT_TIMEOUT, consensus: false }),
    );
    for (const c of healthChecks(inputs({ nodes }))) {
      expect(c.detail.length).toBeLessThanOrEqual(maxDetailLength);
      expect(c.nodeIds.length).toBeLessThanOrEqual(1000);
    }
    expect(check({ nodes }, "nodes-up").detail).toContain("and 2995 more");
  });

  test("worstVerdict", () => {
    expect(worstVerdict([])).toBe("ok");
    expect(worstVerdict(["ok", "warn"])).toBe("warn");
    expect(worstVerdict(["warn", "fail", "ok"])).toBe("fail");
  });
});

describe("consensus views", () => {
  test("keeps a well-formed view, sorted, aged on the monotonic clock; drops malformed or huge ones", () => {
    let mono = 10;
    const views = new ConsensusViews(() => mono);
    views.record("a", { memberIds: ["c", "a", "b", "a"], raftLeaderId: "b", raftTerm: 4 });
    expect(views.view("a")).toEqual({
      memberIds: ["a", "b", "c"],
      raftLeaderId: "b",
      raftTerm: 4,
      receivedAt: 10,
    });
    views.record("b", { memberIds: ["a"], raftLeaderId: "", raftTerm: 1 });
    expect(views.view("b")?.raftLeaderId).toBeUndefined();
    views.record("c", { memberIds: ["not hex"], raftLeaderId: "", raftTerm: 1 });
    views.record("d", {
      memberIds: Array.from({ length: 65 }, (_, i) => i.toString(16)),
      raftLeaderId: "",
      raftTerm: 1,
    });
    views.record("e", { memberIds: ["a"], raftLeaderId: "x".repeat(17), raftTerm: 1 });
    views.record("f", undefined);
    for (const n of ["c", "d", "e", "f"]) expect(views.view(n)).toBeUndefined();
    mono += 250;
    const a = views.view("a");
    expect(a && views.age(a)).toBe(250);
    views.forget("a");
    expect(views.view("a")).toBeUndefined();
  });

  test("keeps a believable database size and quota; drops an unbelievable one alone, the view kept", () => {
    const views = new ConsensusViews(() => 0);
    const base = { memberIds: ["a"], raftLeaderId: "a", raftTerm: 2 };
    views.record("a", { ...base, databaseSizeBytes: 20 * MiB, databaseQuotaBytes: 2048 * MiB });
    expect(views.view("a")?.database).toEqual(smallDatabase);
    // Over its quota is what the check is for: kept.
    views.record("b", { ...base, databaseSizeBytes: 3000, databaseQuotaBytes: 1000 });
    expect(views.view("b")?.database).toEqual({ sizeBytes: 3000, quotaBytes: 1000 });
    views.record("c", { ...base, databaseSizeBytes: maxViewDatabaseBytes, databaseQuotaBytes: 1 });
    expect(views.view("c")?.database).toEqual({ sizeBytes: maxViewDatabaseBytes, quotaBytes: 1 });
    const unbelievable: [number | undefined, number | undefined][] = [
      [undefined, undefined],
      [10, undefined],
      [undefined, 10],
      [-1, 1000],
      [10, -1000],
      [10, 0],
      [Number.NaN, 1000],
      [10, Number.POSITIVE_INFINITY],
      [1.5, 1000],
      [maxViewDatabaseBytes + 1, 1000],
      [10, Number.MAX_SAFE_INTEGER],
    ];
    for (const [databaseSizeBytes, databaseQuotaBytes] of unbelievable) {
      views.record("d", { ...base, databaseSizeBytes, databaseQuotaBytes });
      expect(views.view("d")).toEqual({
        memberIds: ["a"],
        raftLeaderId: "a",
        raftTerm: 2,
        database: undefined,
        receivedAt: 0,
      });
    }
  });
});

describe("clock samples", () => {
  test("the node's clock at receipt is its send time plus half the previous round trip", () => {
    let wall = 1_000_000;
    let mono = 50;
    const samples = new ClockSamples(
      () => wall,
      () => mono,
    );
    // Sent at 998_000 by the node, 100 ms round trips: the node is 1.95 s behind.
    samples.record("a", new Date(998_000), 100);
    expect(samples.sample("a")).toEqual({ offsetMs: -1950, uncertaintyMs: 50, receivedAt: 50 });
    // A first heartbeat: no round trip known, no uncertainty claimed.
    samples.record("b", new Date(1_000_400), 0);
    expect(samples.sample("b")).toMatchObject({ offsetMs: 400, uncertaintyMs: undefined });
    // A heartbeat without a time (an older node) records nothing; nor does a round trip beyond reason correct anything.
    samples.record("c", undefined, 10);
    expect(samples.sample("c")).toBeUndefined();
    samples.record("d", new Date(1_000_000), 2 ** 32 - 1);
    expect(samples.sample("d")).toMatchObject({ offsetMs: 0, uncertaintyMs: undefined });
    mono += 700;
    wall -= 60_000; // a wall clock jump changes a sample's age not at all
    const a = samples.sample("a");
    expect(a && samples.age(a)).toBe(700);
    samples.forget("a");
    expect(samples.sample("a")).toBeUndefined();
  });
});
