import { getEventListeners } from "node:events";
import { ConcurrentGetError, MemoryValue, WatcherClosedError } from "@metropolis/event";
import { settleState } from "./settle-state";
import { waitQueue } from "./value-internals";

describe("MemoryValue", () => {
  it("returns the current value on the first get()", async () => {
    const v = new MemoryValue(42);
    await expect(v.watch().get()).resolves.toBe(42);
  });

  it("blocks the first get() until a value is set", async () => {
    const v = new MemoryValue<string>();
    const p = v.watch().get();
    expect(await settleState(p)).toBe("pending");
    v.set("a");
    await expect(p).resolves.toBe("a");
  });

  it("treats an explicitly passed undefined as a set value", async () => {
    const v = new MemoryValue<string | undefined>(undefined);
    const p = v.watch().get();
    expect(await settleState(p)).toBe("resolved");
    await expect(p).resolves.toBeUndefined();
  });

  it("blocks later get()s until a newer set(), even of equal data", async () => {
    const v = new MemoryValue(1);
    const w = v.watch();
    await w.get();
    const p = w.get();
    expect(await settleState(p)).toBe("pending");
    v.set(1);
    await expect(p).resolves.toBe(1);
    const obj = { a: 1 };
    const o = new MemoryValue(obj);
    const ow = o.watch();
    await ow.get();
    const op = ow.get();
    o.set(obj);
    await expect(op).resolves.toBe(obj);
  });

  it("delivers only the latest value, skipping intermediate ones", async () => {
    const v = new MemoryValue(0);
    const w = v.watch();
    await expect(w.get()).resolves.toBe(0);
    v.set(1);
    v.set(2);
    v.set(3);
    await expect(w.get()).resolves.toBe(3);
    const p = w.get();
    expect(await settleState(p)).toBe("pending");
    v.set(4);
    v.set(5); // the pending get() got 4; 5 is for the next one
    await expect(p).resolves.toBe(4);
    await expect(w.get()).resolves.toBe(5);
  });

  it("fans out one set() to every waiting watcher", async () => {
    const v = new MemoryValue<number>();
    const gets = Array.from({ length: 50 }, () => v.watch().get());
    v.set(7);
    await expect(Promise.all(gets)).resolves.toEqual(Array(50).fill(7));
  });

  it("gives each watcher its own position", async () => {
    const v = new MemoryValue(1);
    const a = v.watch();
    await a.get();
    v.set(2);
    const b = v.watch();
    await expect(b.get()).resolves.toBe(2);
    await expect(a.get()).resolves.toBe(2);
    expect(await settleState(b.get())).toBe("pending");
  });

  describe("filter", () => {
    it("skips non-matching current and later values", async () => {
      const v = new MemoryValue(1);
      const w = v.watch();
      const p = w.get({ filter: (x) => x % 2 === 0 });
      expect(await settleState(p)).toBe("pending");
      v.set(3);
      expect(await settleState(p)).toBe("pending");
      v.set(4);
      await expect(p).resolves.toBe(4);
    });

    it("consumes skipped values: the next get() waits for a newer one", async () => {
      const v = new MemoryValue(1);
      const w = v.watch();
      const p = w.get({ filter: (x) => x > 1 });
      v.set(2);
      await p;
      const q = w.get();
      expect(await settleState(q)).toBe("pending");
      v.set(0);
      await expect(q).resolves.toBe(0);
    });

    it("rejects get() with the filter's error, immediately or on set()", async () => {
      const boom = new Error("boom");
      const v = new MemoryValue(1);
      await expect(
        v.watch().get({
          filter: () => {
            throw boom;
          },
        }),
      ).rejects.toBe(boom);
      const w = v.watch();
      await w.get();
      const p = w.get({
        filter: () => {
          throw boom;
        },
      });
      const other = v.watch();
      await other.get();
      const q = other.get();
      v.set(2);
      await expect(p).rejects.toBe(boom);
      await expect(q).resolves.toBe(2);
    });
  });

  describe("abort", () => {
    it("rejects with the abort reason and leaves the watcher usable", async () => {
      const v = new MemoryValue(1);
      const w = v.watch();
      await w.get();
      const ac = new AbortController();
      const reason = new Error("stop waiting");
      const p = w.get({ signal: ac.signal });
      ac.abort(reason);
      await expect(p).rejects.toBe(reason);
      v.set(2);
      await expect(w.get()).resolves.toBe(2);
    });

    it("does not lose the value the aborted get() would have returned", async () => {
      const v = new MemoryValue<number>();
      const w = v.watch();
      const ac = new AbortController();
      const p = w.get({ signal: ac.signal });
      ac.abort();
      await expect(p).rejects.toBeInstanceOf(DOMException);
      v.set(9);
      await expect(w.get()).resolves.toBe(9);
    });

    it("rejects at once with an already aborted signal", async () => {
      const v = new MemoryValue(1);
      const reason = new Error("already");
      await expect(v.watch().get({ signal: AbortSignal.abort(reason) })).rejects.toBe(reason);
    });

    it("unregisters its abort listener once the get() is satisfied", async () => {
      const v = new MemoryValue<number>();
      const w = v.watch();
      const ac = new AbortController();
      const p = w.get({ signal: ac.signal });
      expect(getEventListeners(ac.signal, "abort")).toHaveLength(1);
      v.set(1);
      await expect(p).resolves.toBe(1);
      expect(getEventListeners(ac.signal, "abort")).toHaveLength(0);
      const q = w.get();
      ac.abort(new Error("late"));
      v.set(2);
      await expect(q).resolves.toBe(2);
    });
  });

  it("rejects a concurrent get() on one watcher with ConcurrentGetError", async () => {
    const v = new MemoryValue<number>();
    const w = v.watch();
    const first = w.get();
    const second = w.get();
    await expect(second).rejects.toBeInstanceOf(ConcurrentGetError);
    await expect(second).rejects.toThrow(/concurrent get\(\)/);
    v.set(1);
    await expect(first).resolves.toBe(1);
  });

  describe("close", () => {
    it("rejects get() on a closed watcher with WatcherClosedError", async () => {
      const v = new MemoryValue(1);
      const w = v.watch();
      w.close();
      w.close();
      await expect(w.get()).rejects.toBeInstanceOf(WatcherClosedError);
      await expect(w.get()).rejects.toThrow(/watcher is closed/);
    });

    it("rejects a pending get() with WatcherClosedError", async () => {
      const v = new MemoryValue<number>();
      const w = v.watch();
      const p = w.get();
      w.close();
      await expect(p).rejects.toBeInstanceOf(WatcherClosedError);
    });

    it("drops a closed watcher from the set()-side queue", async () => {
      const v = new MemoryValue<number>();
      const waiting = v.watch();
      const pending = waiting.get();
      for (let i = 0; i < 1000; i++) {
        const w = v.watch();
        w.get().catch(() => undefined);
        w.close();
      }
      // The one live waiter plus at most a bounded amount of not-yet-compacted garbage.
      expect(waitQueue(v).length).toBeLessThan(130);
      v.set(1);
      await expect(pending).resolves.toBe(1);
      expect(waitQueue(v)).toHaveLength(0);
    });
  });
});
