/**
 * Lost and phantom writes of the label registers, from the history and the
 * final read alone (no search):
 *
 * - `lost-write`: an acknowledged (ok) write whose value is not the register's
 *   final value although no other write could have replaced it. A write could
 *   have replaced it when it is ok or unknown, was invoked before the final
 *   read, and did not definitely come first (it had not completed before the
 *   acknowledged write was invoked). It is lost too, whatever other writes
 *   there were, when the final value is definitely older than it: the initial
 *   value, or the value of an ok write that completed before it was invoked
 *   (values are unique and labels are never deleted, so an older value cannot
 *   come back).
 * - `failed-write-visible`: a definitely failed write whose value some read or
 *   the final read saw.
 * - `unknown-value`: a read (or the final read) saw a value that no write of
 *   that register produced, and that is not the register's initial value.
 *
 * A register missing from the final read's map is taken as absent (`null`).
 */
import type { Anomaly, FinalRead, Operation, RegisterId, WriteOperation } from "./history";
import { showValue } from "./show-value";

/** Finds lost writes, visible failed writes and unknown values of `register`. */
export function checkLostWrites(
  history: readonly Operation[],
  final: FinalRead,
  register: RegisterId,
  initialValue: string | null = null,
): Anomaly[] {
  const anomalies: Anomaly[] = [];
  const writes = history.filter(
    (op): op is WriteOperation => op.type === "write" && op.register === register,
  );
  const byValue = new Map<string, WriteOperation>();
  for (const write of writes) byValue.set(write.value, write);
  const finalValue = final.values.get(register) ?? null;
  const finalWrite = finalValue === null ? undefined : byValue.get(finalValue);

  for (const write of writes) {
    if (write.outcome !== "ok" || write.value === finalValue) continue;
    const replacer = writes.find(
      (other) =>
        other !== write &&
        other.outcome !== "failed" &&
        other.invokedAt < final.at &&
        !(other.outcome === "ok" && other.completedAt < write.invokedAt),
    );
    const lost = `acknowledged write #${write.id} of ${JSON.stringify(write.value)} is not in the final read`;
    if (replacer === undefined) {
      anomalies.push({
        kind: "lost-write",
        register,
        message: `${lost} (which has ${showValue(finalValue)}), and no other write could have replaced it`,
        operations: [write.id],
      });
    } else if (finalValue === initialValue) {
      anomalies.push({
        kind: "lost-write",
        register,
        message: `${lost}, which has the register's initial value (${showValue(finalValue)}) again`,
        operations: [write.id],
      });
    } else if (
      finalWrite !== undefined &&
      finalWrite.outcome === "ok" &&
      finalWrite.completedAt < write.invokedAt
    ) {
      anomalies.push({
        kind: "lost-write",
        register,
        message: `${lost}, which has ${showValue(finalValue)} of write #${finalWrite.id}, completed before write #${write.id} was invoked`,
        operations: [finalWrite.id, write.id],
      });
    }
  }

  /** Checks one observed value; `read` is undefined for the final read. */
  const observe = (value: string | null, read: Operation | undefined): void => {
    if (value === initialValue) return;
    const where = read === undefined ? "the final read" : `read #${read.id}`;
    const readIds = read === undefined ? [] : [read.id];
    const write = value === null ? undefined : byValue.get(value);
    if (write === undefined) {
      anomalies.push({
        kind: "unknown-value",
        register,
        message: `${where} saw ${showValue(value)}, which no write of the register produced`,
        operations: readIds,
      });
    } else if (write.outcome === "failed") {
      anomalies.push({
        kind: "failed-write-visible",
        register,
        message: `${where} saw ${showValue(value)} of write #${write.id}, which definitely failed (${write.error ?? "no error recorded"})`,
        operations: [write.id, ...readIds],
      });
    }
  };
  for (const op of history) {
    if (op.type !== "read" || op.outcome !== "ok" || !op.values.has(register)) continue;
    observe(op.values.get(register) ?? null, op);
  }
  observe(finalValue, undefined);
  return anomalies;
}
