/**
 * The history checker on crafted histories: every kind of anomaly is flagged
 * with the operations that prove it, and the histories a correct cluster can
 * produce (concurrent writes seen in either order, unknown writes seen late
 * or never) pass.
 */
import { checkHistory, type CheckReport } from "../src/checker";
import { finalRead, HistoryBuilder } from "./histories";

const reg = "node1/colour";

function kinds(report: CheckReport): string[] {
  return [...new Set(report.anomalies.map((a) => a.kind))].sort();
}

describe("checkHistory flags", () => {
  it("an acknowledged write missing from the final read", () => {
    const h = new HistoryBuilder();
    const a = h.write("w1", reg, "a", 0, 10);
    const report = checkHistory(h.ops, finalRead(100, { [reg]: null }));
    expect(report.valid).toBe(false);
    expect(report.anomalies).toEqual([
      expect.objectContaining({ kind: "lost-write", register: reg, operations: [a.id] }),
    ]);
  });

  it("a newer acknowledged write lost to an older one", () => {
    const h = new HistoryBuilder();
    h.write("w1", reg, "a", 0, 10);
    const b = h.write("w1", reg, "b", 20, 30);
    const report = checkHistory(h.ops, finalRead(100, { [reg]: "a" }));
    expect(report.anomalies).toEqual([
      expect.objectContaining({ kind: "lost-write", operations: [b.id] }),
    ]);
  });

  it("an acknowledged write replaced by an older value, other writes notwithstanding", () => {
    const h = new HistoryBuilder();
    const a = h.write("w1", reg, "a", 0, 10);
    const b = h.write("w1", reg, "b", 20, 30);
    h.write("w2", reg, "c", 40, 50, "unknown");
    const report = checkHistory(h.ops, finalRead(100, { [reg]: "a" }));
    expect(report.anomalies).toEqual([
      expect.objectContaining({ kind: "lost-write", operations: [a.id, b.id] }),
    ]);
    const absent = checkHistory(h.ops, finalRead(100, { [reg]: null }));
    expect(absent.anomalies).toEqual([
      expect.objectContaining({ kind: "lost-write", operations: [a.id] }),
      expect.objectContaining({ kind: "lost-write", operations: [b.id] }),
    ]);
  });

  it("a definitely failed write that a read saw", () => {
    const h = new HistoryBuilder();
    h.write("w1", reg, "a", 0, 10);
    const b = h.write("w1", reg, "b", 20, 30, "failed");
    const read = h.read("r1", { [reg]: "b" }, 40, 50);
    const report = checkHistory(h.ops, finalRead(100, { [reg]: "a" }));
    expect(report.anomalies).toContainEqual(
      expect.objectContaining({ kind: "failed-write-visible", operations: [b.id, read.id] }),
    );
    expect(kinds(report)).toEqual(["failed-write-visible", "not-linearizable"]);
  });

  it("a failed write in the final read", () => {
    const h = new HistoryBuilder();
    const b = h.write("w1", reg, "b", 20, 30, "failed");
    const report = checkHistory(h.ops, finalRead(100, { [reg]: "b" }));
    expect(report.anomalies).toEqual([
      expect.objectContaining({ kind: "failed-write-visible", operations: [b.id] }),
    ]);
  });

  it("a read of a value no write produced", () => {
    const h = new HistoryBuilder();
    h.write("w1", reg, "a", 0, 10);
    const read = h.read("r1", { [reg]: "zzz" }, 40, 50);
    const report = checkHistory(h.ops, finalRead(100, { [reg]: "a" }));
    expect(report.anomalies).toContainEqual(
      expect.objectContaining({ kind: "unknown-value", operations: [read.id] }),
    );
    expect(report.anomalies).toContainEqual(
      expect.objectContaining({ kind: "not-linearizable", operations: [read.id] }),
    );
  });

  it("a stale read by one reader, across its Watch and its GetNodes", () => {
    const h = new HistoryBuilder();
    const a = h.write("w1", reg, "a", 0, 10);
    // b's write overlaps both reads: only the reader's own view proves the second one stale.
    const b = h.write("w1", reg, "b", 20, 60, "unknown");
    const sawB = h.read("r1", { [reg]: "b" }, 40, 40, "watch");
    const sawA = h.read("r1", { [reg]: "a" }, 50, 51, "get-nodes");
    const report = checkHistory(h.ops, finalRead(100, { [reg]: "b" }));
    expect(report.anomalies).toContainEqual(
      expect.objectContaining({
        kind: "stale-read",
        operations: [a.id, b.id, sawB.id, sawA.id],
      }),
    );
    expect(kinds(report)).toEqual(["not-linearizable", "stale-read"]);
  });

  it("a reader seeing a label absent again after seeing it set", () => {
    const h = new HistoryBuilder();
    h.write("w1", reg, "a", 0, 10);
    const sawA = h.read("r1", { [reg]: "a" }, 5, 8);
    const absent = h.read("r1", { [reg]: null }, 9, 9.5);
    const report = checkHistory(h.ops, finalRead(100, { [reg]: "a" }));
    expect(report.anomalies).toContainEqual(
      expect.objectContaining({ kind: "stale-read", operations: [sawA.id, absent.id] }),
    );
  });

  it("a read of an old value after a newer write completed (stale, not linearizable)", () => {
    const h = new HistoryBuilder();
    h.write("w1", reg, "a", 0, 10);
    h.write("w2", reg, "b", 20, 30);
    h.read("r1", { [reg]: "a" }, 40, 50);
    // Noise the counterexample must not include.
    h.read("r2", { [reg]: "b" }, 31, 32);
    h.read("r3", { [reg]: null }, -5, 1);
    const report = checkHistory(h.ops, finalRead(100, { [reg]: "b" }));
    expect(report.anomalies).toEqual([
      expect.objectContaining({ kind: "not-linearizable", operations: [0, 1, 2] }),
      expect.objectContaining({ kind: "stale-read", operations: [0, 1, 2] }),
    ]);
    expect(report.registers).toEqual([
      expect.objectContaining({ register: reg, verdict: "anomaly", operations: 5 }),
    ]);
  });

  it("a read served by a cut-off old leader: older than a write acknowledged before it began", () => {
    const h = new HistoryBuilder();
    h.write("w1", reg, "a", 0, 10);
    const b = h.write("w1", reg, "b", 20, 30);
    // A probe's first read of the old leader: no earlier read of its own to compare with.
    const old = { ...h.read("probe-node1", { [reg]: "a" }, 40, 41), servedBy: "node1" };
    const absent = { ...h.read("probe-node2", { [reg]: null }, 42, 43), servedBy: "node2" };
    h.ops[old.id] = old;
    h.ops[absent.id] = absent;
    const report = checkHistory(h.ops, finalRead(100, { [reg]: "b" }));
    const stale = report.anomalies.filter((a) => a.kind === "stale-read");
    expect(stale).toEqual([
      expect.objectContaining({ operations: [0, b.id, old.id] }),
      expect.objectContaining({ operations: [b.id, absent.id] }),
    ]);
    expect(stale[0].message).toContain("client probe-node1 (served by node1): read #2");
    expect(stale[1].message).toContain("saw the initial value (absent)");
  });

  it("two readers seeing a concurrent write in opposite orders (not linearizable)", () => {
    const h = new HistoryBuilder();
    h.write("w1", reg, "a", 0, 10);
    h.write("w2", reg, "b", 20, 60);
    h.read("r1", { [reg]: "b" }, 30, 35);
    h.read("r2", { [reg]: "a" }, 40, 45);
    const report = checkHistory(h.ops, finalRead(100, { [reg]: "b" }));
    // Each reader alone is monotonic: only linearizability catches it.
    expect(kinds(report)).toEqual(["not-linearizable"]);
    expect(report.anomalies[0].operations).toEqual([0, 1, 2, 3]);
  });

  it("an unknown write seen, then the value it replaced", () => {
    const h = new HistoryBuilder();
    h.write("w1", reg, "a", 0, 10);
    h.write("w2", reg, "b", 20, 30, "unknown");
    h.read("r1", { [reg]: "b" }, 40, 41);
    h.read("r2", { [reg]: "a" }, 50, 51);
    const report = checkHistory(h.ops, finalRead(100, { [reg]: "b" }));
    expect(kinds(report)).toEqual(["not-linearizable"]);
  });

  it("a budget too small to decide as unknown, never as valid", () => {
    const h = new HistoryBuilder();
    h.write("w1", reg, "a", 0, 10);
    h.write("w2", reg, "b", 5, 30);
    h.read("r1", { [reg]: "b" }, 40, 41);
    const report = checkHistory(h.ops, finalRead(100, { [reg]: "b" }), { maxSteps: 2 });
    expect(report.valid).toBe("unknown");
    expect(report.registers[0]).toEqual(
      expect.objectContaining({ verdict: "budget-exceeded", steps: 2 }),
    );
  });
});

