import { ConcurrentGetError, map, MemoryValue, WatcherClosedError } from "@metropolis/event";
import { settleState } from "./settle-state";
import { waitQueue, waitingCount } from "./value-internals";

describe("map", () => {
  it("delivers f of the current and each newer value", async () => {
    const v = new MemoryValue(2);
    const w = map(v, (x) => `n=${x}`).watch();
    await expect(w.get()).resolves.toBe("n=2");
    const p = w.get();
    expect(await settleState(p)).toBe("pending");
    v.set(3);
    await expect(p).resolves.toBe("n=3");
  });

  it("filters on mapped values", async () => {
    const v = new MemoryValue(1);
    const w = map(v, (x) => x * 10).watch();
    const p = w.get({ filter: (y) => y >= 30 });
    v.set(2);
    expect(await settleState(p)).toBe("pending");
    v.set(3);
    await expect(p).resolves.toBe(30);
  });

  it("rejects with the error of f and stays usable", async () => {
    const v = new MemoryValue(0);
    const w = map(v, (x) => {
      if (x === 0) throw new Error("zero");
      return 1 / x;
    }).watch();
    await expect(w.get()).rejects.toThrow("zero");
    v.set(4);
    await expect(w.get()).resolves.toBe(0.25);
  });

  it("rejects an aborted get() and stays usable", async () => {
    const v = new MemoryValue(1);
    const w = map(v, (x) => x + 1).watch();
    await w.get();
    const ac = new AbortController();
    const p = w.get({ signal: ac.signal });
    ac.abort(new Error("abort"));
    await expect(p).rejects.toThrow("abort");
    v.set(5);
    await expect(w.get()).resolves.toBe(6);
  });

  it("rejects a concurrent get()", async () => {
    const v = new MemoryValue<number>();
    const w = map(v, (x) => x).watch();
    const p = w.get();
    await expect(w.get()).rejects.toBeInstanceOf(ConcurrentGetError);
    v.set(1);
    await expect(p).resolves.toBe(1);
  });

  it("closes its source watcher on close()", async () => {
    const v = new MemoryValue<number>();
    const w = map(v, (x) => x).watch();
    const p = w.get();
    expect(waitQueue(v)).toHaveLength(1);
    w.close();
    await expect(p).rejects.toBeInstanceOf(WatcherClosedError);
    await expect(w.get()).rejects.toBeInstanceOf(WatcherClosedError);
    expect(waitingCount(v)).toBe(0);
  });

  it("closes the watcher when a for-await loop breaks", async () => {
    const v = new MemoryValue(1);
    const w = map(v, (x) => -x).watch();
    for await (const y of w) {
      expect(y).toBe(-1);
      break;
    }
    await expect(w.get()).rejects.toBeInstanceOf(WatcherClosedError);
  });
});
