import type { MemoryValue } from "@metropolis/event";

/**
 * What a test may inspect of a MemoryValue's private state (ValueState and
 * MemoryWatcher in src/memory-value.ts), to check that closed watchers are
 * released. If those fields are renamed, this throws and the tests fail.
 */
export interface QueuedWatcher {
  /** Set while the watcher's get() is pending. */
  resolve: unknown;
  closed: boolean;
}

/** The set()-side queue of `value`: watchers with a pending get(), plus not yet compacted stale entries. */
export function waitQueue<T>(value: MemoryValue<T>): QueuedWatcher[] {
  const queue = (value as unknown as { state: { queue: QueuedWatcher[] } }).state.queue;
  if (!Array.isArray(queue)) throw new Error("MemoryValue internals changed: no state.queue array");
  return queue;
}

/** Number of watchers of `value` with a pending get(). */
export function waitingCount<T>(value: MemoryValue<T>): number {
  return waitQueue(value).filter((w) => w.resolve !== undefined).length;
}
