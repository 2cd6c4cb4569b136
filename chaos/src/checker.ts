/**
 * The history checker of a chaos run: from the recorded operations and the
 * final read alone (pure, no I/O), it runs per label register the
 * linearizability search, the lost-write check and the stale-read check, and
 * reports every anomaly with the operations that prove it, the operations'
 * outcome counts, and each register's linearizability verdict with the
 * search steps it cost.
 *
 * `valid` is `true` only when no anomaly was found and every register's
 * search reached a verdict; a search out of budget makes it `"unknown"`,
 * never `true`.
 */
import type { Anomaly, FinalRead, Operation, Outcome, RegisterId } from "./history";
import { checkLinearizable, registerOperations } from "./linearizability";
import { checkLostWrites } from "./lost-writes";
import { checkStaleReads } from "./stale-reads";

/** Options of {@link checkHistory}. */
export interface CheckOptions {
  /** Search steps allowed per register (default {@link defaultMaxSteps}). */
  maxSteps?: number;
  /** Steps allowed per register to shrink a counterexample. */
  maxMinimizeSteps?: number;
  /** Registers whose value before the run was not absent. */
  initialValues?: ReadonlyMap<RegisterId, string | null>;
}

/** Operations of one type by outcome. */
export type OutcomeCounts = Record<Outcome, number>;

/** One register's linearizability verdict. */
export interface RegisterVerdict {
  register: RegisterId;
  verdict: "ok" | "anomaly" | "budget-exceeded";
  /** Search steps spent (including shrinking a counterexample). */
  steps: number;
  /** Writes (ok or unknown) and reads of the register the search saw. */
  operations: number;
  /** Why the verdict is not `ok`. */
  message?: string;
}

/** What {@link checkHistory} found. */
export interface CheckReport {
  /** `true`: nothing wrong; `false`: at least one anomaly; `"unknown"`: no anomaly, but a search ran out of budget. */
  valid: boolean | "unknown";
  anomalies: Anomaly[];
  counts: { write: OutcomeCounts; read: OutcomeCounts; other: OutcomeCounts };
  registers: RegisterVerdict[];
  /** Search steps spent over all registers. */
  steps: number;
}

/**
 * Checks a chaos run's history: linearizability, lost writes and stale reads
 * of every label register that a write, a read or the final read names.
 */
export function checkHistory(
  history: readonly Operation[],
  final: FinalRead,
  options: CheckOptions = {},
): CheckReport {
  const counts = {
    write: { ok: 0, failed: 0, unknown: 0 },
    read: { ok: 0, failed: 0, unknown: 0 },
    other: { ok: 0, failed: 0, unknown: 0 },
  };
  const registers = new Set<RegisterId>();
  for (const op of history) {
    counts[op.type][op.outcome] += 1;
    if (op.type === "write") registers.add(op.register);
    if (op.type === "read") for (const register of op.values.keys()) registers.add(register);
  }
  for (const register of final.values.keys()) registers.add(register);

  const anomalies: Anomaly[] = [];
  const verdicts: RegisterVerdict[] = [];
  let steps = 0;
  for (const register of [...registers].sort()) {
    const initialValue = options.initialValues?.get(register) ?? null;
    const ops = registerOperations(history, register);
    const result = checkLinearizable(ops, {
      initialValue,
      maxSteps: options.maxSteps,
      maxMinimizeSteps: options.maxMinimizeSteps,
    });
    steps += result.steps;
    if (result.verdict === "ok") {
      verdicts.push({ register, verdict: "ok", steps: result.steps, operations: ops.length });
    } else {
      verdicts.push({
        register,
        verdict: result.verdict,
        steps: result.steps,
        operations: ops.length,
        message: result.message,
      });
    }
    if (result.verdict === "anomaly") {
      anomalies.push({
        kind: "not-linearizable",
        register,
        message: result.message,
        operations: result.operations,
      });
    }
    anomalies.push(...checkLostWrites(history, final, register, initialValue));
    anomalies.push(...checkStaleReads(history, register, initialValue));
  }
  const exceeded = verdicts.some((v) => v.verdict === "budget-exceeded");
  const valid = anomalies.length > 0 ? false : exceeded ? "unknown" : true;
  return { valid, anomalies, counts, registers: verdicts, steps };
}
