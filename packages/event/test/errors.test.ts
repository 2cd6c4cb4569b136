import {
  BacklogDone,
  ConcurrentGetError,
  DecoderError,
  EventError,
  MemoryValue,
  WatcherClosedError,
} from "@metropolis/event";

describe("errors", () => {
  it("are distinct Error classes with their own names", () => {
    const errors = [
      new WatcherClosedError(),
      new ConcurrentGetError(),
      new BacklogDone(),
      new DecoderError("/k", new Error("x")),
    ];
    expect(errors.map((e) => e.name)).toEqual([
      "WatcherClosedError",
      "ConcurrentGetError",
      "BacklogDone",
      "DecoderError",
    ]);
    for (const e of errors) expect(e).toBeInstanceOf(EventError);
    expect(new BacklogDone()).not.toBeInstanceOf(WatcherClosedError);
  });

  it("DecoderError names the key and keeps the decoder's error as cause", () => {
    const cause = new SyntaxError("bad json");
    const e = new DecoderError("/nodes/a", cause);
    expect(e.key).toBe("/nodes/a");
    expect(e.cause).toBe(cause);
    expect(e.message).toBe('decoding etcd key "/nodes/a" failed: bad json');
  });

  it("a get() pending at close() ends with a WatcherClosedError without frames; a get() after close() has them", async () => {
    const w = new MemoryValue<number>().watch();
    const pending = w.get();
    w.close();
    const closed: unknown = await pending.catch((e: unknown) => e);
    if (!(closed instanceof WatcherClosedError)) throw new Error(`not closed: ${String(closed)}`);
    expect(closed.stack).toBe(`WatcherClosedError: ${closed.message}`);
    const late: unknown = await w.get().catch((e: unknown) => e);
    if (!(late instanceof WatcherClosedError)) throw new Error(`not closed: ${String(late)}`);
    expect(late.stack?.split("\n").length).toBeGreaterThan(1);
  });
});
