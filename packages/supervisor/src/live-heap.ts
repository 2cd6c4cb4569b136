/**
 * How much heap a process still holds: what a leak test measures before and
 * after many cycles of the code under test (`@metropolis/supervisor/testing`).
 */
import { setFlagsFromString } from "node:v8";
import { runInNewContext } from "node:vm";

let collect: (() => void) | undefined;

/**
 * V8's `gc()`: the global one when the process was started with
 * `--expose-gc`, else turned on at runtime (jest passes no such flag), after
 * which a fresh context exposes it.
 */
function fullGc(): () => void {
  if (collect) return collect;
  const global: unknown = Reflect.get(globalThis, "gc");
  if (typeof global === "function") {
    collect = () => void Reflect.apply(global, undefined, []);
    return collect;
  }
  setFlagsFromString("--expose-gc");
  const exposed: unknown = runInNewContext("gc");
  if (typeof exposed !== "function") throw new Error("V8 did not expose gc() with --expose-gc");
  collect = () => void Reflect.apply(exposed, undefined, []);
  return collect;
}

/**
 * Bytes of heap in use after full collections (three: what one frees can
 * make more collectable): what the process still holds, garbage aside.
 */
export function liveHeapBytes(): number {
  const gc = fullGc();
  for (let i = 0; i < 3; i++) gc();
  return process.memoryUsage().heapUsed;
}
