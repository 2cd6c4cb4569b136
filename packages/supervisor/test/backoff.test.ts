import { defaultBackoff } from "@metropolis/supervisor";
import { testHarness, type TestHarness } from "@metropolis/supervisor/testing";
import { Backoff, resolveBackoff } from "../src/backoff";
import { serve } from "./helpers";

describe("Backoff", () => {
  it("defaults to Monogon's: 500 ms, ×1.5, ±50%, capped at 60 s", () => {
    expect(defaultBackoff).toEqual({ initialMs: 500, multiplier: 1.5, jitter: 0.5, maxMs: 60_000 });
    const middle = new Backoff(defaultBackoff, () => 0.5);
    expect([1, 2, 3, 4].map(() => middle.next())).toEqual([500, 750, 1125, 1688]);
    const low = new Backoff(defaultBackoff, () => 0);
    const high = new Backoff(defaultBackoff, () => 1);
    expect(low.next()).toBe(250);
    expect(high.next()).toBe(750);
  });

  it("never exceeds the cap (before jitter) and never gives up", () => {
    const b = new Backoff(resolveBackoff({ jitter: 0 }));
    const delays = Array.from({ length: 40 }, () => b.next());
    expect(Math.max(...delays)).toBe(60_000);
    expect(delays.at(-1)).toBe(60_000);
  });

  it("reset() goes back to the initial delay", () => {
    const b = new Backoff(resolveBackoff({ jitter: 0 }));
    b.next();
    b.next();
    b.reset();
    expect(b.next()).toBe(500);
  });

  it.each([
    [{ initialMs: -1 }, "initialMs must be >= 0"],
    [{ multiplier: 0.5 }, "multiplier must be >= 1"],
    [{ jitter: 2 }, "jitter must be in [0, 1]"],
    [{ initialMs: 100, maxMs: 10 }, "maxMs must be >= initialMs"],
  ])("rejects %p", (opts, message) => {
    expect(() => resolveBackoff(opts)).toThrow(message);
  });
});

describe("backoff in the tree", () => {
  let h: TestHarness | undefined;
  afterEach(async () => {
    await h?.cleanup();
    h = undefined;
  });

  const delays = (h: TestHarness, dn: string) =>
    h.supervisor
      .logs(dn)
      .map((l) => /^restarting in (\d+) ms$/.exec(l.message)?.[1])
      .filter((d) => d !== undefined)
      .map(Number);

  it("grows with consecutive deaths, and a healthy() signal resets it", async () => {
    let runs = 0;
    h = testHarness(
      async (ctx) => {
        ctx.run("crashy", async (c) => {
          runs++;
          // Runs 1–5 die at once; run 6 reports healthy before dying; run 7 dies at once.
          if (runs === 6) c.healthy();
          if (runs <= 7) throw new Error(`crash ${runs}`);
          await serve(c);
        });
        await serve(ctx);
      },
      {
        expectDeath: (dn) => dn === "root.crashy",
        backoff: { initialMs: 2, multiplier: 2, jitter: 0 },
      },
    );
    await h.waitFor("root.crashy", "healthy");
    await h.nextTransition((t) => t.dn === "root.crashy" && t.to === "healthy" && runs === 8);
    expect(delays(h, "root.crashy")).toEqual([2, 4, 8, 16, 32, 2, 4]);
  });

  it("per-child backoff overrides the supervisor's", async () => {
    let runs = 0;
    h = testHarness(
      async (ctx) => {
        ctx.run(
          "crashy",
          async (c) => {
            if (++runs < 3) throw new Error("crash");
            await serve(c);
          },
          { backoff: { initialMs: 3, multiplier: 3, jitter: 0 } },
        );
        await serve(ctx);
      },
      { expectDeath: (dn) => dn === "root.crashy", backoff: { initialMs: 1000 } },
    );
    await h.waitFor("root.crashy", "healthy");
    expect(runs).toBe(3);
    expect(delays(h, "root.crashy")).toEqual([3, 9]);
  });
});
