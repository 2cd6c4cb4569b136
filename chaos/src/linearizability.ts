/**
 * Linearizability of one label register, checked with the Wing–Gong–Lowe
 * search as Porcupine does it: the history's invocations and completions in
 * time order as a linked list, a depth-first search that linearizes one
 * minimal operation at a time, and a cache of (linearized set, state) so that
 * no configuration is explored twice. The history of the whole run is split
 * per register first (P-compositionality), so each search sees one register.
 *
 * What it guarantees: `ok` means a linearization exists (every ok write took
 * effect at one instant inside its invocation–completion interval, every
 * unknown write either at one instant after its invocation or never, and
 * every read saw the value of the last write before it); `anomaly` means none
 * exists, with a set of operations that already has none, shrunk until no
 * single operation can be left out (a write leaves with the reads of its
 * value) unless the shrinking budget ran out first, which the message says; `budget-
 * exceeded` means the search ran out of steps and proves nothing either way.
 * Operations that touch at the same instant are taken as concurrent (lenient:
 * it never invents an order the clock cannot prove).
 *
 * Values are unique per write, so the state is the id of the write whose
 * value is current, and the search prunes with it: a read linearizes only
 * while its write is the state; a read that can linearize is taken at once and
 * never revisited (a read changes no state, so taking it earlier loses
 * nothing); a write may not overwrite a value that reads not yet linearized
 * still have to see; an unknown write nobody read is left out (it can
 * always be taken as never having happened); and the states after any ok
 * write nobody read are one state (no read needs it, any write may overwrite
 * it). The cache keys the linearized set by a 64-bit
 * Zobrist hash (deterministic); a collision, which could only make the search
 * skip a configuration, has a probability of about steps² / 2⁶⁴.
 */
import type { Operation, RegisterId } from "./history";
import { showValue } from "./show-value";

/** One operation of a single register, as the search sees it. */
export interface RegisterOperation {
  /** The operation's id in the history. */
  id: number;
  kind: "write" | "read";
  invokedAt: number;
  /** `Infinity` for a write whose outcome is unknown: it may take effect at any time, or never. */
  completedAt: number;
  /** The value written, or the value read (`null`: the label was absent). */
  value: string | null;
}

/** Options of {@link checkLinearizable}. */
export interface LinearizabilityOptions {
  /** The register's value before any write; `null` (absent) unless given. */
  initialValue?: string | null;
  /** Search steps allowed before the verdict is `budget-exceeded`. */
  maxSteps?: number;
  /**
   * Steps allowed to shrink a counterexample to a small set of operations;
   * when spent, the smallest set found so far is reported.
   */
  maxMinimizeSteps?: number;
}

/** The default search budget of one register. */
export const defaultMaxSteps = 2_000_000;
/** How many operations of a counterexample its message lists. */
const shownOps = 12;
/** The default budget for shrinking one register's counterexample. */
export const defaultMaxMinimizeSteps = 2_000_000;

/** The verdict on one register. */
export type LinearizabilityResult =
  | { verdict: "ok"; steps: number }
  | {
      verdict: "anomaly";
      steps: number;
      /** Ids of operations that have no linearization on their own (shrunk as far as the budget allowed). */
      operations: number[];
      message: string;
    }
  | { verdict: "budget-exceeded"; steps: number; message: string };

/** The writes (ok and unknown) and ok reads of `register` in `history`, in id order. */
export function registerOperations(
  history: readonly Operation[],
  register: RegisterId,
): RegisterOperation[] {
  const ops: RegisterOperation[] = [];
  for (const op of history) {
    if (op.type === "write" && op.register === register && op.outcome !== "failed") {
      const completedAt = op.outcome === "ok" ? op.completedAt : Infinity;
      ops.push({ id: op.id, kind: "write", invokedAt: op.invokedAt, completedAt, value: op.value });
    } else if (op.type === "read" && op.outcome === "ok" && op.values.has(register)) {
      const value = op.values.get(register) ?? null;
      ops.push({
        id: op.id,
        kind: "read",
        invokedAt: op.invokedAt,
        completedAt: op.completedAt,
        value,
      });
    }
  }
  return ops.sort((a, b) => a.id - b.id);
}

/** Which write each read needs as the state: a write's index, `initial`, or `impossible`. */
const initial = -1;
const impossible = -2;

