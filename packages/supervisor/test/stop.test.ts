import { createHook } from "node:async_hooks";
import { supervise, type StopReport } from "@metropolis/supervisor";
import { deferred, quiet, serve } from "./helpers";

/**
 * The timers the supervisor's code created from now on that are still
 * pending: another test's timer ending meanwhile does not count (a global
 * count of timers did), nor does one that code an earlier test file left
 * running creates meanwhile (counting every new timer did).
 */
function trackTimers(): { pending: () => number; stop: () => void } {
  const live = new Set<number>();
  const hook = createHook({
    init(id, type) {
      if (type !== "Timeout") return;
      const at: { stack?: string } = {};
      Error.captureStackTrace(at);
      if (at.stack?.includes("/packages/supervisor/src/")) live.add(id);
    },
    destroy(id) {
      live.delete(id);
    },
  }).enable();
  return { pending: () => live.size, stop: () => hook.disable() };
}

describe("stop()", () => {
  it("aborts everything and resolves once all runnables settled", async () => {
    const stopped: string[] = [];
    const healthy = deferred();
    const sup = supervise(
      async (ctx) => {
        ctx.runGroup({
          a: async (c) => (await serve(c), void stopped.push(c.dn)),
          b: async (c) => {
            c.run("leaf", async (l) => (await serve(l), void stopped.push(l.dn)));
            await serve(c);
            stopped.push(c.dn);
          },
        });
        ctx.healthy();
        healthy.resolve();
        await ctx.untilAborted();
        stopped.push(ctx.dn);
      },
      { logger: quiet() },
    );
    await healthy.promise;
    const report: StopReport = await sup.stop();
    expect(report).toEqual({ clean: true, laggards: [] });
    expect(stopped.sort()).toEqual(["root", "root.a", "root.b", "root.b.leaf"]);
    expect(sup.tree().every((n) => n.state === "canceled")).toBe(true);
    await expect(sup.done).resolves.toBeUndefined();
  });

  it("reports the runnables that did not settle in time by DN", async () => {
    const release = deferred();
    const started = deferred();
    const sup = supervise(
      async (ctx) => {
        ctx.run("stubborn", async (c) => {
          c.healthy();
          started.resolve();
          await release.promise; // ignores its signal
        });
        ctx.run("polite", serve);
        await serve(ctx);
      },
      { logger: quiet() },
    );
    await started.promise;
    const report = await sup.stop({ timeoutMs: 50 });
    expect(report).toEqual({ clean: false, laggards: ["root.stubborn"] });
    release.resolve();
    await sup.done;
  });

  it("leaves no timer behind, even with restarts pending", async () => {
    const timers = trackTimers();
    const crashed = deferred();
    const sup = supervise(
      async (ctx) => {
        ctx.run("crashy", async () => {
          crashed.resolve();
          throw new Error("crash");
        });
        ctx.run("sleeper", async (c) => {
          c.healthy();
          await c.sleep(60_000).catch(() => undefined);
        });
        await serve(ctx);
      },
      { logger: quiet(), backoff: { initialMs: 60_000 } },
    );
    await crashed.promise;
    await new Promise((r) => setImmediate(r));
    expect(sup.tree().find((n) => n.dn === "root.crashy")?.nextRestartInMs).toBeGreaterThan(0);
    expect(timers.pending()).toBeGreaterThan(0);
    await sup.stop();
    // async_hooks runs destroy hooks in a batch on the next turn of the loop.
    await new Promise((r) => setImmediate(r));
    expect(timers.pending()).toBe(0);
    timers.stop();
    expect(sup.tree().find((n) => n.dn === "root.crashy")?.state).toBe("canceled");
  });

  it("ctx.sleep() rejects with the abort reason when the run is aborted", async () => {
    const outcome = deferred<unknown>();
    const sup = supervise(
      async (ctx) => {
        ctx.healthy();
        await ctx.sleep(60_000).catch((e: unknown) => outcome.resolve(e));
      },
      { logger: quiet() },
    );
    await new Promise((r) => setImmediate(r));
    await sup.stop();
    expect(String(await outcome.promise)).toContain("root: supervisor stopped");
  });
});
