/**
 * Stale reads, two rules; only orders the clock proves count, so reads or
 * writes that overlap are never flagged, and a read is flagged at most once.
 *
 * 1. Against acknowledged writes (any client, any curator): a read R of
 *    value A is stale when an acknowledged write of another value B
 *    completed before R was invoked, and A is definitely older than B — A is
 *    the initial value (labels are never removed), or A's write completed ok
 *    before B's was invoked. Whoever served R — a cut-off old leader still
 *    answering from memory, say (issue 36) — served a register B had already
 *    overwritten before R began. This is the read half of linearizability
 *    that needs no search, with a message naming the curator that served it.
 * 2. Per reader (one client of the workload): a reader must never see a
 *    register go back to an older value. Its GetNodes answers and its Watch
 *    updates are one view, checked together. A read R2 of value B is stale
 *    when the same client earlier saw value A in a read R1 that completed
 *    before R2 was invoked, and B is definitely older than A: the write of B
 *    completed ok before the write of A was invoked, or B is the initial
 *    value and A was written.
 */
import type { Anomaly, Operation, ReadOperation, RegisterId, WriteOperation } from "./history";
import { showValue } from "./show-value";

/** Finds the stale reads of `register`, per client; at most one anomaly per read. */
export function checkStaleReads(
  history: readonly Operation[],
  register: RegisterId,
  initialValue: string | null = null,
): Anomaly[] {
  const writes = new Map<string, WriteOperation>();
  const readsByClient = new Map<string, ReadOperation[]>();
  for (const op of history) {
    if (op.type === "write" && op.register === register) writes.set(op.value, op);
    if (op.type === "read" && op.outcome === "ok" && op.values.has(register)) {
      const reads = readsByClient.get(op.client) ?? [];
      reads.push(op);
      readsByClient.set(op.client, reads);
    }
  }
  const valueOf = (read: ReadOperation): string | null => read.values.get(register) ?? null;

  const anomalies = staleAgainstAcknowledged(history, register, initialValue, writes);
  const flagged = new Set(anomalies.map((a) => a.operations.at(-1)));
  for (const [client, reads] of readsByClient) {
    const byInvocation = [...reads].sort((a, b) => a.invokedAt - b.invokedAt || a.id - b.id);
    const byCompletion = [...reads].sort((a, b) => a.completedAt - b.completedAt || a.id - b.id);
    // Among the reads completed so far: the one whose write was invoked last.
    let newest: { read: ReadOperation; write: WriteOperation } | undefined;
    let sawWritten: ReadOperation | undefined;
    let done = 0;
    for (const read of byInvocation) {
      for (; done < byCompletion.length; done++) {
        const earlier = byCompletion[done];
        if (earlier.completedAt >= read.invokedAt) break;
        const value = valueOf(earlier);
        const write = value === null ? undefined : writes.get(value);
        if (write !== undefined) {
          sawWritten ??= earlier;
          if (newest === undefined || write.invokedAt > newest.write.invokedAt) {
            newest = { read: earlier, write };
          }
        }
      }
      const value = valueOf(read);
      if (flagged.has(read.id)) continue;
      if (value === initialValue) {
        if (sawWritten !== undefined) {
          anomalies.push({
            kind: "stale-read",
            register,
            message:
              `client ${client}: read #${read.id} saw the initial value (${showValue(value)}) again ` +
              `after read #${sawWritten.id} saw ${JSON.stringify(valueOf(sawWritten))}`,
            operations: [sawWritten.id, read.id],
          });
        }
        continue;
      }
      const write = value === null ? undefined : writes.get(value);
      if (write === undefined || newest === undefined) continue;
      if (write.outcome === "ok" && write.completedAt < newest.write.invokedAt) {
        anomalies.push({
          kind: "stale-read",
          register,
          message:
            `client ${client}: read #${read.id} saw ${JSON.stringify(value)} of write #${write.id}, ` +
            `after read #${newest.read.id} saw ${JSON.stringify(newest.write.value)} of write #${newest.write.id}, ` +
            `which was invoked after write #${write.id} completed`,
          operations: [write.id, newest.write.id, newest.read.id, read.id],
        });
      }
    }
  }
  return anomalies;
}

/** Where a read came from, for a message: its client and the curator that served it. */
function whose(read: ReadOperation): string {
  return (
    `client ${read.client}` + (read.servedBy === undefined ? "" : ` (served by ${read.servedBy})`)
  );
}

/** Rule 1 of the module comment: reads older than a write acknowledged before they began. */
function staleAgainstAcknowledged(
  history: readonly Operation[],
  register: RegisterId,
  initialValue: string | null,
  writes: ReadonlyMap<string, WriteOperation>,
): Anomaly[] {
  // Acknowledged writes by completion, with the one invoked last among those completed so far.
  const acked = [...writes.values()]
    .filter((w) => w.outcome === "ok")
    .sort((a, b) => a.completedAt - b.completedAt);
  const latestInvoked: WriteOperation[] = [];
  for (const w of acked) {
    const previous = latestInvoked.at(-1);
    latestInvoked.push(previous !== undefined && previous.invokedAt >= w.invokedAt ? previous : w);
  }
  /** Of the writes acknowledged before `t`, the one invoked last. */
  const newestBefore = (t: number): WriteOperation | undefined => {
    let lo = 0;
    let hi = acked.length;
    while (lo < hi) {
      const mid = (lo + hi) >> 1;
      if (acked[mid].completedAt < t) lo = mid + 1;
      else hi = mid;
    }
    return lo === 0 ? undefined : latestInvoked[lo - 1];
  };
  const anomalies: Anomaly[] = [];
  for (const read of history) {
    if (read.type !== "read" || read.outcome !== "ok" || !read.values.has(register)) continue;
    const value = read.values.get(register) ?? null;
    const newer = newestBefore(read.invokedAt);
    if (newer === undefined || newer.value === value) continue;
    const done = `write #${newer.id} of ${JSON.stringify(newer.value)} was acknowledged before the read began`;
    if (value === initialValue) {
      anomalies.push({
        kind: "stale-read",
        register,
        message: `${whose(read)}: read #${read.id} saw the initial value (${showValue(value)}), but ${done}`,
        operations: [newer.id, read.id],
      });
      continue;
    }
    const write = value === null ? undefined : writes.get(value);
    if (write === undefined || write.outcome !== "ok") continue;
    // Some write acknowledged before the read was invoked after A's write completed.
    if (newer.invokedAt > write.completedAt) {
      anomalies.push({
        kind: "stale-read",
        register,
        message:
          `${whose(read)}: read #${read.id} saw ${JSON.stringify(value)} of write #${write.id}, but ${done}, ` +
          `and it was invoked after write #${write.id} completed`,
        operations: [write.id, newer.id, read.id],
      });
    }
  }
  return anomalies;
}