/** What one run of the search found. */
type SearchResult =
  | { kind: "ok"; steps: number }
  | { kind: "stuck"; steps: number; latestStuckAt: number }
  | { kind: "budget"; steps: number };

/**
 * Checks that the operations of one register are linearizable.
 *
 * @param ops - the register's operations (see {@link registerOperations}).
 * @returns `ok`, an `anomaly` with the operations that prove it, or
 *   `budget-exceeded` (honestly unknown).
 */
export function checkLinearizable(
  ops: readonly RegisterOperation[],
  options: LinearizabilityOptions = {},
): LinearizabilityResult {
  const initialValue = options.initialValue ?? null;
  const maxSteps = options.maxSteps ?? defaultMaxSteps;
  // A read of a value no candidate write produced can never linearize: no search needed.
  const writers = writerIndex(ops);
  for (const op of ops) {
    if (op.kind === "read" && neededWriter(op, writers, initialValue) === impossible) {
      return {
        verdict: "anomaly",
        steps: 0,
        operations: [op.id],
        message: `read #${op.id} saw ${showValue(op.value)}, which no ok or unknown write of the register produced`,
      };
    }
  }
  // An unknown write nobody read can always be taken as never having happened.
  const read = new Set<string | null>();
  for (const op of ops) if (op.kind === "read") read.add(op.value);
  const relevant = ops.filter(
    (op) => !(op.kind === "write" && op.completedAt === Infinity && !read.has(op.value)),
  );
  const result = search(relevant, initialValue, maxSteps);
  if (result.kind === "ok") return { verdict: "ok", steps: result.steps };
  if (result.kind === "budget") {
    return {
      verdict: "budget-exceeded",
      steps: result.steps,
      message: `search stopped after ${result.steps} steps without a verdict (${ops.length} operations)`,
    };
  }
  const shrunk = shrink(
    relevant,
    result,
    initialValue,
    options.maxMinimizeSteps ?? defaultMaxMinimizeSteps,
  );
  return {
    verdict: "anomaly",
    steps: result.steps + shrunk.steps,
    operations: shrunk.ops.map((op) => op.id).sort((a, b) => a - b),
    message:
      `no linearization of ${shrunk.ops.length} operation(s): ` +
      shrunk.ops.slice(0, shownOps).map(describe).join(", ") +
      (shrunk.ops.length > shownOps ? `, and ${shrunk.ops.length - shownOps} more` : "") +
      (shrunk.minimal ? "" : " (shrinking ran out of budget: the set may not be minimal)"),
  };
}

/** One operation for a message: kind, id, value and interval. */
function describe(op: RegisterOperation): string {
  const end = op.completedAt === Infinity ? "?" : op.completedAt.toFixed(1);
  const what =
    op.kind === "write"
      ? `write #${op.id} ${showValue(op.value)}`
      : `read #${op.id} → ${showValue(op.value)}`;
  return `${what} [${op.invokedAt.toFixed(1)}–${end} ms]`;
}

/** Index of the write of each value. */
function writerIndex(ops: readonly RegisterOperation[]): Map<string, number> {
  const writers = new Map<string, number>();
  ops.forEach((op, index) => {
    if (op.kind === "write" && op.value !== null) writers.set(op.value, index);
  });
  return writers;
}

/** The state a read needs: its write's index, `initial`, or `impossible`. */
function neededWriter(
  op: RegisterOperation,
  writers: ReadonlyMap<string, number>,
  initialValue: string | null,
): number {
  if (op.value === initialValue) return initial;
  if (op.value === null) return impossible;
  return writers.get(op.value) ?? impossible;
}

/** A deterministic 32-bit generator (mulberry32), for the Zobrist keys. */
function mulberry32(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return (t ^ (t >>> 14)) >>> 0;
  };
}

/**
 * The WGL search proper. Entries 1..2n are calls and returns in time order
 * (calls before returns at the same instant); entry 0 is the list's head.
 */
