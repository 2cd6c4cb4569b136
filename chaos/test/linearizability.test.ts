/**
 * The linearizability search against a brute force over every order of small
 * random register histories (ties in time, unknown writes, reads of values
 * never written): the verdicts agree, and a reported counterexample is itself
 * not linearizable. Then the budget: a search cut short says so.
 */
import fc from "fast-check";
import { checkLinearizable, type RegisterOperation } from "../src/linearizability";

/** Whether some order of `ops` respects real time and the register (unknown writes may be left out). */
function bruteForce(ops: readonly RegisterOperation[], initialValue: string | null): boolean {
  const go = (left: readonly RegisterOperation[], value: string | null): boolean => {
    if (left.every((op) => op.kind === "write" && op.completedAt === Infinity)) return true;
    return left.some((op) => {
      // `op` can go next only if nothing left completed before it was invoked.
      if (left.some((other) => other.completedAt < op.invokedAt)) return false;
      const rest = left.filter((other) => other !== op);
      if (op.kind === "read") return op.value === value && go(rest, value);
      return go(rest, op.value) || (op.completedAt === Infinity && go(rest, value));
    });
  };
  return go(ops, initialValue);
}

const history: fc.Arbitrary<RegisterOperation[]> = fc
  .array(
    fc.record({
      write: fc.boolean(),
      invokedAt: fc.integer({ min: 0, max: 10 }),
      duration: fc.integer({ min: 0, max: 6 }),
      unknown: fc.boolean(),
      reads: fc.integer({ min: 0, max: 20 }),
    }),
    { minLength: 1, maxLength: 7 },
  )
  .map((specs) => {
    const writes = specs.flatMap((spec, id) => (spec.write ? [`v${id}`] : []));
    return specs.map((spec, id) => ({
      id,
      kind: spec.write ? "write" : "read",
      invokedAt: spec.invokedAt,
      completedAt: spec.write && spec.unknown ? Infinity : spec.invokedAt + spec.duration,
      // A read sees one of the writes, or absent (0), or once in a while a value never written.
      value: spec.write
        ? `v${id}`
        : spec.reads === 0
          ? null
          : spec.reads === 20 || writes.length === 0
            ? "never-written"
            : writes[spec.reads % writes.length],
    }));
  });

describe("checkLinearizable", () => {
  it("agrees with a brute force over every order", () => {
    fc.assert(
      fc.property(history, (ops) => {
        const result = checkLinearizable(ops);
        expect(result.verdict).toBe(bruteForce(ops, null) ? "ok" : "anomaly");
        if (result.verdict === "anomaly") {
          const subset = ops.filter((op) => result.operations.includes(op.id));
          expect(bruteForce(subset, null)).toBe(false);
          // A read in it keeps the write it saw: it is not wrong merely for lacking that.
          const kept = new Set(subset.map((op) => op.value));
          for (const op of ops)
            if (op.kind === "write" && kept.has(op.value)) expect(subset).toContain(op);
        }
      }),
      { numRuns: 2000 },
    );
  });

  it("shrinks a counterexample to the operations that prove it, or says it could not", () => {
    const ops: RegisterOperation[] = [
      { id: 0, kind: "write", invokedAt: 0, completedAt: 10, value: "a" },
      { id: 1, kind: "read", invokedAt: 11, completedAt: 12, value: "a" },
      { id: 2, kind: "write", invokedAt: 20, completedAt: 30, value: "b" },
      { id: 3, kind: "read", invokedAt: 31, completedAt: 32, value: "b" },
      { id: 4, kind: "write", invokedAt: 40, completedAt: 50, value: "c" },
      { id: 5, kind: "read", invokedAt: 60, completedAt: 61, value: "b" },
      { id: 6, kind: "write", invokedAt: 70, completedAt: Infinity, value: "d" },
    ];
    const shrunk = checkLinearizable(ops);
    expect(shrunk).toEqual(expect.objectContaining({ verdict: "anomaly", operations: [2, 4, 5] }));
    expect(shrunk.verdict === "anomaly" && shrunk.message).not.toContain("may not be minimal");
    const unshrunk = checkLinearizable(ops, { maxMinimizeSteps: 1 });
    expect(unshrunk).toEqual(
      expect.objectContaining({ verdict: "anomaly", operations: [0, 1, 2, 3, 4, 5] }),
    );
    expect(unshrunk.verdict === "anomaly" && unshrunk.message).toContain("may not be minimal");
  });

  it("decides a dead end behind many concurrent writes nobody read", () => {
    // The search must try every subset of the 12 writes before it gives up.
    const ops: RegisterOperation[] = Array.from({ length: 12 }, (_, id) => ({
      id,
      kind: "write",
      invokedAt: 20,
      completedAt: 100,
      value: `u${id}`,
    }));
    ops.push(
      { id: 12, kind: "write", invokedAt: 20, completedAt: 100, value: "b" },
      { id: 13, kind: "read", invokedAt: 50, completedAt: 60, value: "b" },
      { id: 14, kind: "write", invokedAt: 150, completedAt: 160, value: "c" },
      { id: 15, kind: "read", invokedAt: 200, completedAt: 201, value: "b" },
    );
    expect(checkLinearizable(ops)).toEqual(
      expect.objectContaining({ verdict: "anomaly", operations: [12, 14, 15] }),
    );
  });

  it("says when its budget ran out", () => {
    const ops: RegisterOperation[] = Array.from({ length: 12 }, (_, id) => ({
      id,
      kind: "write",
      invokedAt: 0,
      completedAt: 100,
      value: `v${id}`,
    }));
    ops.push({ id: 12, kind: "read", invokedAt: 200, completedAt: 201, value: "v3" });
    const cut = checkLinearizable(ops, { maxSteps: 5 });
    expect(cut).toEqual(expect.objectContaining({ verdict: "budget-exceeded", steps: 5 }));
    expect(checkLinearizable(ops).verdict).toBe("ok");
  });
});
