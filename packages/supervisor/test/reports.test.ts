/**
 * Supervisor reports, the live tree and the restart window, on real trees.
 */
import {
  maxReportErrorMessageChars,
  maxReportErrorStackChars,
  restartWindowCapacity,
  type NodeStatus,
  type RunContext,
  type SupervisorReport,
} from "@metropolis/supervisor";
import { eventually, testHarness, type TestHarness } from "@metropolis/supervisor/testing";
import { RestartWindow } from "../src/restart-window";
import { deferred, serve } from "./helpers";

let h: TestHarness | undefined;
afterEach(async () => {
  await h?.cleanup();
  h = undefined;
});

/** Reads an async iterator in the background, keeping what it yields. */
function collect<T>(it: AsyncIterableIterator<T>) {
  const items: T[] = [];
  let ended = false;
  const done = (async () => {
    for await (const x of it) items.push(x);
    ended = true;
  })();
  return { items, done, ended: () => ended, stop: () => it.return?.() };
}

const kinds = (rs: readonly SupervisorReport[], dn: string) =>
  rs.filter((r) => r.dn === dn).map((r) => r.kind);

describe("reports", () => {
  it("reports started, healthy, died, restartScheduled and done with their fields", async () => {
    let runs = 0;
    h = testHarness(
      async (ctx) => {
        ctx.run("flaky", async (c: RunContext) => {
          if (++runs === 1) {
            const e = new TypeError("first run fails");
            throw e;
          }
          c.healthy();
          c.done();
        });
        await serve(ctx);
      },
      { expectDeath: (dn) => dn === "root.flaky", backoff: { initialMs: 5, jitter: 0 } },
    );
    const live = collect(h.supervisor.reports());
    await h.nextTransition((t) => t.dn === "root.flaky" && t.to === "done");
    await eventually(
      () => live.items.some((r) => r.dn === "root.flaky" && r.kind === "done"),
      "done",
    );
    expect(kinds(live.items, "root.flaky")).toEqual([
      "started",
      "died",
      "restartScheduled",
      "started",
      "healthy",
      "done",
    ]);
    expect(kinds(live.items, "root")).toEqual(["started", "healthy"]);
    const flaky = live.items.filter((r) => r.dn === "root.flaky");
    const [started, died, scheduled, restarted] = flaky;
    expect(started).toMatchObject({ kind: "started", restarts: 0 });
    expect(died).toMatchObject({
      kind: "died",
      error: { name: "TypeError", message: "first run fails" },
    });
    expect(died.kind === "died" && died.error.stack).toMatch(/TypeError: first run fails\n\s+at /);
    expect(scheduled).toMatchObject({ kind: "restartScheduled", delayMs: 5, attempt: 1 });
    expect(restarted).toMatchObject({ kind: "started", restarts: 1 });
    // Numbered in order, one apart, with times that never go back.
    const seqs = live.items.map((r) => r.seq);
    expect(seqs).toEqual(seqs.map((_, i) => seqs[0] + i));
    for (let i = 1; i < live.items.length; i++) {
      expect(live.items[i].time).toBeGreaterThanOrEqual(live.items[i - 1].time);
    }
    expect(live.items.every((r) => r.dropped === undefined)).toBe(true);
    // The history holds the same reports.
    expect(h.supervisor.recentReports()).toEqual(live.items);
    await h.cleanup();
    h = undefined;
    await live.done; // the reader ends with the tree
    expect(live.ended()).toBe(true);
  });

  it("names nested runnables by DN and stamps them with the wall clock, alike in reports, the tree and transitions", async () => {
    const before = Date.now();
    h = testHarness(async (ctx) => {
      ctx.run("a", async (a: RunContext) => {
        a.run("b", serve);
        await serve(a);
      });
      await serve(ctx);
    });
    const healthyB = await h.nextTransition((t) => t.dn === "root.a.b" && t.to === "healthy");
    const after = Date.now();
    const tree = h.supervisor.tree();
    expect(tree.map((n) => n.dn)).toEqual(["root", "root.a", "root.a.b"]);
    const b = tree.find((n) => n.dn === "root.a.b");
    expect(b?.since).toBe(healthyB.at);
    expect(healthyB.at).toBeGreaterThanOrEqual(before);
    expect(healthyB.at).toBeLessThanOrEqual(after);
    const reports = h.supervisor.recentReports({ dnPrefix: "root.a" });
    expect(reports.map((r) => `${r.dn} ${r.kind}`)).toEqual([
      "root.a started",
      "root.a.b started",
      "root.a.b healthy",
      "root.a healthy",
    ]);
    expect(reports.find((r) => r.dn === "root.a.b" && r.kind === "healthy")?.time).toBe(
      healthyB.at,
    );
  });

  it("counts backoff attempts until the runnable is healthy again", async () => {
    let runs = 0;
    h = testHarness(
      async (ctx) => {
        ctx.run("crashy", async (c) => {
          if (++runs <= 3) throw new Error(`run ${runs}`);
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
    const scheduled = h.supervisor
      .recentReports({ dnPrefix: "root.crashy" })
      .filter((r) => r.kind === "restartScheduled");
    expect(scheduled.map((r) => r.kind === "restartScheduled" && [r.attempt, r.delayMs])).toEqual([
      [1, 2],
      [2, 4],
      [3, 8],
    ]);
  });

  it("reports givenUp and escalated when the restart intensity is exceeded", async () => {
    h = testHarness(
      async (ctx) => {
        ctx.run("mid", async (c) => {
          c.run(
            "bad",
            async () => {
              throw new Error("always fails");
            },
            { intensity: { maxRestarts: 1, periodMs: 60_000 } },
          );
          await serve(c);
        });
        await serve(ctx);
      },
      { expectDeath: (dn) => dn === "root.mid" || dn === "root.mid.bad" },
    );
    const events = collect(h.supervisor.reports({ dnPrefix: "root.mid" }));
    await eventually(() => events.items.find((r) => r.kind === "escalated"), "an escalation");
    const givenUp = events.items.find((r) => r.kind === "givenUp");
    expect(givenUp).toMatchObject({
      kind: "givenUp",
      dn: "root.mid.bad",
      maxRestarts: 1,
      periodMs: 60_000,
      error: { name: "Error", message: "always fails" },
    });
    expect(events.items.find((r) => r.kind === "escalated")).toMatchObject({
      dn: "root.mid.bad",
      to: "root.mid",
      error: { name: "EscalationError" },
    });
    // The parent dies of it, after the escalation.
    const i = events.items.findIndex((r) => r.kind === "escalated");
    expect(events.items.slice(i).find((r) => r.kind === "died")).toMatchObject({
      dn: "root.mid",
      error: { name: "EscalationError" },
    });
    // The DN filter: nothing of the root.
    expect(events.items.every((r) => r.dn.startsWith("root.mid"))).toBe(true);
    await events.stop();
  });

  it("reports an escalation past the root with no parent", async () => {
    h = testHarness(
      async (ctx) => {
        throw new Error(`root fails: ${ctx.dn}`);
      },
      { expectDeath: () => true, root: { intensity: { maxRestarts: 0, periodMs: 1000 } } },
    );
    await expect(h.supervisor.done).rejects.toThrow(/root fails/);
    const escalated = h.supervisor.recentReports().find((r) => r.kind === "escalated");
    expect(escalated).toMatchObject({ dn: "root", error: { name: "EscalationError" } });
    expect(escalated && "to" in escalated && escalated.to).toBeFalsy();
  });

  it("bounds the error it carries", async () => {
    const long = "x".repeat(maxReportErrorMessageChars * 3);
    h = testHarness(
      async (ctx) => {
        ctx.run(
          "big",
          async () => {
            const e = new Error(long);
            e.stack = "Error: " + "y".repeat(maxReportErrorStackChars * 3);
            throw e;
          },
          { restart: "temporary" },
        );
        await serve(ctx);
      },
      { expectDeath: (dn) => dn === "root.big" },
    );
    await h.waitFor("root.big", "dead");
    const died = h.supervisor
      .recentReports({ dnPrefix: "root.big" })
      .find((r) => r.kind === "died");
    if (died?.kind !== "died") throw new Error("no died report");
    expect(died.error.message).toHaveLength(maxReportErrorMessageChars);
    expect(died.error.message.endsWith("…")).toBe(true);
    expect(died.error.stack).toHaveLength(maxReportErrorStackChars);
  });

  it("gives a late reader the history first, then live reports", async () => {
    const release = deferred();
    h = testHarness(async (ctx) => {
      ctx.run("a", serve);
      ctx.run("b", async (c) => {
        await release.promise;
        await serve(c);
      });
      await serve(ctx);
    });
    await h.waitFor("root.a", "healthy");
    const late = collect(h.supervisor.reports({ history: true }));
    const tail = collect(h.supervisor.reports({ history: 1, dnPrefix: "root.a" }));
    const liveOnly = collect(h.supervisor.reports());
    release.resolve();
    await h.waitFor("root.b", "healthy");
    await eventually(() => late.items.some((r) => r.dn === "root.b" && r.kind === "healthy"), "b");
    expect(late.items.map((r) => `${r.dn} ${r.kind}`)).toEqual([
      "root started",
      "root.a started",
      "root.a healthy", // serve() is healthy as soon as it starts
      "root.b started",
      "root healthy",
      "root.b healthy",
    ]);
    expect(tail.items.map((r) => `${r.dn} ${r.kind}`)).toEqual(["root.a healthy"]);
    await eventually(() => liveOnly.items.length === 1, "one live report");
    expect(liveOnly.items.map((r) => `${r.dn} ${r.kind}`)).toEqual(["root.b healthy"]);
    await late.stop();
    await tail.stop();
    await liveOnly.stop();
  });

  it("keeps a bounded history: the newest reportHistory reports", async () => {
    h = testHarness(
      async (ctx) => {
        for (let i = 0; i < 20; i++) ctx.run(`c${i}`, serve);
        await serve(ctx);
      },
      { reportHistory: 5 },
    );
    await h.waitFor("root.c19", "healthy");
    const history = h.supervisor.recentReports();
    expect(history).toHaveLength(5);
    // root started, then each child started and healthy at once, then root healthy: 42.
    expect(history.map((r) => r.seq)).toEqual([38, 39, 40, 41, 42]);
    expect(history.map((r) => `${r.dn} ${r.kind}`)).toEqual([
      "root.c18 started",
      "root.c18 healthy",
      "root.c19 started",
      "root.c19 healthy",
      "root healthy",
    ]);
    expect(h.supervisor.recentReports({ tail: 2 }).map((r) => r.seq)).toEqual([41, 42]);
  });

  it("keeps no history with reportHistory 0, and still serves live readers", async () => {
    h = testHarness(serve, { reportHistory: 0 });
    await h.waitFor("root", "healthy");
    expect(h.supervisor.recentReports()).toEqual([]);
    const seen: SupervisorReport[] = [];
    const off = h.supervisor.onReport((r) => seen.push(r));
    await h.cleanup();
    h = undefined;
    off();
    expect(seen).toEqual([]); // a cancellation makes no report
  });

  it("drops the oldest reports for a slow reader and says how many", async () => {
    const go = deferred();
    h = testHarness(async (ctx) => {
      await go.promise;
      for (let i = 0; i < 30; i++) ctx.run(`c${i}`, serve);
      await serve(ctx);
    });
    await h.waitFor("root", "new");
    // Nobody reads it while the burst happens.
    const slow = h.supervisor.reports({ bufferSize: 4 });
    go.resolve();
    await h.waitFor("root.c29", "healthy");
    // 30 started + root healthy + 30 healthy = 61 reports, 4 kept.
    const got: SupervisorReport[] = [];
    for (let i = 0; i < 4; i++) got.push((await slow.next()).value as SupervisorReport);
    expect(got.map((r) => `${r.dn} ${r.kind}`)).toEqual([
      "root.c28 healthy",
      "root.c29 started",
      "root.c29 healthy",
      "root healthy",
    ]);
    expect(got[0].dropped).toBe(57);
    expect(got.slice(1).every((r) => r.dropped === undefined)).toBe(true);
    expect(got[1].seq - got[0].seq).toBe(1);
    await slow.return?.();
    expect(await slow.next()).toEqual({ value: undefined, done: true });
  });

  it("ends a reader that stops with break, and a reader opened after the tree ended", async () => {
    h = testHarness(async (ctx) => {
      ctx.run("a", serve);
      await serve(ctx);
    });
    await h.waitFor("root.a", "healthy");
    const got: string[] = [];
    for await (const r of h.supervisor.reports({ history: true })) {
      got.push(r.dn);
      if (got.length === 2) break;
    }
    expect(got).toEqual(["root", "root.a"]);
    const sup = h.supervisor;
    await h.cleanup();
    h = undefined;
    // After the end: the history, then the end, without waiting.
    const after: string[] = [];
    for await (const r of sup.reports({ history: 2 })) after.push(`${r.dn} ${r.kind}`);
    expect(after).toEqual(["root.a healthy", "root healthy"]);
    const snapshots: NodeStatus[][] = [];
    for await (const s of sup.watchTree()) snapshots.push(s);
    expect(snapshots.map((s) => s.map((n) => n.state))).toEqual([["canceled", "canceled"]]);
  });
});

describe("watchTree", () => {
  it("yields the tree now, then one snapshot after a burst of changes, ending with the tree", async () => {
    const go = deferred();
    const N = 50;
    h = testHarness(async (ctx) => {
      await go.promise;
      for (let i = 0; i < N; i++) ctx.run(`c${i}`, serve);
      await serve(ctx);
    });
    await h.waitFor("root", "new");
    const watch = collect(h.supervisor.watchTree());
    await eventually(() => watch.items.length === 1, "the first snapshot");
    expect(watch.items[0]).toEqual([expect.objectContaining({ dn: "root", state: "new" })]);
    const transitionsBefore = h.transitions.length;
    go.resolve();
    await h.waitFor(`root.c${N - 1}`, "healthy");
    const final = (s: NodeStatus[]) => s.length === N + 1 && s.every((n) => n.state === "healthy");
    await eventually(() => final(watch.items[watch.items.length - 1]), "the final snapshot");
    const changes = h.transitions.length - transitionsBefore; // 50 started, 51 healthy
    expect(changes).toBe(2 * N + 1);
    // Coalesced: far fewer snapshots than changes, and the last is the tree as it is.
    expect(watch.items.length - 1).toBeLessThan(changes / 10);
    expect(watch.items[watch.items.length - 1]).toEqual(h.supervisor.tree().map((n) => ({ ...n })));
    await h.cleanup();
    h = undefined;
    await watch.done;
    expect(watch.ended()).toBe(true);
    const last = watch.items[watch.items.length - 1];
    expect(last.every((n) => n.state === "canceled")).toBe(true);
  });

  it("gives a slow reader the newest snapshot, not a backlog, and stops on return()", async () => {
    const step = deferred();
    h = testHarness(async (ctx) => {
      ctx.run("a", async (c) => {
        await step.promise;
        await serve(c);
      });
      await serve(ctx);
    });
    const it = h.supervisor.watchTree();
    await h.waitFor("root", "healthy");
    const first = await it.next(); // taken now: root healthy, a new
    expect(first.value?.map((n: NodeStatus) => n.state)).toEqual(["healthy", "new"]);
    step.resolve();
    await h.waitFor("root.a", "healthy");
    const second = await it.next();
    expect(second.value?.map((n: NodeStatus) => n.state)).toEqual(["healthy", "healthy"]);
    const pending = it.next();
    await it.return?.();
    expect(await pending).toEqual({ value: undefined, done: true });
  });
});

describe("topRestarts", () => {
  it("ranks the runnables of a real tree by their restarts after failures", async () => {
    let a = 0;
    let b = 0;
    h = testHarness(
      async (ctx) => {
        ctx.runGroup({
          a: async (c) => {
            if (++a <= 3) throw new Error("a fails");
            await serve(c);
          },
          calm: serve, // restarted along with a, three times: not a failure of its own
        });
        ctx.run("b", async (c) => {
          if (++b <= 1) throw new Error("b fails");
          await serve(c);
        });
        await serve(ctx);
      },
      { expectDeath: (dn) => dn === "root.a" || dn === "root.b", backoff: { initialMs: 1 } },
    );
    await h.waitFor("root.a", "healthy");
    await h.waitFor("root.b", "healthy");
    expect(h.supervisor.topRestarts({ windowMs: 60_000 })).toEqual([
      { dn: "root.a", restarts: 3 },
      { dn: "root.b", restarts: 1 },
    ]);
    expect(h.supervisor.topRestarts({ windowMs: 60_000, limit: 1 })).toEqual([
      { dn: "root.a", restarts: 3 },
    ]);
    expect(h.supervisor.tree().find((n) => n.dn === "root.calm")?.restarts).toBe(3);
  });

  it("drops restarts older than the window", () => {
    const w = new RestartWindow();
    w.record("root.old", 1_000);
    w.record("root.old", 2_000);
    w.record("root.new", 9_000);
    w.record("root.old", 9_500);
    expect(w.top({ windowMs: 5_000 }, 10_000)).toEqual([
      { dn: "root.new", restarts: 1 },
      { dn: "root.old", restarts: 1 },
    ]);
    expect(w.top({ windowMs: 9_500 }, 10_000)).toEqual([
      { dn: "root.old", restarts: 3 },
      { dn: "root.new", restarts: 1 },
    ]);
    expect(w.top({ windowMs: 100 }, 20_000)).toEqual([]);
  });

  it("keeps bounded memory: a ring of times per DN and a cap on DNs", () => {
    const w = new RestartWindow(3);
    for (let i = 0; i < restartWindowCapacity * 2; i++) w.record("root.loop", 1000 + i);
    expect(w.top({ windowMs: 1e9 }, 5000)).toEqual([
      { dn: "root.loop", restarts: restartWindowCapacity },
    ]);
    w.record("root.x", 6000);
    w.record("root.y", 6000);
    w.record("root.z", 6000); // root.loop, least recently restarted, goes
    expect(w.top({ windowMs: 1e9 }, 7000).map((r) => r.dn)).toEqual(["root.x", "root.y", "root.z"]);
    expect(() => w.top({ windowMs: 0 })).toThrow(RangeError);
  });
});
