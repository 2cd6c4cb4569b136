import { EscalationError, TreeFailedError, supervise } from "@metropolis/supervisor";
import { testHarness, type TestHarness } from "@metropolis/supervisor/testing";
import winston from "winston";
import { serve } from "./helpers";

let h: TestHarness | undefined;
afterEach(async () => {
  await h?.cleanup();
  h = undefined;
});

const states = (h: TestHarness, dn: string) =>
  h.transitions.filter((t) => t.dn === dn).map((t) => t.to);

describe("restart types", () => {
  it("transient: a clean return without done() ends it as DONE", async () => {
    h = testHarness(async (ctx) => {
      ctx.run("once", async () => undefined, { restart: "transient" });
      await serve(ctx);
    });
    await h.waitFor("root.once", "done");
    expect(states(h, "root.once")).toEqual(["new", "done"]);
  });

  it("transient: a failure is restarted", async () => {
    let runs = 0;
    h = testHarness(
      async (ctx) => {
        ctx.run(
          "flaky",
          async () => {
            if (++runs === 1) throw new Error("first try fails");
          },
          { restart: "transient" },
        );
        await serve(ctx);
      },
      { expectDeath: (dn) => dn === "root.flaky" },
    );
    await h.nextTransition((t) => t.dn === "root.flaky" && t.to === "done");
    expect(states(h, "root.flaky")).toEqual(["new", "dead", "new", "done"]);
  });

  it("temporary: never restarted, and its death leaves its group siblings alone", async () => {
    h = testHarness(
      async (ctx) => {
        ctx.runGroup(
          {
            temp: async () => {
              throw new Error("temporary failure");
            },
          },
          { restart: "temporary" },
        );
        ctx.runGroup({ sibling: serve, temp2: async () => Promise.reject(new Error("x")) }, {});
        await serve(ctx);
      },
      { expectDeath: (dn) => dn.startsWith("root.temp") },
    );
    await h.waitFor("root.temp", "dead");
    await h.waitFor("root.temp2", "dead");
    await h.nextTransition((t) => t.dn === "root.sibling" && t.to === "healthy");
    // temp stays dead forever; temp2 (permanent) took its group sibling down and both came back.
    expect(states(h, "root.temp")).toEqual(["new", "dead"]);
    expect(states(h, "root.sibling").slice(0, 4)).toEqual(["new", "healthy", "canceled", "new"]);
  });
});

describe("restart intensity", () => {
  it("gives up on a child that fails too often and fails its parent with the child's error as cause", async () => {
    let parentRuns = 0;
    h = testHarness(
      async (ctx) => {
        ctx.run("parent", async (c) => {
          parentRuns++;
          c.run(
            "crashy",
            async () => {
              throw new Error("crash");
            },
            { intensity: { maxRestarts: 2, periodMs: 60_000 } },
          );
          await serve(c);
        });
        await serve(ctx);
      },
      { expectDeath: (dn) => dn.startsWith("root.parent"), backoff: { initialMs: 0 } },
    );
    const parentDeath = await h.nextTransition((t) => t.dn === "root.parent" && t.to === "dead");
    expect(parentDeath.error).toBeInstanceOf(EscalationError);
    expect(parentDeath.error?.message).toBe(
      "root.parent.crashy failed more than 2 times within 60000 ms; giving up on it: crash",
    );
    expect((parentDeath.error as EscalationError).cause).toEqual(new Error("crash"));
    // 1 start + 2 restarts, then given up.
    expect(states(h, "root.parent.crashy").filter((s) => s === "new")).toHaveLength(3);
    // The parent is restarted and re-creates a fresh child.
    await h.nextTransition((t) => t.dn === "root.parent" && t.to === "healthy");
    expect(parentRuns).toBe(2);
    expect(h.supervisor.logs("root.parent.crashy").map((l) => l.message)).toContain(
      "not restarting: root.parent.crashy failed more than 2 times within 60000 ms; giving up on it: crash",
    );
  });

  it("restarts spread wider than the period do not count", async () => {
    let runs = 0;
    h = testHarness(
      async (ctx) => {
        ctx.run(
          "slowcrash",
          async () => {
            runs++;
            throw new Error("crash");
          },
          {
            intensity: { maxRestarts: 1, periodMs: 1 },
            backoff: { initialMs: 5, jitter: 0, multiplier: 1 },
          },
        );
        await serve(ctx);
      },
      { expectDeath: (dn) => dn === "root.slowcrash" },
    );
    await h.nextTransition(() => runs >= 4);
    expect(states(h, "root")).toEqual(["new", "healthy"]);
  });

  it("escalation past the root rejects Supervisor.done and stops the tree", async () => {
    const logger = winston.createLogger({
      transports: [new winston.transports.Console({ silent: true })],
    });
    let leafStopped = false;
    const sup = supervise(
      async (ctx) => {
        ctx.run("leaf", async (c) => {
          await serve(c);
          leafStopped = true;
        });
        ctx.run(
          "crashy",
          async () => {
            throw new Error("crash");
          },
          { intensity: { maxRestarts: 0, periodMs: 60_000 } },
        );
        await serve(ctx);
      },
      {
        logger,
        backoff: { initialMs: 0 },
        root: { intensity: { maxRestarts: 0, periodMs: 60_000 } },
      },
    );
    await expect(sup.done).rejects.toBeInstanceOf(TreeFailedError);
    await expect(sup.done).rejects.toThrow(
      /root failed more than 0 times .*root\.crashy failed more than 0 times/,
    );
    expect(leafStopped).toBe(true);
    expect(sup.tree().every((n) => ["dead", "canceled"].includes(n.state))).toBe(true);
  });
});

describe("root", () => {
  it("a tree whose root is done and whose runnables have all ended resolves done", async () => {
    const logger = winston.createLogger({
      transports: [new winston.transports.Console({ silent: true })],
    });
    const sup = supervise(
      async (ctx) => {
        ctx.run("job", async (c) => (c.healthy(), c.done()));
        ctx.healthy();
        ctx.done();
      },
      { logger },
    );
    await expect(sup.done).resolves.toBeUndefined();
    expect(sup.tree().map((n) => n.state)).toEqual(["done", "done"]);
  });

  it("a temporary root that fails rejects done", async () => {
    const logger = winston.createLogger({
      transports: [new winston.transports.Console({ silent: true })],
    });
    const sup = supervise(async () => Promise.reject(new Error("no")), {
      logger,
      root: { restart: "temporary" },
    });
    await expect(sup.done).rejects.toThrow("supervision tree failed: no");
  });

  it("stop() before the root ever ran cancels it", async () => {
    const logger = winston.createLogger({
      transports: [new winston.transports.Console({ silent: true })],
    });
    let ran = false;
    const sup = supervise(async () => void (ran = true), { logger });
    const report = await sup.stop();
    expect(report).toEqual({ clean: true, laggards: [] });
    expect(ran).toBe(false);
  });
});