function search(
  ops: readonly RegisterOperation[],
  initialValue: string | null,
  maxSteps: number,
): SearchResult {
  const n = ops.length;
  const writers = writerIndex(ops);
  const need = new Int32Array(n);
  // Reads not yet linearized that need each state; index = state + 1.
  const pendingReads = new Int32Array(n + 2);
  ops.forEach((op, i) => {
    if (op.kind === "read") {
      const w = neededWriter(op, writers, initialValue);
      need[i] = w;
      if (w !== impossible) pendingReads[w + 1] += 1;
    }
  });
  // The state after a write nobody read: all such states behave alike (no
  // read needs them, any write may overwrite them), so they are one state.
  const unread = n;
  const stateAfter = new Int32Array(n);
  for (let i = 0; i < n; i++) stateAfter[i] = pendingReads[i + 1] > 0 ? i : unread;

  // Entries sorted by time; calls first at equal times; then by id.
  const order: { op: number; call: boolean; time: number }[] = [];
  ops.forEach((op, i) => {
    order.push({ op: i, call: true, time: op.invokedAt });
    order.push({ op: i, call: false, time: op.completedAt });
  });
  order.sort(
    (a, b) => a.time - b.time || Number(b.call) - Number(a.call) || ops[a.op].id - ops[b.op].id,
  );
  const size = order.length + 1;
  const next = new Int32Array(size);
  const prev = new Int32Array(size);
  const entryOp = new Int32Array(size);
  const isCall = new Uint8Array(size);
  const time = new Float64Array(size);
  const returnEntry = new Int32Array(n);
  order.forEach((entry, k) => {
    const e = k + 1;
    entryOp[e] = entry.op;
    isCall[e] = entry.call ? 1 : 0;
    time[e] = entry.time;
    if (!entry.call) returnEntry[entry.op] = e;
  });
  const nil = -1;
  for (let e = 0; e < size; e++) {
    next[e] = e + 1 < size ? e + 1 : nil;
    prev[e] = e - 1;
  }
  entryOp[0] = -1;

  const lift = (call: number): void => {
    const ret = returnEntry[entryOp[call]];
    next[prev[call]] = next[call];
    if (next[call] !== nil) prev[next[call]] = prev[call];
    next[prev[ret]] = next[ret];
    if (next[ret] !== nil) prev[next[ret]] = prev[ret];
  };
  const unlift = (call: number): void => {
    const ret = returnEntry[entryOp[call]];
    next[prev[ret]] = ret;
    if (next[ret] !== nil) prev[next[ret]] = ret;
    next[prev[call]] = call;
    if (next[call] !== nil) prev[next[call]] = call;
  };

  // Zobrist keys of the linearized set.
  const random = mulberry32(0x9e3779b9);
  const zLow = new Uint32Array(n);
  const zHigh = new Uint32Array(n);
  for (let i = 0; i < n; i++) {
    zLow[i] = random();
    zHigh[i] = random();
  }
  let hLow = 0;
  let hHigh = 0;
  const cache = new Set<string>();

  // The stack of linearized calls: entry, state before it, taken greedily (a read).
  const stackEntry: number[] = [];
  const stackState: number[] = [];
  const stackForced: boolean[] = [];

  let state = initial;
  let steps = 0;
  let latestStuckAt = -Infinity;

  /** Linearizes the call `e` into `newState` unless that configuration was seen; false if it was. */
  const tryPush = (e: number, newState: number, forced: boolean): boolean => {
    const op = entryOp[e];
    const low = (hLow ^ zLow[op]) >>> 0;
    const high = (hHigh ^ zHigh[op]) >>> 0;
    const key = `${low}:${high}:${newState}`;
    if (cache.has(key)) return false;
    cache.add(key);
    hLow = low;
    hHigh = high;
    stackEntry.push(e);
    stackState.push(state);
    stackForced.push(forced);
    if (ops[op].kind === "read") pendingReads[state + 1] -= 1;
    state = newState;
    lift(e);
    return true;
  };

  /** Undoes linearized calls up to the last free choice; the entry to try next, or nil when none is left. */
  const backtrack = (): number => {
    for (;;) {
      const e = stackEntry.pop();
      const before = stackState.pop();
      const forced = stackForced.pop();
      if (e === undefined || before === undefined || forced === undefined) return nil;
      const op = entryOp[e];
      hLow = (hLow ^ zLow[op]) >>> 0;
      hHigh = (hHigh ^ zHigh[op]) >>> 0;
      state = before;
      if (ops[op].kind === "read") pendingReads[state + 1] += 1;
      unlift(e);
      if (!forced) return next[e];
    }
  };

  let entry = next[0];
  let fresh = true;
  while (next[0] !== nil) {
    steps += 1;
    if (steps > maxSteps) return { kind: "budget", steps: steps - 1 };
    if (fresh) {
      // A new configuration: first take any minimal read that the state satisfies.
      fresh = false;
      let read = nil;
      for (let e = next[0]; e !== nil && isCall[e] === 1; e = next[e]) {
        const op = entryOp[e];
        if (ops[op].kind === "read" && need[op] === state) {
          read = e;
          break;
        }
      }
      if (read !== nil) {
        if (tryPush(read, state, true)) {
          entry = next[0];
          fresh = true;
        } else {
          // Seen before, and taking the read first loses nothing: this configuration is dead.
          entry = backtrack();
          if (entry === nil) return { kind: "stuck", steps, latestStuckAt };
        }
        continue;
      }
    }
    if (entry === nil) {
      entry = backtrack();
      if (entry === nil) return { kind: "stuck", steps, latestStuckAt };
      continue;
    }
    if (isCall[entry] === 1) {
      const op = entryOp[entry];
      // Reads were tried above; a write may not overwrite a value reads still need.
      if (
        ops[op].kind === "write" &&
        pendingReads[state + 1] === 0 &&
        tryPush(entry, stateAfter[op], false)
      ) {
        entry = next[0];
        fresh = true;
      } else {
        entry = next[entry];
      }
      continue;
    }
    // A return: every operation still in the list before it would have to go first.
    if (time[entry] === Infinity) break; // only unknown writes are left: they go last, or never
    latestStuckAt = Math.max(latestStuckAt, time[entry]);
    entry = backtrack();
    if (entry === nil) return { kind: "stuck", steps, latestStuckAt };
  }
  return { kind: "ok", steps };
}

