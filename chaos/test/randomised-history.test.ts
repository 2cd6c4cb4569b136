/**
 * The checker against a simulated linearizable store: every history it
 * records passes (random concurrency, unknown writes that take effect late or
 * never, failed writes); the same history with one read turned back to a
 * definitely older value is caught; and a 5,000-operation history of 20
 * registers is decided within the default search budget.
 */
import fc from "fast-check";
import { checkHistory } from "../src/checker";
import type { Operation, ReadOperation, RegisterId, WriteOperation } from "../src/history";
import { randomSteps, seeded, simulate, type SimulatedStep } from "./histories";

const step: fc.Arbitrary<SimulatedStep> = fc.record({
  client: fc.integer({ min: 0, max: 4 }),
  write: fc.boolean(),
  register: fc.integer({ min: 0, max: 2 }),
  gap: fc.integer({ min: 0, max: 20 }),
  duration: fc.integer({ min: 0, max: 40 }),
  at: fc.double({ min: 0, max: 1, noNaN: true }),
  outcome: fc.constantFrom("ok", "ok", "ok", "ok", "unknown", "failed"),
  happens: fc.boolean(),
  late: fc.integer({ min: 0, max: 200 }),
});
const run = fc.record({
  steps: fc.array(step, { minLength: 1, maxLength: 80 }),
  registers: fc.integer({ min: 1, max: 3 }),
});

/**
 * `history` with read `readIndex` (among the reads) turned back to a value
 * that is definitely older than one completed before the read, or undefined
 * when that read has none.
 */
function turnBack(
  history: readonly Operation[],
  readIndex: number,
): { history: Operation[]; register: RegisterId } | undefined {
  const reads = history.filter((op): op is ReadOperation => op.type === "read");
  if (reads.length === 0) return undefined;
  const read = reads[readIndex % reads.length];
  const writes = history.filter(
    (op): op is WriteOperation => op.type === "write" && op.outcome === "ok",
  );
  for (const newer of writes) {
    if (newer.completedAt >= read.invokedAt) continue;
    const older = writes.find(
      (w) => w.register === newer.register && w.completedAt < newer.invokedAt,
    );
    // Absent is older than every write.
    const value = older === undefined ? null : older.value;
    const values = new Map(read.values);
    values.set(newer.register, value);
    const mutated = history.map((op) => (op === read ? { ...read, values } : op));
    return { history: mutated, register: newer.register };
  }
  return undefined;
}

describe("a simulated linearizable store", () => {
  it("records histories that always pass", () => {
    fc.assert(
      fc.property(run, ({ steps, registers }) => {
        const { history, final } = simulate(steps, registers);
        const report = checkHistory(history, final);
        expect(report.anomalies).toEqual([]);
        expect(report.valid).toBe(true);
      }),
      { numRuns: 300 },
    );
  });

  it("has every read turned back to an older value caught", () => {
    fc.assert(
      fc.property(run, fc.nat(), ({ steps, registers }, readIndex) => {
        const { history, final } = simulate(steps, registers);
        const mutated = turnBack(history, readIndex);
        fc.pre(mutated !== undefined);
        if (mutated === undefined) return;
        const report = checkHistory(mutated.history, final);
        expect(report.valid).toBe(false);
        expect(report.anomalies).toContainEqual(
          expect.objectContaining({ kind: "not-linearizable", register: mutated.register }),
        );
      }),
      { numRuns: 300 },
    );
  });

  it("has a 5,000-operation history of 20 registers decided within the step budget", () => {
    const { history, final, registers } = simulate(randomSteps(seeded(12), 5000, 10, 20), 20);
    const started = performance.now();
    const report = checkHistory(history, final);
    const ms = performance.now() - started;
    expect(report.registers.map((r) => r.register).sort()).toEqual([...registers].sort());
    expect(report.registers.filter((r) => r.verdict !== "ok")).toEqual([]);
    expect(report.valid).toBe(true);
    // Not an assertion on time: a line for the report.
    process.stdout.write(
      `5,000 operations, 20 registers: ${Math.round(ms)} ms, ${report.steps} search steps\n`,
    );
  });
});
