import {
  ChildStartError,
  DuplicateNameError,
  InvalidNameError,
  RunAbortedError,
  SignalMisuseError,
  type RunContext,
} from "@metropolis/supervisor";
import { testHarness, type TestHarness } from "@metropolis/supervisor/testing";
import { deferred, serve } from "./helpers";

let h: TestHarness | undefined;
afterEach(async () => {
  await h?.cleanup();
  h = undefined;
});

describe("names", () => {
  it("builds DNs from names and rejects invalid ones", async () => {
    const thrown: unknown[] = [];
    h = testHarness(async (ctx) => {
      ctx.run("cluster", async (c) => {
        c.run("consensus", serve);
        c.healthy();
        await c.untilAborted();
      });
      for (const bad of ["", "Upper", "a.b", "x".repeat(65), "sp ace"]) {
        try {
          ctx.run(bad, serve);
        } catch (e) {
          thrown.push(e);
        }
      }
      await serve(ctx);
    });
    await h.waitFor("root.cluster.consensus", "healthy");
    expect(thrown).toHaveLength(5);
    for (const e of thrown) expect(e).toBeInstanceOf(InvalidNameError);
    expect(h.supervisor.tree().map((n) => n.dn)).toEqual([
      "root",
      "root.cluster",
      "root.cluster.consensus",
    ]);
  });

  it("rejects a duplicate child name and sub-logger/child collisions in both directions", async () => {
    const errors: Record<string, unknown> = {};
    const attempt = (what: string, f: () => void) => {
      try {
        f();
      } catch (e) {
        errors[what] = e;
      }
    };
    h = testHarness(async (ctx) => {
      ctx.run("a", serve);
      ctx.subLogger("log");
      attempt("child twice", () => ctx.run("a", serve));
      attempt("group member taken", () => ctx.runGroup({ b: serve, a: serve }));
      attempt("child over sub-logger", () => ctx.run("log", serve));
      attempt("sub-logger over child", () => ctx.subLogger("a"));
      attempt("sub-logger twice", () => ctx.subLogger("log"));
      await serve(ctx);
    });
    await h.waitFor("root", "healthy");
    expect(Object.keys(errors)).toEqual([
      "child twice",
      "group member taken",
      "child over sub-logger",
      "sub-logger over child",
      "sub-logger twice",
    ]);
    for (const e of Object.values(errors)) expect(e).toBeInstanceOf(DuplicateNameError);
    // The failed runGroup started nothing: validation happens before any start.
    expect(h.supervisor.tree().map((n) => n.dn)).toEqual(["root", "root.a"]);
  });
});

describe("signals", () => {
  it("throws from run() and runGroup() after healthy()", async () => {
    const thrown: unknown[] = [];
    h = testHarness(async (ctx) => {
      ctx.healthy();
      for (const f of [() => ctx.run("late", serve), () => ctx.runGroup({ late: serve })]) {
        try {
          f();
        } catch (e) {
          thrown.push(e);
        }
      }
      await ctx.untilAborted();
    });
    await h.waitFor("root", "healthy");
    expect(thrown).toHaveLength(2);
    for (const e of thrown) expect(e).toBeInstanceOf(ChildStartError);
  });

  it.each([
    ["healthy() twice", (ctx: RunContext) => (ctx.healthy(), ctx.healthy())],
    ["done() before healthy()", (ctx: RunContext) => ctx.done()],
    ["done() twice", (ctx: RunContext) => (ctx.healthy(), ctx.done(), ctx.done())],
  ])("fails only the runnable on %s, with a clear message", async (_what, misuse) => {
    let attempts = 0;
    h = testHarness(
      async (ctx) => {
        ctx.run("good", serve);
        ctx.run("bad", async (c) => {
          attempts++;
          if (attempts === 1) misuse(c);
          await c.untilAborted();
        });
        await serve(ctx);
      },
      { expectDeath: (dn) => dn === "root.bad" },
    );
    const death = await h.nextTransition((t) => t.dn === "root.bad" && t.to === "dead");
    expect(death.error).toBeInstanceOf(SignalMisuseError);
    expect(death.error?.message).toMatch(/^root\.bad: (healthy|done)\(\) called in state/);
    // The misbehaving runnable is restarted; its healthy neighbour was never touched.
    await h.nextTransition((t) => t.dn === "root.bad" && t.to === "new");
    expect(h.transitions.filter((t) => t.dn === "root.good").map((t) => t.to)).toEqual([
      "new",
      "healthy",
    ]);
  });

  it("ignores signals from a context whose run has ended", async () => {
    let stale: RunContext | undefined;
    const second = deferred();
    let runs = 0;
    h = testHarness(
      async (ctx) => {
        ctx.run("child", async (c) => {
          runs++;
          if (runs === 1) {
            stale = c;
            throw new Error("first run fails");
          }
          c.healthy();
          second.resolve();
          await c.untilAborted();
        });
        await serve(ctx);
      },
      { expectDeath: (dn) => dn === "root.child" },
    );
    await second.promise;
    stale!.healthy();
    stale!.done();
    expect(h.supervisor.tree().find((n) => n.dn === "root.child")?.state).toBe("healthy");
    expect(h.supervisor.logs("root.child").map((l) => l.message)).toContain(
      "healthy() called from a run that has already ended; ignored",
    );
    // Whatever the ended run left behind is told to stop, not handed the new run's signal.
    expect(stale!.signal.aborted).toBe(true);
    expect(stale!.signal.reason).toBeInstanceOf(RunAbortedError);
    await stale!.untilAborted();
  });
});
