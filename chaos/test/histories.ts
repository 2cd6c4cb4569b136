/**
 * Histories for the checker's tests: a small builder for crafted histories,
 * and a simulated linearizable register store whose recorded histories must
 * always pass (each operation takes effect at one random instant inside its
 * interval; an unknown write at some instant after its invocation, or never;
 * a failed write never).
 */
import type {
  FinalRead,
  Operation,
  Outcome,
  ReadOperation,
  RegisterId,
  WriteOperation,
} from "../src/history";

/** Builds a history operation by operation, with ids in call order. */
export class HistoryBuilder {
  readonly ops: Operation[] = [];

  write(
    client: string,
    register: RegisterId,
    value: string,
    invokedAt: number,
    completedAt: number,
    outcome: Outcome = "ok",
  ): WriteOperation {
    const op: WriteOperation = {
      id: this.ops.length,
      client,
      type: "write",
      register,
      value,
      invokedAt,
      completedAt,
      outcome,
      ...(outcome === "ok"
        ? {}
        : { error: outcome === "failed" ? "FAILED_PRECONDITION" : "DEADLINE_EXCEEDED" }),
    };
    this.ops.push(op);
    return op;
  }

  read(
    client: string,
    values: Record<RegisterId, string | null>,
    invokedAt: number,
    completedAt: number,
    source: ReadOperation["source"] = "get-nodes",
  ): ReadOperation {
    const op: ReadOperation = {
      id: this.ops.length,
      client,
      type: "read",
      source,
      values: new Map(Object.entries(values)),
      invokedAt,
      completedAt,
      outcome: "ok",
    };
    this.ops.push(op);
    return op;
  }
}

/** A final read taken at `at`. */
export function finalRead(at: number, values: Record<RegisterId, string | null>): FinalRead {
  return { at, values: new Map(Object.entries(values)) };
}

/** One operation of a simulated run, before the simulation gives it times and values. */
export interface SimulatedStep {
  client: number;
  write: boolean;
  register: number;
  /** Idle time of the client before it invokes the operation. */
  gap: number;
  duration: number;
  /** Where inside its interval the operation takes effect, 0..1. */
  at: number;
  /** For a write: how it ends; an unknown write may take effect late (`late`) or never. */
  outcome: Outcome;
  happens: boolean;
  late: number;
}

/** A simulated run: its history and final read. */
export interface SimulatedRun {
  history: Operation[];
  final: FinalRead;
  registers: RegisterId[];
}

/** The register names of a simulated run. */
export function registerNames(count: number): RegisterId[] {
  return Array.from({ length: count }, (_, i) => `node${i % 5}/label${Math.floor(i / 5)}`);
}

/**
 * Runs `steps` against a simulated linearizable store of `registerCount`
 * registers; every read sees every register (a GetNodes answer).
 */
export function simulate(steps: readonly SimulatedStep[], registerCount: number): SimulatedRun {
  const registers = registerNames(registerCount);
  const clock = new Map<number, number>();
  const effects: { at: number; index: number; apply: () => void }[] = [];
  const history: Operation[] = [];
  const state = new Map<RegisterId, string | null>(registers.map((r) => [r, null]));
  steps.forEach((step, index) => {
    const client = `client${step.client}`;
    const invokedAt = (clock.get(step.client) ?? 0) + step.gap;
    const completedAt = invokedAt + step.duration;
    clock.set(step.client, completedAt);
    const effectAt = invokedAt + step.at * step.duration;
    const register = registers[step.register % registers.length];
    if (step.write) {
      const op: WriteOperation = {
        id: index,
        client,
        type: "write",
        register,
        value: `v${index}`,
        invokedAt,
        completedAt,
        outcome: step.outcome,
      };
      history.push(op);
      if (step.outcome === "ok") {
        effects.push({ at: effectAt, index, apply: () => state.set(register, op.value) });
      } else if (step.outcome === "unknown" && step.happens) {
        const at = effectAt + step.late;
        effects.push({ at, index, apply: () => state.set(register, op.value) });
      }
    } else {
      const values = new Map<RegisterId, string | null>();
      const op: ReadOperation = {
        id: index,
        client,
        type: "read",
        source: step.at < 0.5 ? "get-nodes" : "watch",
        values,
        invokedAt,
        completedAt,
        outcome: "ok",
      };
      history.push(op);
      effects.push({
        at: effectAt,
        index,
        apply: () => {
          for (const [r, v] of state) values.set(r, v);
        },
      });
    }
  });
  effects.sort((a, b) => a.at - b.at || a.index - b.index);
  for (const effect of effects) effect.apply();
  const end = Math.max(0, ...history.map((op) => op.completedAt), ...effects.map((e) => e.at));
  return { history, final: { at: end + 1000, values: new Map(state) }, registers };
}

/** A deterministic generator of numbers in [0, 1) (mulberry32). */
export function seeded(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

/** `count` random steps of `clients` clients over `registerCount` registers. */
export function randomSteps(
  random: () => number,
  count: number,
  clients: number,
  registerCount: number,
): SimulatedStep[] {
  return Array.from({ length: count }, () => {
    const roll = random();
    return {
      client: Math.floor(random() * clients),
      write: random() < 0.5,
      register: Math.floor(random() * registerCount),
      gap: Math.floor(random() * 20),
      duration: 1 + Math.floor(random() * 40),
      at: random(),
      outcome: roll < 0.8 ? "ok" : roll < 0.9 ? "unknown" : "failed",
      happens: random() < 0.5,
      late: Math.floor(random() * 200),
    };
  });
}
