/**
 * A run's signal (run-signal.ts) must pass for Node's own AbortSignal in
 * everything a service does with `ctx.signal`. Each behaviour is checked on
 * both: a native AbortController's signal and a run's signal, with the same
 * expectations.
 */
import { spawn } from "node:child_process";
import {
  addAbortListener,
  defaultMaxListeners,
  getEventListeners,
  getMaxListeners,
  once,
  setMaxListeners,
} from "node:events";
import { createServer, type Server } from "node:http";
import { setTimeout as delay } from "node:timers/promises";
import { inspect } from "node:util";
import { supervise, type RunContext } from "@metropolis/supervisor";
import { MockContext } from "@metropolis/supervisor/testing";
import { abortRunSignal, createRunSignal, RunSignal, runSignalsLight } from "../src/run-signal";
import { deferred, quiet } from "./helpers";

interface Subject {
  signal: AbortSignal;
  abort(reason: unknown): void;
}

const kinds: [string, () => Subject][] = [
  [
    "native AbortSignal",
    () => {
      const c = new AbortController();
      return { signal: c.signal, abort: (r) => c.abort(r) };
    },
  ],
  [
    "run signal",
    () => {
      const signal = createRunSignal();
      return { signal, abort: (r) => abortRunSignal(signal, r) };
    },
  ],
];

test("this Node takes run signals for AbortSignals (else every run would fall back to AbortController)", () => {
  expect(runSignalsLight).toBe(true);
  expect(new MockContext().signal).toBeInstanceOf(RunSignal);
});

test("a supervised run's ctx.signal is a run signal, aborted with the tree's reason when stopped", async () => {
  let signal: AbortSignal | undefined;
  const healthy = deferred();
  const sup = supervise(
    async (ctx: RunContext) => {
      signal = ctx.signal;
      ctx.healthy();
      healthy.resolve();
      await once(ctx.signal, "abort");
    },
    { logger: quiet() },
  );
  await healthy.promise;
  expect(signal).toBeInstanceOf(RunSignal);
  await sup.stop({ timeoutMs: 5000 });
  expect(signal?.aborted).toBe(true);
  expect(signal?.reason).toBeInstanceOf(Error);
  expect(String(signal?.reason)).toMatch(/supervisor stopped/);
});

test("a listener that throws is reported as an uncaught exception, and the next one still runs", () => {
  const ctx = new MockContext("root.t");
  const signal = ctx.signal;
  const failure = new Error("listener failed");
  // As Node's EventTarget does (which calls its own nextTick, out of a
  // test's reach): by throwing from a process.nextTick callback. The test
  // takes those callbacks instead of letting them crash the test process.
  const ticks: ((...args: unknown[]) => void)[] = [];
  const nextTick = jest.spyOn(process, "nextTick").mockImplementation((cb) => {
    ticks.push((...args) => Reflect.apply(cb, undefined, args));
  });
  let next = false;
  try {
    signal.addEventListener("abort", () => {
      throw failure;
    });
    signal.addEventListener("abort", () => (next = true));
    ctx.abort(new Error("x"));
  } finally {
    nextTick.mockRestore();
  }
  expect(next).toBe(true);
  const thrown = ticks.map((cb) => {
    try {
      cb();
      return undefined;
    } catch (e) {
      return e;
    }
  });
  expect(thrown).toContain(failure);
});

test("more listeners than its limit: one MaxListenersExceededWarning, as Node's signals emit", () => {
  const signal = createRunSignal();
  const warn = jest.spyOn(process, "emitWarning").mockImplementation(() => undefined);
  try {
    setMaxListeners(2, signal);
    signal.addEventListener("abort", () => undefined);
    signal.addEventListener("other", () => undefined);
    signal.addEventListener("abort", () => undefined);
    expect(warn).not.toHaveBeenCalled();
    signal.addEventListener("abort", () => undefined);
    signal.addEventListener("abort", () => undefined);
    expect(warn).toHaveBeenCalledTimes(1);
    expect(warn.mock.calls[0][0]).toMatchObject({
      name: "MaxListenersExceededWarning",
      type: "abort",
      count: 3,
      target: signal,
      message: expect.stringMatching(/3 abort listeners added .* MaxListeners is 2/),
    });
  } finally {
    warn.mockRestore();
  }
});

