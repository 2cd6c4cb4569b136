import { MemoryValue, WatcherClosedError } from "@metropolis/event";

describe("async iteration over a watcher", () => {
  it("yields the current value, then each newer one", async () => {
    const v = new MemoryValue(0);
    const seen: number[] = [];
    const w = v.watch();
    for await (const x of w) {
      seen.push(x);
      if (x === 3) break;
      v.set(x + 1);
    }
    expect(seen).toEqual([0, 1, 2, 3]);
  });

  it("closes the watcher when the loop breaks", async () => {
    const v = new MemoryValue(1);
    const w = v.watch();
    for await (const x of w) {
      expect(x).toBe(1);
      break;
    }
    await expect(w.get()).rejects.toBeInstanceOf(WatcherClosedError);
  });

  it("closes the watcher when the loop body throws", async () => {
    const v = new MemoryValue(1);
    const w = v.watch();
    const boom = new Error("boom");
    await expect(
      (async () => {
        for await (const _ of w) throw boom;
      })(),
    ).rejects.toBe(boom);
    await expect(w.get()).rejects.toBeInstanceOf(WatcherClosedError);
  });

  it("ends the loop normally when the watcher is closed elsewhere", async () => {
    const v = new MemoryValue(1);
    const w = v.watch();
    const seen: number[] = [];
    const loop = (async () => {
      for await (const x of w) {
        seen.push(x);
        // Closing while the loop waits in get() for the next value.
        setImmediate(() => w.close());
      }
    })();
    await expect(loop).resolves.toBeUndefined();
    expect(seen).toEqual([1]);
  });
});
