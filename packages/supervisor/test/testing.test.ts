import {
  ChildStartError,
  DuplicateNameError,
  InvalidNameError,
  SignalMisuseError,
  maxStatusLength,
  type RunContext,
} from "@metropolis/supervisor";
import {
  HarnessTimeoutError,
  MockContext,
  UnexpectedDeathError,
  startOnMock,
  testHarness,
} from "@metropolis/supervisor/testing";
import { deferred, serve } from "./helpers";

/** The kind of runnable a service author unit-tests: starts children, then serves. */
async function launcher(ctx: RunContext): Promise<void> {
  ctx.logger.info("launching");
  ctx.runGroup({ consensus: serve, curator: serve });
  ctx.run("status", serve, { restart: "transient" });
  ctx.healthy();
  await ctx.untilAborted();
}

describe("MockContext", () => {
  it("records children, signals and log lines", async () => {
    const ctx = new MockContext("root.role");
    const result = launcher(ctx);
    expect(ctx.children.map((c) => [c.name, c.group, c.opts])).toEqual([
      ["consensus", ["consensus", "curator"], {}],
      ["curator", ["consensus", "curator"], {}],
      ["status", undefined, { restart: "transient" }],
    ]);
    expect(ctx.state).toBe("healthy");
    expect(ctx.healthyCalls).toBe(1);
    await new Promise((r) => setImmediate(r));
    expect(ctx.lines.map((l) => `${l.dn} ${l.level} ${l.message}`)).toEqual([
      "root.role info launching",
    ]);
    ctx.abort();
    await expect(result).resolves.toBeUndefined();
  });

  it("enforces the supervisor's rules", () => {
    const ctx = new MockContext();
    expect(() => ctx.run("Bad Name", serve)).toThrow(InvalidNameError);
    ctx.run("a", serve);
    expect(() => ctx.run("a", serve)).toThrow(DuplicateNameError);
    ctx.subLogger("log");
    expect(() => ctx.run("log", serve)).toThrow(DuplicateNameError);
    expect(() => ctx.subLogger("a")).toThrow(DuplicateNameError);
    ctx.done();
    expect(ctx.failures[0]).toBeInstanceOf(SignalMisuseError);
    expect(ctx.signal.aborted).toBe(true);
    const late = new MockContext();
    late.healthy();
    expect(() => late.run("x", serve)).toThrow(ChildStartError);
  });

  it("records status texts as the tree keeps them, and the one it would show now", () => {
    const ctx = new MockContext("root.curator");
    expect(ctx.currentStatus).toBeUndefined();
    ctx.status("following");
    ctx.status("leading\nlease unconfirmed");
    ctx.status("y".repeat(maxStatusLength + 1));
    expect(ctx.currentStatus).toBe(`${"y".repeat(maxStatusLength - 1)}…`);
    ctx.status("");
    expect(ctx.statuses).toEqual([
      "following",
      "leading lease unconfirmed",
      `${"y".repeat(maxStatusLength - 1)}…`,
      "",
    ]);
    expect(ctx.currentStatus).toBeUndefined();
  });

  it("runs a recorded child one level down, with the abort passed on", async () => {
    const ctx = new MockContext("root.role");
    void launcher(ctx);
    const { ctx: child, result } = ctx.runChild("curator");
    expect(child.dn).toBe("root.role.curator");
    expect(child.state).toBe("healthy");
    ctx.abort();
    await expect(result).resolves.toBeUndefined();
    expect(child.signal.aborted).toBe(true);
    expect(() => ctx.runChild("nope")).toThrow('root.role: no child named "nope" was started');
  });
});

describe("testHarness", () => {
  it("fails a wait at once when a runnable dies unexpectedly, and cleanup reports it", async () => {
    const h = testHarness(async (ctx) => {
      ctx.run("bad", async () => Promise.reject(new Error("boom")));
      await serve(ctx);
    });
    await expect(h.waitFor("root.never", "healthy")).rejects.toBeInstanceOf(UnexpectedDeathError);
    await expect(h.cleanup()).rejects.toThrow("unexpected failure: root.bad: boom");
  });

  it("cleanup names what is still running after stop", async () => {
    const release = deferred();
    const h = testHarness(async (ctx) => {
      ctx.run("stuck", async (c) => (c.healthy(), release.promise));
      await serve(ctx);
    });
    await h.waitFor("root.stuck", "healthy");
    await expect(h.cleanup({ timeoutMs: 20 })).rejects.toThrow(
      "still running after stop: root.stuck",
    );
    release.resolve();
    await h.supervisor.done.catch(() => undefined);
  });

  it("waits time out with what the node is doing instead", async () => {
    const h = testHarness(async (ctx) => {
      ctx.run("slow", async (c) => void (await c.untilAborted()));
      await serve(ctx);
    });
    await h.waitFor("root", "healthy");
    const err = await h.waitFor("root.slow", "healthy", { timeoutMs: 20 }).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(HarnessTimeoutError);
    expect(String(err)).toContain("root.slow did not reach healthy within 20 ms (it is new)");
    await h.cleanup();
  });
});

describe("startOnMock", () => {
  it("runs a runnable until stop(), and reports a broken rule of the tree", async () => {
    const run = startOnMock("root.worker", async (ctx) => {
      ctx.healthy();
      await ctx.untilAborted();
    });
    expect(run.ctx.state).toBe("healthy");
    await run.stop();
    expect(run.ctx.signal.aborted).toBe(true);

    const misbehaving = startOnMock("root.bad", async (ctx) => {
      ctx.healthy();
      ctx.healthy(); // healthy twice: a misuse the real tree would fail
      await ctx.untilAborted();
    });
    await expect(misbehaving.stop()).rejects.toThrow(/root.bad broke the tree's rules/);
  });
});
