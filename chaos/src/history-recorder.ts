/**
 * Records the history of a chaos run as its clients go: each operation gets
 * its id when it is invoked (so ids are in invocation order) and is stored
 * when its outcome is known. Times are milliseconds since the run started,
 * from `performance.now()` (monotonic).
 *
 * Guarantees: every operation started with `invoke` and not dropped ends up
 * in `history()` exactly once, even when the run stops before it completes (`history()`
 * then records it as `unknown`, completed at the time of the call).
 */
import type { Operation, Outcome, ReadOperation, RegisterId } from "./history";

/** What an operation is, before its outcome is known. */
export type Invocation =
  | { type: "write"; register: RegisterId; value: string }
  | { type: "other"; what: string }
  | { type: "read"; source: "get-nodes" | "watch" };

/** An operation in flight: end it with `ok`, `failed` or `unknown`. */
export interface PendingOperation {
  readonly id: number;
  /** Records the node whose curator the request was sent to (history.ts `servedBy`). */
  sentTo(node: string): void;
  ok(values?: ReadonlyMap<RegisterId, string | null>): void;
  end(outcome: Exclude<Outcome, "ok">, error: string): void;
  /** Leaves it out of the history (a read that did not answer carries nothing). */
  drop(): void;
}

/** The run's clock and history; see the module comment. */
export class HistoryRecorder {
  private readonly startedAt: number;
  private nextId = 0;
  private readonly done: Operation[] = [];
  private readonly pending = new Map<number, { client: string; what: Invocation; at: number }>();

  constructor(startedAt = performance.now()) {
    this.startedAt = startedAt;
  }

  /** Milliseconds since the run started. */
  now(): number {
    return performance.now() - this.startedAt;
  }

  /** Records that `client` invoked `what` now. */
  invoke(client: string, what: Invocation): PendingOperation {
    const id = this.nextId++;
    const invokedAt = this.now();
    this.pending.set(id, { client, what, at: invokedAt });
    let servedBy: string | undefined;
    const finish = (
      outcome: Outcome,
      error: string | undefined,
      values?: ReadonlyMap<RegisterId, string | null>,
    ) => {
      if (!this.pending.delete(id)) return;
      const op = this.operation(id, client, what, invokedAt, this.now(), outcome, error, values);
      this.done.push(servedBy === undefined ? op : { ...op, servedBy });
    };
    return {
      id,
      sentTo: (node) => void (servedBy = node),
      ok: (values) => finish("ok", undefined, values),
      end: (outcome, error) => finish(outcome, error),
      drop: () => void this.pending.delete(id),
    };
  }

  /** Every operation so far, by id; those still in flight as `unknown`. */
  history(): Operation[] {
    const now = this.now();
    const open = [...this.pending.entries()].map(([id, p]) =>
      this.operation(id, p.client, p.what, p.at, now, "unknown", "still in flight at the end"),
    );
    return [...this.done, ...open].sort((a, b) => a.id - b.id);
  }

  private operation(
    id: number,
    client: string,
    what: Invocation,
    invokedAt: number,
    completedAt: number,
    outcome: Outcome,
    error: string | undefined,
    values?: ReadonlyMap<RegisterId, string | null>,
  ): Operation {
    const base = { id, client, invokedAt, completedAt, outcome, ...(error ? { error } : {}) };
    switch (what.type) {
      case "write":
        return { ...base, ...what };
      case "other":
        return { ...base, ...what };
      case "read": {
        const read: ReadOperation = { ...base, ...what, values: values ?? new Map() };
        return read;
      }
    }
  }
}
