import { combine, ConcurrentGetError, MemoryValue, WatcherClosedError } from "@metropolis/event";
import type { GetOptions, Watchable, Watcher } from "@metropolis/event";
import { settleState } from "./settle-state";
import { waitingCount } from "./value-internals";

describe("combine", () => {
  it("delivers the first object once every input has a value", async () => {
    const a = new MemoryValue(1);
    const b = new MemoryValue<string>();
    const w = combine({ a, b }).watch();
    const p = w.get();
    expect(await settleState(p)).toBe("pending");
    b.set("x");
    await expect(p).resolves.toEqual({ a: 1, b: "x" });
  });

  it("is typed after its inputs", async () => {
    const w = combine({ n: new MemoryValue(1), s: new MemoryValue("s") }).watch();
    const { n, s } = await w.get();
    const typed: [number, string] = [n, s];
    expect(typed).toEqual([1, "s"]);
  });

  it("keeps any key as data, even __proto__", async () => {
    const sources = JSON.parse('{"__proto__": 0, "x": 0}') as Record<string, MemoryValue<number>>;
    sources["__proto__"] = new MemoryValue(1);
    sources.x = new MemoryValue(2);
    const got = await combine(sources).watch().get();
    expect(Object.keys(got)).toEqual(["__proto__", "x"]);
    expect(Object.getPrototypeOf(got)).toBe(Object.prototype);
  });

  it("updates when any input changes, and only then", async () => {
    const a = new MemoryValue(1);
    const b = new MemoryValue(10);
    const w = combine({ a, b }).watch();
    await expect(w.get()).resolves.toEqual({ a: 1, b: 10 });
    const p = w.get();
    expect(await settleState(p)).toBe("pending");
    a.set(2);
    await expect(p).resolves.toEqual({ a: 2, b: 10 });
    const q = w.get();
    expect(await settleState(q)).toBe("pending");
    b.set(20);
    await expect(q).resolves.toEqual({ a: 2, b: 20 });
  });

  it("collapses changes made between two get()s into the latest object", async () => {
    const a = new MemoryValue(1);
    const b = new MemoryValue(10);
    const w = combine({ a, b }).watch();
    await w.get();
    a.set(2);
    b.set(20);
    a.set(3);
    await expect(w.get()).resolves.toEqual({ a: 3, b: 20 });
    expect(await settleState(w.get())).toBe("pending");
  });

  it("applies a filter to the combined object", async () => {
    const ready = new MemoryValue(false);
    const n = new MemoryValue(0);
    const w = combine({ ready, n }).watch();
    const p = w.get({ filter: (v) => v.ready && v.n > 1 });
    n.set(5);
    expect(await settleState(p)).toBe("pending");
    ready.set(true);
    await expect(p).resolves.toEqual({ ready: true, n: 5 });
  });

  it("rejects an aborted get() and keeps the update for the next one", async () => {
    const a = new MemoryValue(1);
    const w = combine({ a }).watch();
    await w.get();
    const ac = new AbortController();
    const reason = new Error("abort");
    const p = w.get({ signal: ac.signal });
    ac.abort(reason);
    await expect(p).rejects.toBe(reason);
    a.set(2);
    await expect(w.get()).resolves.toEqual({ a: 2 });
  });

  it("rejects a concurrent get() and a get() after close()", async () => {
    const w = combine({ a: new MemoryValue<number>() }).watch();
    const p = w.get();
    await expect(w.get()).rejects.toBeInstanceOf(ConcurrentGetError);
    w.close();
    await expect(p).rejects.toBeInstanceOf(WatcherClosedError);
    await expect(w.get()).rejects.toBeInstanceOf(WatcherClosedError);
  });

  it("subscribes to its inputs per watcher and releases them on close", async () => {
    const closed: string[] = [];
    const a = new MemoryValue(1);
    const tracked = (name: string, src: Watchable<number>): Watchable<number> => ({
      watch: () => {
        const inner = src.watch();
        return {
          get: (opts?: GetOptions<number>) => inner.get(opts),
          close: () => {
            closed.push(name);
            inner.close();
          },
          [Symbol.asyncIterator]: () => inner[Symbol.asyncIterator](),
        };
      },
    });
    const c = combine({ x: tracked("x", a), y: tracked("y", a) });
    const w1 = c.watch();
    const w2 = c.watch();
    await w1.get();
    const pending = w1.get();
    w1.close();
    await expect(pending).rejects.toBeInstanceOf(WatcherClosedError);
    expect(closed.sort()).toEqual(["x", "y"]);
    expect(waitingCount(a)).toBe(0);
    await expect(w2.get()).resolves.toEqual({ x: 1, y: 1 });
    w2.close();
    expect(closed).toHaveLength(4);
  });

  it("returns an input's error from get() and keeps delivering later updates", async () => {
    const boom = new Error("decode failed");
    const a = new MemoryValue(1);
    let failNext = false;
    const flaky: Watchable<number> = {
      watch: (): Watcher<number> => {
        const inner = a.watch();
        return {
          get: async (opts) => {
            const v = await inner.get(opts);
            if (failNext) {
              failNext = false;
              throw boom;
            }
            return v;
          },
          close: () => inner.close(),
          [Symbol.asyncIterator]: () => inner[Symbol.asyncIterator](),
        };
      },
    };
    const w = combine({ a: flaky }).watch();
    await expect(w.get()).resolves.toEqual({ a: 1 });
    failNext = true;
    a.set(2);
    await expect(w.get()).rejects.toBe(boom);
    a.set(3);
    await expect(w.get()).resolves.toEqual({ a: 3 });
  });

  it("works as an async iterable", async () => {
    const a = new MemoryValue(1);
    const b = new MemoryValue(2);
    const sums: number[] = [];
    for await (const { a: x, b: y } of combine({ a, b }).watch()) {
      sums.push(x + y);
      if (sums.length === 2) break;
      a.set(10);
    }
    expect(sums).toEqual([3, 12]);
    expect(waitingCount(a)).toBe(0);
  });
});