describe("checkHistory passes", () => {
  it.each(["a", "b"])("concurrent writes with %s observed last", (last) => {
    const h = new HistoryBuilder();
    h.write("w1", reg, "a", 0, 30);
    h.write("w2", reg, "b", 10, 40);
    h.read("r1", { [reg]: last }, 50, 51);
    const report = checkHistory(h.ops, finalRead(100, { [reg]: last }));
    expect(report).toEqual(expect.objectContaining({ valid: true, anomalies: [] }));
  });

  it("concurrent writes whose readers saw them in the order of the writes", () => {
    const h = new HistoryBuilder();
    h.write("w1", reg, "a", 0, 30);
    h.write("w2", reg, "b", 10, 40);
    h.read("r1", { [reg]: "b" }, 15, 16);
    h.read("r2", { [reg]: "a" }, 20, 50);
    h.read("r1", { [reg]: "a" }, 45, 46);
    expect(checkHistory(h.ops, finalRead(100, { [reg]: "a" })).valid).toBe(true);
  });

  it("an unknown write never seen", () => {
    const h = new HistoryBuilder();
    h.write("w1", reg, "a", 0, 10);
    h.write("w2", reg, "b", 20, 30, "unknown");
    h.read("r1", { [reg]: "a" }, 40, 41);
    const report = checkHistory(h.ops, finalRead(100, { [reg]: "a" }));
    expect(report.valid).toBe(true);
  });

  it("an unknown write seen late: only it explains the read", () => {
    const h = new HistoryBuilder();
    h.write("w1", reg, "a", 0, 10);
    h.write("w2", reg, "b", 20, 30, "unknown");
    h.read("r1", { [reg]: "a" }, 40, 41);
    h.read("r1", { [reg]: "b" }, 500, 501);
    const report = checkHistory(h.ops, finalRead(1000, { [reg]: "b" }));
    expect(report.valid).toBe(true);
    expect(report.registers).toEqual([expect.objectContaining({ verdict: "ok", operations: 4 })]);
  });

  it("a register with an initial value", () => {
    const h = new HistoryBuilder();
    h.read("r1", { [reg]: "seed" }, 0, 1);
    h.write("w1", reg, "a", 2, 10);
    h.read("r1", { [reg]: "a" }, 11, 12);
    const final = finalRead(100, { [reg]: "a" });
    expect(checkHistory(h.ops, final, { initialValues: new Map([[reg, "seed"]]) }).valid).toBe(
      true,
    );
    expect(checkHistory(h.ops, final).valid).toBe(false);
  });

  it("counts operations by type and outcome, other operations included", () => {
    const h = new HistoryBuilder();
    h.write("w1", reg, "a", 0, 10);
    h.write("w1", reg, "b", 11, 20, "failed");
    h.write("w1", reg, "c", 21, 30, "unknown");
    h.read("r1", { [reg]: "a" }, 31, 32);
    h.ops.push({
      id: h.ops.length,
      client: "admin",
      type: "other",
      what: "set-roles",
      invokedAt: 1,
      completedAt: 2,
      outcome: "ok",
    });
    const report = checkHistory(h.ops, finalRead(100, { [reg]: "a" }));
    expect(report.counts).toEqual({
      write: { ok: 1, failed: 1, unknown: 1 },
      read: { ok: 1, failed: 0, unknown: 0 },
      other: { ok: 1, failed: 0, unknown: 0 },
    });
    expect(report.valid).toBe(true);
  });
});
