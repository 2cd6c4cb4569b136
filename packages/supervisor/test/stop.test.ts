import { supervise, type StopReport } from "@metropolis/supervisor";
import winston from "winston";
import { deferred, serve } from "./helpers";

const quiet = () =>
  winston.createLogger({ transports: [new winston.transports.Console({ silent: true })] });

/** Timers and other handles currently keeping the event loop alive. */
const activeTimers = () => process.getActiveResourcesInfo().filter((r) => r === "Timeout").length;

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
    const before = activeTimers();
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
    expect(activeTimers()).toBeGreaterThan(before);
    await sup.stop();
    expect(activeTimers()).toBe(before);
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
