import {
  ReturnedWithoutDoneError,
  RunAbortedError,
  type RunContext,
  type Transition,
} from "@metropolis/supervisor";
import { testHarness, type TestHarness } from "@metropolis/supervisor/testing";
import { deferred, serve } from "./helpers";

let h: TestHarness | undefined;
afterEach(async () => {
  await h?.cleanup();
  h = undefined;
});

/** A runnable that serves until `kill` is called, then throws. */
function killable(): { runnable: (ctx: RunContext) => Promise<void>; kill: () => void } {
  let kill: () => void = () => undefined;
  return {
    runnable: async (ctx) => {
      const d = deferred();
      kill = d.resolve;
      ctx.healthy();
      await Promise.race([d.promise, ctx.untilAborted()]);
      if (!ctx.signal.aborted) throw new Error("killed");
    },
    kill: () => kill(),
  };
}

const states = (h: TestHarness, dn: string) =>
  h.transitions.filter((t) => t.dn === dn).map((t) => t.to);

describe("how a runnable ends", () => {
  it("DONE after done(): not restarted, its children keep running", async () => {
    h = testHarness(async (ctx) => {
      ctx.run("job", async (c) => {
        c.run("worker", serve);
        c.healthy();
        c.done();
      });
      await serve(ctx);
    });
    await h.waitFor("root.job", "done");
    await h.waitFor("root.job.worker", "healthy");
    expect(h.supervisor.tree().find((n) => n.dn === "root.job.worker")?.state).toBe("healthy");
    expect(states(h, "root.job")).toEqual(["new", "healthy", "done"]);
  });

  it.each([
    ["a rejection", async () => Promise.reject(new Error("boom")), "boom"],
    [
      "a synchronous throw",
      () => {
        throw new Error("sync boom");
      },
      "sync boom",
    ],
    [
      "a return without done()",
      async () => undefined,
      "returned in state new without calling done()",
    ],
  ])(
    "DEAD after %s, logged at error level at its DN, then restarted",
    async (_what, body, message) => {
      let runs = 0;
      h = testHarness(
        async (ctx) => {
          ctx.run("child", async (c) => {
            runs++;
            if (runs === 1) return body();
            await serve(c);
          });
          await serve(ctx);
        },
        { expectDeath: (dn) => dn === "root.child" },
      );
      await h.waitFor("root.child", "healthy");
      const death = h.transitions.find((t) => t.to === "dead");
      expect(death?.dn).toBe("root.child");
      expect(death?.error?.message).toContain(message);
      const errors = h.supervisor.logs("root.child").filter((l) => l.level === "error");
      expect(errors.map((l) => l.message)).toEqual([`runnable failed: ${death?.error?.message}`]);
      expect(h.supervisor.tree().find((n) => n.dn === "root.child")?.restarts).toBe(1);
      if (message.startsWith("returned"))
        expect(death?.error).toBeInstanceOf(ReturnedWithoutDoneError);
    },
  );

  it("a death aborts the subtree and the group siblings, restarting siblings at once and the dead one after its backoff", async () => {
    const a = killable();
    h = testHarness(
      async (ctx) => {
        ctx.runGroup({
          a: a.runnable,
          b: async (c) => {
            c.run("leaf", serve);
            await serve(c);
          },
        });
        ctx.run("other", serve);
        await serve(ctx);
      },
      { expectDeath: (dn) => dn === "root.a", backoff: { initialMs: 200, jitter: 0 } },
    );
    await h.waitFor("root.b.leaf", "healthy");
    await h.waitFor("root.a", "healthy");
    const leafBack = h.nextTransition((t) => t.dn === "root.b.leaf" && t.to === "healthy");
    const aBack = h.nextTransition((t) => t.dn === "root.a" && t.to === "healthy");
    a.kill();
    await leafBack; // b came back with a fresh leaf
    await aBack;
    const after = h.transitions.slice(h.transitions.findIndex((t) => t.to === "dead"));
    const order = after.map((t) => `${t.dn}:${t.to}`);
    // b and its leaf were cancelled, b restarted before a (a waits for its backoff).
    expect(order.indexOf("root.b.leaf:canceled")).toBeLessThan(order.indexOf("root.b:new"));
    expect(order.indexOf("root.b:new")).toBeLessThan(order.indexOf("root.a:new"));
    const aDeath = after[0];
    const aRestart = after.find((t) => t.dn === "root.a" && t.to === "new")!;
    expect(aRestart.at - aDeath.at).toBeGreaterThanOrEqual(190);
    // Something outside the group was not touched.
    expect(states(h, "root.other")).toEqual(["new", "healthy"]);
    expect(h.supervisor.logs("root.a").map((l) => l.message)).toContain("restarting in 200 ms");
  });

  it("restarts only after the whole subtree has settled", async () => {
    const lingering = deferred();
    const a = killable();
    let leafSettled = false;
    h = testHarness(
      async (ctx) => {
        ctx.run("a", async (c) => {
          c.run("slow", async (s) => {
            s.healthy();
            await s.untilAborted();
            await lingering.promise; // keeps running after the abort
            leafSettled = true;
          });
          await a.runnable(c);
        });
        await serve(ctx);
      },
      { expectDeath: (dn) => dn === "root.a", backoff: { initialMs: 0 } },
    );
    await h.waitFor("root.a.slow", "healthy");
    a.kill();
    await h.waitFor("root.a", "dead");
    const restarted = h.nextTransition((t) => t.dn === "root.a" && t.to === "new");
    // Give the tree every chance to restart early: many turns of the event loop.
    for (let i = 0; i < 20; i++) await new Promise((r) => setImmediate(r));
    expect(h.supervisor.tree().find((n) => n.dn === "root.a")?.state).toBe("dead");
    lingering.resolve();
    await restarted;
    expect(leafSettled).toBe(true);
  });

  it("a cancelled sibling with zero backoff restarts in the same tick its subtree settles", async () => {
    const a = killable();
    h = testHarness(
      async (ctx) => {
        ctx.runGroup({ a: a.runnable, b: serve });
        await serve(ctx);
      },
      { expectDeath: (dn) => dn === "root.a", backoff: { initialMs: 0 } },
    );
    await h.waitFor("root.b", "healthy");
    let tickEnded = false;
    const seen: string[] = [];
    const off = h.supervisor.onTransition((t: Transition) => {
      if (t.dn === "root.b" && t.to === "canceled") setImmediate(() => (tickEnded = true));
      if (t.dn === "root.b" && t.to === "new") seen.push(tickEnded ? "later" : "same tick");
    });
    const bBack = h.nextTransition((t) => t.dn === "root.b" && t.to === "healthy");
    a.kill();
    await bBack;
    off();
    expect(seen).toEqual(["same tick"]);
  });

  it("a DONE node whose group sibling dies is restarted with its group, children included", async () => {
    const a = killable();
    let jobRuns = 0;
    h = testHarness(
      async (ctx) => {
        ctx.runGroup({
          a: a.runnable,
          job: async (c) => {
            jobRuns++;
            c.run("worker", serve);
            c.healthy();
            c.done();
          },
        });
        await serve(ctx);
      },
      { expectDeath: (dn) => dn === "root.a", backoff: { initialMs: 0 } },
    );
    await h.waitFor("root.job", "done");
    await h.waitFor("root.job.worker", "healthy");
    a.kill();
    await h.nextTransition((t) => t.dn === "root.job.worker" && t.to === "healthy");
    expect(jobRuns).toBe(2);
    expect(states(h, "root.job.worker")).toEqual(["new", "healthy", "canceled", "new", "healthy"]);
  });

  it("a five-level subtree is torn down and rebuilt when its top dies", async () => {
    const top = killable();
    const chain =
      (depth: number) =>
      async (ctx: RunContext): Promise<void> => {
        if (depth > 0) ctx.run(`l${depth}`, chain(depth - 1));
        await serve(ctx);
      };
    h = testHarness(
      async (ctx) => {
        ctx.run("top", async (c) => {
          c.run("l5", chain(4));
          await top.runnable(c);
        });
        await serve(ctx);
      },
      { expectDeath: (dn) => dn === "root.top", backoff: { initialMs: 0 } },
    );
    const deepest = "root.top.l5.l4.l3.l2.l1";
    await h.waitFor(deepest, "healthy");
    top.kill();
    await h.nextTransition((t) => t.dn === deepest && t.to === "healthy");
    expect(states(h, deepest)).toEqual(["new", "healthy", "canceled", "new", "healthy"]);
  });

  it("a failing parent cancels a child's pending restart", async () => {
    const child = killable();
    const parent = killable();
    h = testHarness(
      async (ctx) => {
        ctx.run("parent", async (c) => {
          c.run("child", child.runnable, { backoff: { initialMs: 60_000, jitter: 0 } });
          await parent.runnable(c);
        });
        await serve(ctx);
      },
      { expectDeath: (dn) => dn.startsWith("root.parent"), backoff: { initialMs: 0 } },
    );
    await h.waitFor("root.parent.child", "healthy");
    child.kill();
    await h.waitFor("root.parent.child", "dead");
    expect(
      h.supervisor.tree().find((n) => n.dn === "root.parent.child")?.nextRestartInMs,
    ).toBeGreaterThan(59_000);
    parent.kill();
    // The pending restart became CANCELED, and the parent re-created the child at once.
    await h.nextTransition((t) => t.dn === "root.parent.child" && t.to === "healthy");
    expect(states(h, "root.parent.child")).toEqual([
      "new",
      "healthy",
      "dead",
      "canceled",
      "new",
      "healthy",
    ]);
  });
});

