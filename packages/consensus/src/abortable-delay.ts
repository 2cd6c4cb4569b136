import { setTimeout as delay } from "node:timers/promises";

/** Waits `ms`, rejecting with the abort reason as soon as `signal` aborts. */
export function abortableDelay(ms: number, signal: AbortSignal): Promise<void> {
  return delay(ms, undefined, { signal }).then(() => undefined);
}
