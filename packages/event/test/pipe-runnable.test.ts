import { MemoryValue } from "@metropolis/event";
import { pipeRunnable } from "../src/pipe-runnable";
import { MockContext } from "@metropolis/supervisor/testing";
import { settleState } from "./settle-state";
import { waitQueue, waitingCount } from "./value-internals";

describe("pipeRunnable", () => {
  it("forwards every update to a Value sink and is healthy once started", async () => {
    const source = new MemoryValue(1);
    const sink = new MemoryValue<number>();
    const ctx = new MockContext("root.pipe");
    const run = pipeRunnable(source, sink)(ctx);
    expect(ctx.healthyCalls).toBe(1);
    const out = sink.watch();
    await expect(out.get()).resolves.toBe(1);
    source.set(2);
    await expect(out.get()).resolves.toBe(2);
    source.set(2);
    await expect(out.get()).resolves.toBe(2);
    ctx.abort();
    await expect(run).resolves.toBeUndefined();
    expect(ctx.failures).toEqual([]);
  });

  it("awaits a function sink, then forwards only the newest value", async () => {
    const source = new MemoryValue("a");
    const seen: string[] = [];
    let release!: () => void;
    let called!: () => void;
    let nextCall = new Promise<void>((r) => (called = r));
    const ctx = new MockContext();
    const run = pipeRunnable(source, (v, signal) => {
      expect(signal).toBe(ctx.signal);
      seen.push(v);
      called();
      return new Promise<void>((r) => (release = r));
    })(ctx);
    await nextCall;
    nextCall = new Promise<void>((r) => (called = r));
    source.set("b");
    source.set("c");
    expect(await settleState(nextCall)).toBe("pending");
    expect(seen).toEqual(["a"]);
    release();
    await nextCall;
    expect(seen).toEqual(["a", "c"]);
    release();
    await new Promise<void>((r) => setImmediate(r));
    expect(waitingCount(source)).toBe(1);
    const [watcher] = waitQueue(source);
    ctx.abort();
    await expect(run).resolves.toBeUndefined();
    expect(watcher.closed).toBe(true);
    expect(waitingCount(source)).toBe(0);
  });

  it("returns at once when started with an aborted signal", async () => {
    const ctx = new MockContext();
    ctx.abort();
    await expect(pipeRunnable(new MemoryValue(1), () => undefined)(ctx)).resolves.toBeUndefined();
  });

  it("fails when the sink throws, so the supervisor restarts it", async () => {
    const ctx = new MockContext();
    const boom = new Error("sink broke");
    const run = pipeRunnable(new MemoryValue(1), () => {
      throw boom;
    })(ctx);
    await expect(run).rejects.toBe(boom);
  });
});
