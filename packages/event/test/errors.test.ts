import {
  BacklogDone,
  ConcurrentGetError,
  DecoderError,
  EventError,
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
});
