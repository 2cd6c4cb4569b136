/**
 * The two-serving-leaders check on crafted observations: each rule flags
 * exactly the orders that prove two leaderships acting at once, and never
 * what a correct cluster can produce — overlapping calls of two leaders, a
 * failover seen from either side, an old leader's answer that was invoked
 * before the new leader served, a follower's view.
 */
import { checkLeaders, servesInHistory } from "../src/leader-check";
import type { LeaderObservation } from "../src/history";
import { HistoryBuilder } from "./histories";

function serve(
  curator: string,
  term: number | undefined,
  invokedAt: number,
  completedAt: number,
): LeaderObservation {
  return {
    kind: "serve",
    curator,
    ...(term === undefined ? {} : { term }),
    call: term === undefined ? "GetNodes" : "GetClusterConsensus",
    invokedAt,
    completedAt,
  };
}

function claim(curator: string, invokedAt: number, completedAt: number): LeaderObservation {
  return { kind: "claim", curator, call: "GetCurrentLeader", invokedAt, completedAt };
}

describe("checkLeaders passes", () => {
  it("a failover: the old term's last serve before the new term's first", () => {
    const result = checkLeaders([
      serve("node1", 10, 0, 5),
      serve("node1", 10, 100, 110),
      claim("node1", 105, 108),
      serve("node2", 20, 200, 210),
      serve("node2", 20, 300, 310),
      claim("node2", 305, 306),
    ]);
    expect(result.anomalies).toEqual([]);
    expect(result.moments).toEqual([]);
    expect(result.terms).toEqual([
      { curator: "node1", term: 10, first: 5, last: 100 },
      { curator: "node2", term: 20, first: 210, last: 300 },
    ]);
  });

  it("an old leader's answer that overlaps the new leader's first serve", () => {
    // node1's call [150, 260] may have been served at 150, before node2's at 205.
    const result = checkLeaders([
      serve("node1", 10, 100, 110),
      serve("node1", 10, 150, 260),
      serve("node2", 20, 200, 210),
      serve("node2", 20, 300, 310),
    ]);
    expect(result.anomalies).toEqual([]);
  });

  it("a call of another curator overlapping the new leader's serves on one side", () => {
    const result = checkLeaders([
      serve("node2", 20, 200, 210),
      serve("node1", undefined, 205, 320),
      serve("node2", 20, 300, 310),
      claim("node3", 190, 400),
    ]);
    expect(result.anomalies).toEqual([]);
  });

  it("the same leader re-elected with a higher term", () => {
    const result = checkLeaders([
      serve("node1", 10, 0, 5),
      serve("node1", 30, 100, 110),
      claim("node1", 50, 60),
    ]);
    expect(result.anomalies).toEqual([]);
  });
});

describe("checkLeaders flags", () => {
  it("an older term serving after a newer term's serve returned (rule 1)", () => {
    const old = serve("node1", 10, 250, 260);
    const newer = serve("node2", 20, 200, 210);
    const result = checkLeaders([serve("node1", 10, 100, 110), newer, old]);
    expect(result.anomalies).toEqual([
      expect.objectContaining({
        kind: "two-serving-leaders",
        rule: "older-term-after-newer",
        from: 250,
        to: 260,
        observations: [old, newer],
        count: 1,
      }),
    ]);
    expect(result.moments).toEqual([{ from: 250, to: 260 }]);
  });

  it("a termless serve or a claim between two serves of another curator's term (rule 2)", () => {
    const read = serve("node1", undefined, 220, 230);
    const selfClaim = claim("node1", 240, 245);
    const result = checkLeaders([
      serve("node2", 20, 200, 210),
      read,
      selfClaim,
      serve("node2", 20, 250, 260),
    ]);
    expect(result.anomalies).toEqual([
      expect.objectContaining({
        rule: "between-serves-of-another",
        from: 220,
        to: 230,
        count: 2,
      }),
    ]);
    expect(result.anomalies[0].observations[0]).toBe(read);
    // Windows less than a second apart are one moment.
    expect(result.moments).toEqual([{ from: 220, to: 245 }]);
  });

  it("a newer term between two serves of an older one, once: the older one served too late", () => {
    const result = checkLeaders([
      serve("node1", 10, 100, 110),
      serve("node2", 20, 120, 130),
      serve("node1", 10, 140, 150),
      serve("node1", 10, 160, 170),
    ]);
    expect(result.anomalies).toEqual([
      expect.objectContaining({ rule: "older-term-after-newer", from: 140, count: 2 }),
    ]);
    expect(result.moments).toEqual([{ from: 140, to: 170 }]);
  });

  it("moments more than a second apart as separate moments", () => {
    const result = checkLeaders([
      serve("node2", 20, 0, 10),
      serve("node1", undefined, 100, 110),
      serve("node1", undefined, 1200, 1210),
      serve("node2", 20, 5000, 5010),
    ]);
    expect(result.anomalies).toEqual([expect.objectContaining({ count: 2 })]);
    expect(result.moments).toEqual([
      { from: 100, to: 110 },
      { from: 1200, to: 1210 },
    ]);
  });
});

describe("servesInHistory", () => {
  it("takes acknowledged calls with the curator that served them, nothing else", () => {
    const h = new HistoryBuilder();
    const w = h.write("c1", "n/a", "x", 0, 10);
    const r = h.read("r1", { "n/a": "x" }, 20, 30);
    h.write("c1", "n/a", "y", 40, 50, "unknown");
    const ops = h.ops.map((op) =>
      op === w || op === r ? { ...op, servedBy: "node2" } : { ...op, servedBy: "node1" },
    );
    expect(servesInHistory(ops)).toEqual([
      { ...serve("node2", undefined, 0, 10), call: "UpdateNodeLabels" },
      serve("node2", undefined, 20, 30),
    ]);
  });
});
