/**
 * DefragmentGate: one defragmentation at a time, a minute apart, on the
 * monotonic clock; refusals are RESOURCE_EXHAUSTED and say when to ask again.
 */
import { status } from "@grpc/grpc-js";
import { DefragmentGate, defragmentPauseMs } from "../src/defragment-gate";

describe("DefragmentGate", () => {
  it("runs one at a time, refuses another for a minute after, then runs again", async () => {
    let now = 1_000;
    const gate = new DefragmentGate(() => now);
    let release = () => undefined as void;
    const first = gate.run(() => new Promise<string>((r) => (release = () => r("done"))));
    await expect(gate.run(async () => "second")).rejects.toMatchObject({
      code: status.RESOURCE_EXHAUSTED,
      message: "a defragmentation is running; ask again once it ended",
    });
    release();
    await expect(first).resolves.toBe("done");
    now += defragmentPauseMs - 1_500;
    await expect(gate.run(async () => "too soon")).rejects.toMatchObject({
      code: status.RESOURCE_EXHAUSTED,
      message: expect.stringMatching(/ended 58 s ago: ask again in 2 s/),
    });
    now += 1_500;
    await expect(gate.run(async () => "again")).resolves.toBe("again");
  });

  it("counts a failed defragmentation as one", async () => {
    let now = 0;
    const gate = new DefragmentGate(() => now);
    await expect(gate.run(() => Promise.reject(new Error("etcd said no")))).rejects.toThrow(
      "etcd said no",
    );
    await expect(gate.run(async () => "x")).rejects.toMatchObject({
      code: status.RESOURCE_EXHAUSTED,
    });
    now += defragmentPauseMs;
    await expect(gate.run(async () => "x")).resolves.toBe("x");
  });
});
