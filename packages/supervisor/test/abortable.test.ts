import {
  abortable,
  abortableSleep,
  isRunnableName,
  runnableNamePattern,
} from "@metropolis/supervisor";

describe("abortable", () => {
  test("settles as the promise does while the signal is not aborted", async () => {
    const signal = new AbortController().signal;
    await expect(abortable(Promise.resolve(7), signal)).resolves.toBe(7);
    const failure = new Error("refused");
    await expect(abortable(Promise.reject(failure), signal)).rejects.toBe(failure);
  });

  test("rejects with the abort reason as soon as the signal aborts, the promise still pending", async () => {
    const controller = new AbortController();
    const pending = abortable(new Promise<never>(() => undefined), controller.signal);
    const reason = new Error("stopping");
    controller.abort(reason);
    await expect(pending).rejects.toBe(reason);
  });

  test("rejects at once on an aborted signal, and a later rejection of the promise is not unhandled", async () => {
    const reason = new Error("already stopped");
    let fail: (e: Error) => void = () => undefined;
    const late = new Promise<never>((_, reject) => (fail = reject));
    await expect(abortable(late, AbortSignal.abort(reason))).rejects.toBe(reason);
    fail(new Error("too late to matter"));
    await new Promise((r) => setImmediate(r));
  });
});

describe("abortableSleep", () => {
  test("resolves after its time, and rejects with the abort reason when aborted", async () => {
    await expect(abortableSleep(1, new AbortController().signal)).resolves.toBeUndefined();
    await expect(abortableSleep(1)).resolves.toBeUndefined();
    const controller = new AbortController();
    const sleeping = abortableSleep(60_000, controller.signal);
    const reason = new Error("stop");
    controller.abort(reason);
    await expect(sleeping).rejects.toBe(reason);
  });
});

test("isRunnableName is the tree's rule for child names", () => {
  for (const ok of ["a", "etcd", "kube_worker-1", "x".repeat(64)])
    expect(isRunnableName(ok)).toBe(true);
  for (const bad of ["", "A", "a.b", "a b", "x".repeat(65)])
    expect(isRunnableName(bad)).toBe(false);
});

test("isRunnableName agrees with runnableNamePattern on every character and at the length bounds", () => {
  for (let c = 0; c < 0x3000; c++) {
    const name = `a${String.fromCharCode(c)}b`;
    expect([name, isRunnableName(name)]).toEqual([name, runnableNamePattern.test(name)]);
  }
  for (const length of [0, 1, 63, 64, 65])
    expect(isRunnableName("a".repeat(length))).toBe(runnableNamePattern.test("a".repeat(length)));
});