describe.each(kinds)("%s", (_kind, make) => {
  test("is an AbortSignal, not aborted, with no reason", () => {
    const { signal } = make();
    expect(signal).toBeInstanceOf(AbortSignal);
    expect(signal).toBeInstanceOf(EventTarget);
    expect(signal.aborted).toBe(false);
    expect(signal.reason).toBeUndefined();
    expect(() => signal.throwIfAborted()).not.toThrow();
    expect(Object.prototype.toString.call(signal)).toBe("[object AbortSignal]");
    expect(inspect(signal)).toMatch(/aborted: false/);
  });

  test("abort: sets aborted and reason once, calls listeners in order with an abort event targeted at the signal", () => {
    const { signal, abort } = make();
    const calls: string[] = [];
    let target: EventTarget | null = null;
    let calledOnSignal = false;
    signal.addEventListener("abort", function (this: unknown, e) {
      calls.push(`a:${e.type}`);
      target = e.target;
      calledOnSignal = this === signal;
    });
    signal.onabort = () => calls.push("onabort");
    signal.addEventListener("abort", { handleEvent: () => calls.push("object") });
    signal.addEventListener("other", () => calls.push("other"));
    const reason = new Error("stop");
    abort(reason);
    abort(new Error("again"));
    expect(calls).toEqual(["a:abort", "onabort", "object"]);
    expect(target).toBe(signal);
    expect(calledOnSignal).toBe(true);
    expect(signal.aborted).toBe(true);
    expect(signal.reason).toBe(reason);
    expect(() => signal.throwIfAborted()).toThrow(reason);
    expect(inspect(signal)).toMatch(/aborted: true/);
  });

  test("aborted without a reason: an AbortError DOMException", () => {
    const { signal, abort } = make();
    abort(undefined);
    expect(signal.reason).toBeInstanceOf(DOMException);
    expect(signal.reason).toMatchObject({ name: "AbortError" });
  });

  test("a listener added twice is called once; removed, not at all; once, removed after its call", () => {
    const { signal, abort } = make();
    let twice = 0;
    let removed = 0;
    const add = () => twice++;
    const gone = () => removed++;
    signal.addEventListener("abort", add);
    signal.addEventListener("abort", add);
    signal.addEventListener("abort", gone);
    signal.removeEventListener("abort", gone);
    const onceCalls: number[] = [];
    signal.addEventListener("abort", () => onceCalls.push(1), { once: true });
    abort(new Error("x"));
    expect(twice).toBe(1);
    expect(removed).toBe(0);
    expect(onceCalls).toEqual([1]);
  });

  test("a listener with a signal option leaves when that signal aborts", () => {
    const { signal, abort } = make();
    const leave = new AbortController();
    let called = 0;
    signal.addEventListener("abort", () => called++, { signal: leave.signal });
    signal.addEventListener("abort", () => called++, { signal: AbortSignal.abort() });
    leave.abort();
    abort(new Error("x"));
    expect(called).toBe(0);
  });

  test("a once listener that adds itself again during its call stays for the next dispatch", () => {
    const { signal } = make();
    let calls = 0;
    const again = () => {
      calls++;
      signal.addEventListener("ping", again, { once: true });
    };
    signal.addEventListener("ping", again, { once: true });
    signal.dispatchEvent(new Event("ping"));
    expect(getEventListeners(signal, "ping")).toEqual([again]);
    signal.dispatchEvent(new Event("ping"));
    expect(calls).toBe(2);
  });

  test("an abort calls each of many once listeners once, and keeps none", () => {
    const { signal, abort } = make();
    setMaxListeners(0, signal);
    let calls = 0;
    for (let i = 0; i < 2000; i++) signal.addEventListener("abort", () => calls++, { once: true });
    const kept = () => calls++;
    signal.addEventListener("ping", kept, { once: true });
    abort(new Error("x"));
    expect(calls).toBe(2000);
    expect(getEventListeners(signal, "abort")).toEqual([]);
    expect(getEventListeners(signal, "ping")).toEqual([kept]);
  });

  test("listeners added during the dispatch are not called for it; removed ones are not either", () => {
    const { signal, abort } = make();
    const calls: string[] = [];
    const second = () => calls.push("second");
    signal.addEventListener("abort", () => {
      calls.push("first");
      signal.removeEventListener("abort", second);
      signal.addEventListener("abort", () => calls.push("late"));
    });
    signal.addEventListener("abort", second);
    abort(new Error("x"));
    expect(calls).toEqual(["first"]);
  });

  test("stopImmediatePropagation stops the listeners after it, but not Node's own (addAbortListener)", () => {
    const { signal, abort } = make();
    const calls: string[] = [];
    signal.addEventListener("abort", (e) => {
      calls.push("stopper");
      e.stopImmediatePropagation();
    });
    signal.addEventListener("abort", () => calls.push("stopped"));
    addAbortListener(signal, () => calls.push("node"));
    abort(new Error("x"));
    expect(calls).toEqual(["stopper", "node"]);
  });

  test("events.once and addAbortListener resolve on abort; on an aborted signal at once", async () => {
    const { signal, abort } = make();
    const waited = once(signal, "abort");
    let heard = false;
    addAbortListener(signal, () => (heard = true));
    abort(new Error("x"));
    const [event] = await waited;
    expect(event).toBeInstanceOf(Event);
    expect(heard).toBe(true);
    let late = false;
    addAbortListener(signal, () => (late = true));
    await new Promise((r) => queueMicrotask(() => r(undefined)));
    expect(late).toBe(true);
  });

  test("AbortSignal.any composites abort with it and with its reason, also nested and already aborted", () => {
    const { signal, abort } = make();
    const other = new AbortController();
    const composite = AbortSignal.any([signal, other.signal]);
    const nested = AbortSignal.any([composite, AbortSignal.timeout(60_000)]);
    let heard: unknown;
    composite.addEventListener("abort", () => (heard = composite.reason));
    const reason = new Error("stop");
    abort(reason);
    expect(composite.aborted).toBe(true);
    expect(heard).toBe(reason);
    expect(nested.reason).toBe(reason);
    expect(AbortSignal.any([signal]).reason).toBe(reason);
    expect(other.signal.aborted).toBe(false);
  });

  test("a composite's other source aborts it without touching the signal", () => {
    const { signal } = make();
    const other = new AbortController();
    const composite = AbortSignal.any([signal, other.signal]);
    other.abort(new Error("other"));
    expect(composite.aborted).toBe(true);
    expect(signal.aborted).toBe(false);
  });

  test("timers/promises and fs reject with its reason", async () => {
    const { signal, abort } = make();
    const sleeping = delay(60_000, undefined, { signal });
    const reason = new Error("stop");
    abort(reason);
    await expect(sleeping).rejects.toMatchObject({ name: "AbortError", cause: reason });
    const fs = await import("node:fs/promises");
    await expect(fs.readFile(__filename, { signal })).rejects.toMatchObject({
      name: "AbortError",
    });
  });

  test("events' listener introspection works on it: getEventListeners, get/setMaxListeners", () => {
    const { signal } = make();
    const a = () => undefined;
    const b = { handleEvent: () => undefined };
    signal.addEventListener("abort", a);
    signal.addEventListener("abort", b);
    signal.addEventListener("other", () => undefined);
    expect(getEventListeners(signal, "abort")).toEqual([a, b]);
    expect(getMaxListeners(signal)).toBe(defaultMaxListeners);
    setMaxListeners(100, signal);
    expect(getMaxListeners(signal)).toBe(100);
    expect(getMaxListeners(make().signal)).toBe(defaultMaxListeners);
  });

  test("child_process.spawn kills the child when it aborts", async () => {
    const { signal, abort } = make();
    const child = spawn(process.execPath, ["-e", "setInterval(() => {}, 1000)"], { signal });
    // once(child, "close") would reject on the AbortError the child emits as "error".
    const closed = new Promise<[number | null, string | null]>((resolve) =>
      child.once("close", (code, killed) => resolve([code, killed])),
    );
    const errors: unknown[] = [];
    child.on("error", (e) => errors.push(e));
    await once(child, "spawn");
    abort(new Error("stop"));
    const [code, killSignal] = await closed;
    expect(code).toBeNull();
    expect(killSignal).toBe("SIGTERM");
    expect(errors).toEqual([expect.objectContaining({ name: "AbortError" })]);
  });

  test("fetch rejects with its reason when it aborts mid-request", async () => {
    const { signal, abort } = make();
    let answer: () => void = () => undefined;
    const server: Server = createServer((_req, res) => {
      answer = () => res.end("late");
    });
    server.listen(0, "127.0.0.1");
    await once(server, "listening");
    try {
      const address = server.address();
      if (typeof address !== "object" || address === null) throw new Error("no address");
      const { port } = address;
      const requested = new Promise<void>((r) => server.once("request", () => r()));
      const fetching = fetch(`http://127.0.0.1:${port}/`, { signal });
      await requested;
      const reason = new Error("stop");
      abort(reason);
      await expect(fetching).rejects.toBe(reason);
    } finally {
      answer();
      server.closeAllConnections();
      server.close();
    }
  });
});
