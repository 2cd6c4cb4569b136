/**
 * Stale reads: a reader (one client of the workload) must never see a label
 * register go back to an older value. Its GetNodes answers and its Watch
 * updates are one view, checked together.
 *
 * A read R2 of value B is stale when the same client earlier saw value A in a
 * read R1 that completed before R2 was invoked, and B is definitely older than
 * A: the write of B completed ok before the write of A was invoked, or B is
 * the initial value and A was written. Only orders the clock proves count, so
 * two reads that overlap, or writes that overlap, are never flagged.
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

  const anomalies: Anomaly[] = [];
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
