/**
 * Whether a promise has settled once all work already queued has run. Values
 * in this package propagate through promise jobs only, so one macrotask turn
 * (setImmediate runs after every queued microtask) is enough to tell "still
 * waiting" from "delivered": this is a condition check, not a timing guess.
 */
export type SettleState = "pending" | "resolved" | "rejected";

export async function settleState(p: Promise<unknown>): Promise<SettleState> {
  let state: SettleState = "pending";
  p.then(
    () => (state = "resolved"),
    () => (state = "rejected"),
  );
  await new Promise<void>((resolve) => setImmediate(resolve));
  return state;
}
