import { MemoryValue, waitFor } from "@metropolis/event";
import { settleState } from "./settle-state";
import { waitQueue } from "./value-internals";

describe("waitFor", () => {
  it("resolves with the current value when it matches", async () => {
    await expect(waitFor(new MemoryValue(5), (x) => x > 3)).resolves.toBe(5);
  });

  it("resolves with the first later value that matches", async () => {
    const v = new MemoryValue(0);
    const p = waitFor(v, (x) => x >= 2);
    v.set(1);
    expect(await settleState(p)).toBe("pending");
    v.set(2);
    v.set(3);
    await expect(p).resolves.toBe(2);
  });

  it("closes its watcher once resolved", async () => {
    const v = new MemoryValue(0);
    const p = waitFor(v, (x) => x === 1);
    expect(await settleState(p)).toBe("pending");
    expect(waitQueue(v)).toHaveLength(1);
    const [watcher] = waitQueue(v);
    v.set(1);
    await p;
    expect(waitQueue(v)).toHaveLength(0);
    expect(watcher.closed).toBe(true);
  });

  it("rejects with the abort reason and releases its watcher", async () => {
    const v = new MemoryValue(0);
    const ac = new AbortController();
    const reason = new Error("gave up");
    const p = waitFor(v, (x) => x === 1, ac.signal);
    const waiter = waitQueue(v)[0];
    ac.abort(reason);
    await expect(p).rejects.toBe(reason);
    expect(waiter.closed).toBe(true);
    expect(waiter.resolve).toBeUndefined();
  });
});
