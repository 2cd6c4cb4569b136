/**
 * A machine's state value as the one line an operator reads in the
 * supervision tree ("curator: leading.leaseUnconfirmed"). XState gives a
 * nested state as an object (`{ leading: "leaseUnconfirmed" }`); the text is
 * its path with dots, the form `snapshot.matches()` takes, so what the
 * operator reads is what an engineer finds in the machine's source. The
 * regions of a parallel state are each given as their own path, joined by
 * ", " in the machine's order.
 */
import type { StateValue } from "xstate";

/**
 * `value` as text: `"idle"` → `idle`, `{ leading: "leaseUnconfirmed" }` →
 * `leading.leaseUnconfirmed`, `{ up: { lease: "held", watch: "synced" } }`
 * (a parallel state) → `up.lease.held, up.watch.synced`.
 */
export function stateValueText(value: StateValue): string {
  const paths: string[] = [];
  collect(value, [], paths);
  return paths.join(", ");
}

/** Adds the path of every active leaf state under `value` (reached by `path`) to `out`. */
function collect(value: StateValue | undefined, path: string[], out: string[]): void {
  if (typeof value === "string") {
    out.push([...path, value].join("."));
    return;
  }
  const keys = value === undefined ? [] : Object.keys(value);
  // An atomic region of a parallel state has an empty object as its value.
  if (keys.length === 0) {
    if (path.length > 0) out.push(path.join("."));
    return;
  }
  for (const key of keys) collect(value?.[key], [...path, key], out);
}