describe("what a group's members wait on", () => {
  it("members of a group share one untilAborted() per generation, released when a member dies", async () => {
    const a = killable();
    const waits = new Map<string, Promise<void>[]>();
    const record = (name: string) => async (c: RunContext) => {
      c.healthy();
      const wait = c.untilAborted();
      waits.set(name, [...(waits.get(name) ?? []), wait]);
      await wait;
    };
    h = testHarness(
      async (ctx) => {
        ctx.runGroup({ a: a.runnable, b: record("b"), c: record("c") });
        ctx.run("alone", record("alone"));
        await serve(ctx);
      },
      { expectDeath: (dn) => dn === "root.a", backoff: { initialMs: 100, jitter: 0 } },
    );
    await h.waitFor("root.b", "healthy");
    await h.waitFor("root.c", "healthy");
    const [b0] = waits.get("b") ?? [];
    const [c0] = waits.get("c") ?? [];
    expect(b0).toBe(c0);
    expect(b0).not.toBe(waits.get("alone")?.[0]);
    const bBack = h.nextTransition((t) => t.dn === "root.b" && t.to === "healthy");
    const aBack = h.nextTransition((t) => t.dn === "root.a" && t.to === "healthy");
    a.kill();
    await bBack;
    // The siblings restarted at once and wait on a new promise; the first one resolved.
    const [, b1] = waits.get("b") ?? [];
    expect(b1).toBe(waits.get("c")?.[1]);
    expect(b1).not.toBe(b0);
    await expect(b0).resolves.toBeUndefined();
    // a, restarted after its backoff, joins the siblings' generation: a second
    // death releases all three of them, and restarts them again.
    await aBack;
    const cAgain = h.nextTransition((t) => t.dn === "root.c" && t.to === "healthy");
    a.kill();
    await cAgain;
    await expect(b1).resolves.toBeUndefined();
    expect(states(h, "root.alone")).toEqual(["new", "healthy"]);
  });

  it("members of a temporary group wait on their own: one member's death releases nobody else", async () => {
    const a = killable();
    let bWait: Promise<void> | undefined;
    let bReleased = false;
    h = testHarness(
      async (ctx) => {
        ctx.runGroup(
          {
            a: a.runnable,
            b: async (c) => {
              c.healthy();
              bWait = c.untilAborted();
              await bWait;
              bReleased = true;
            },
          },
          { restart: "temporary" },
        );
        await serve(ctx);
      },
      { expectDeath: (dn) => dn === "root.a" },
    );
    await h.waitFor("root.b", "healthy");
    a.kill();
    await h.waitFor("root.a", "dead");
    // Let any release run its course: b keeps waiting.
    await new Promise((r) => setImmediate(r));
    expect(bReleased).toBe(false);
    expect(states(h, "root.b")).toEqual(["new", "healthy"]);
  });

  it("the abort reason names where and why, and carries no stack frames", async () => {
    const a = killable();
    let reason: unknown;
    h = testHarness(
      async (ctx) => {
        ctx.runGroup({
          a: a.runnable,
          b: async (c) => {
            c.healthy();
            const signal = c.signal;
            await new Promise((r) => signal.addEventListener("abort", r, { once: true }));
            reason ??= signal.reason;
          },
        });
        await serve(ctx);
      },
      { expectDeath: (dn) => dn === "root.a", backoff: { initialMs: 0 } },
    );
    await h.waitFor("root.b", "healthy");
    const bBack = h.nextTransition((t) => t.dn === "root.b" && t.to === "healthy");
    a.kill();
    await bBack;
    if (!(reason instanceof RunAbortedError)) throw new Error(`reason: ${String(reason)}`);
    const error = reason;
    expect(error.message).toBe("root.a: failed; stopping its subtree and group");
    expect(error.stack).toBe(`RunAbortedError: ${error.message}`);
    // The stack trace limit is back to what it was.
    expect(new Error("x").stack).toContain("\n    at ");
  });
});