/**
 * Shrinks a non-linearizable set of operations (delta debugging): first to
 * the operations invoked before the search's last dead end (and the writes
 * their reads saw), then by removing
 * chunks while the rest still has no linearization. Removing a write removes
 * the reads of its value with it, so the set never fails merely because a
 * read lost its write.
 */
function shrink(
  ops: readonly RegisterOperation[],
  stuck: { latestStuckAt: number },
  initialValue: string | null,
  budget: number,
): { ops: RegisterOperation[]; steps: number; minimal: boolean } {
  let steps = 0;
  let outOfBudget = false;
  const fails = (candidate: RegisterOperation[]): boolean => {
    const left = budget - steps;
    const result = left > 0 ? search(candidate, initialValue, left) : undefined;
    if (result === undefined || result.kind === "budget") outOfBudget = true;
    steps += result?.steps ?? 0;
    return result?.kind === "stuck";
  };
  /** `candidate` without `removed`, and without the reads of the writes removed. */
  const without = (candidate: RegisterOperation[], removed: ReadonlySet<RegisterOperation>) => {
    const gone = new Set<string>();
    for (const op of removed) if (op.kind === "write" && op.value !== null) gone.add(op.value);
    return candidate.filter(
      (op) =>
        !removed.has(op) &&
        !(
          op.kind === "read" &&
          op.value !== null &&
          op.value !== initialValue &&
          gone.has(op.value)
        ),
    );
  };

  let current = [...ops];
  // The prefix keeps the writes its reads saw, wherever they are.
  const seen = new Set<string | null>();
  for (const op of current) {
    if (op.kind === "read" && op.invokedAt <= stuck.latestStuckAt) seen.add(op.value);
  }
  const prefix = current.filter(
    (op) => op.invokedAt <= stuck.latestStuckAt || (op.kind === "write" && seen.has(op.value)),
  );
  if (prefix.length < current.length && fails(prefix)) current = prefix;
  let chunks = 2;
  while (current.length >= 2 && !outOfBudget) {
    const size = Math.ceil(current.length / chunks);
    let reduced = false;
    for (let start = 0; start < current.length; start += size) {
      const candidate = without(current, new Set(current.slice(start, start + size)));
      if (candidate.length > 0 && candidate.length < current.length && fails(candidate)) {
        current = candidate;
        chunks = Math.max(chunks - 1, 2);
        reduced = true;
        break;
      }
    }
    if (!reduced) {
      if (chunks >= current.length) break;
      chunks = Math.min(current.length, chunks * 2);
    }
  }
  return { ops: current.sort((a, b) => a.id - b.id), steps, minimal: !outOfBudget };
}
