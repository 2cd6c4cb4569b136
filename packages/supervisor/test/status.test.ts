/**
 * A runnable's status text (`ctx.status`) on real trees: what `tree()`
 * shows, how the text is bounded, that it lives exactly as long as the run
 * that published it, and that a tree watch sees it change.
 */
import { maxStatusLength, type NodeStatus, type RunContext } from "@metropolis/supervisor";
import { eventually, testHarness, type TestHarness } from "@metropolis/supervisor/testing";
import { deferred, serve } from "./helpers";

let h: TestHarness | undefined;
afterEach(async () => {
  await h?.cleanup();
  h = undefined;
});

const statusOf = (harness: TestHarness, dn: string) =>
  harness.supervisor.tree().find((n) => n.dn === dn)?.status;

/** A tree whose child `a` serves and hands its context to the test. */
async function treeWithChild(): Promise<{ harness: TestHarness; ctx: RunContext }> {
  const started = deferred<RunContext>();
  const harness = testHarness(async (ctx) => {
    ctx.run("a", async (c) => {
      started.resolve(c);
      await serve(c);
    });
    await serve(ctx);
  });
  h = harness;
  const ctx = await started.promise;
  await harness.waitFor("root.a", "healthy");
  return { harness, ctx };
}

describe("RunContext.status", () => {
  it("shows in tree() as one line of at most maxStatusLength characters; '' clears it", async () => {
    const { harness, ctx } = await treeWithChild();
    expect(harness.supervisor.tree().find((n) => n.dn === "root.a")).not.toHaveProperty("status");
    ctx.status("leading");
    expect(statusOf(harness, "root.a")).toBe("leading");
    expect(statusOf(harness, "root")).toBeUndefined();
    ctx.status("  lease\n\tunconfirmed\r\n");
    expect(statusOf(harness, "root.a")).toBe("lease unconfirmed");
    ctx.status("x".repeat(500));
    const long = statusOf(harness, "root.a") ?? "";
    expect(long).toHaveLength(maxStatusLength);
    expect(long).toBe(`${"x".repeat(maxStatusLength - 1)}…`);
    // Cut between characters, never inside a surrogate pair.
    ctx.status("😀".repeat(100));
    const emoji = statusOf(harness, "root.a") ?? "";
    expect(emoji.length).toBeLessThanOrEqual(maxStatusLength);
    expect(emoji).toBe(`${"😀".repeat(59)}…`);
    ctx.status("");
    expect(harness.supervisor.tree().find((n) => n.dn === "root.a")).not.toHaveProperty("status");
  });

  it("is cleared when the run ends: a restarted run starts without one, a stale context cannot set it", async () => {
    const fail = deferred();
    let runs = 0;
    let firstRun: RunContext | undefined;
    const harness = testHarness(
      async (ctx) => {
        ctx.run("a", async (c) => {
          if (++runs > 1) return serve(c);
          firstRun = c;
          c.status("first run");
          c.healthy();
          await fail.promise;
          throw new Error("a fails");
        });
        ctx.run("b", async (c) => {
          c.status("finishing");
          c.healthy();
          c.done();
        });
        await serve(ctx);
      },
      { expectDeath: (dn) => dn === "root.a" },
    );
    h = harness;
    // What the tree shows at each of a's transitions, taken as it happens.
    const seen: string[] = [];
    harness.supervisor.onTransition((t) => {
      if (t.dn === "root.a") seen.push(`${t.to}: ${statusOf(harness, "root.a") ?? "-"}`);
    });
    await harness.waitFor("root.a", "healthy");
    await harness.waitFor("root.b", "done");
    fail.resolve();
    await harness.nextTransition((t) => t.dn === "root.a" && t.to === "healthy");
    expect(seen).toEqual(["new: -", "healthy: first run", "dead: -", "new: -", "healthy: -"]);
    firstRun?.status("stale");
    expect(statusOf(harness, "root.a")).toBeUndefined();
    // A done runnable's status goes when it returns.
    await eventually(() => statusOf(harness, "root.b") === undefined, "b's status to go");
    expect(harness.supervisor.tree().find((n) => n.dn === "root.b")?.state).toBe("done");
  });

  it("a tree watch yields a snapshot when only a status changes", async () => {
    const { harness, ctx } = await treeWithChild();
    const snapshots: NodeStatus[][] = [];
    const watch = harness.supervisor.watchTree();
    const reading = (async () => {
      for await (const s of watch) snapshots.push(s);
    })();
    const last = () => snapshots[snapshots.length - 1]?.find((n) => n.dn === "root.a");
    await eventually(() => snapshots.length === 1, "the first snapshot", { timeoutMs: 5000 });
    expect(last()?.status).toBeUndefined();
    ctx.status("leading");
    await eventually(() => last()?.status === "leading", "a snapshot with the status", {
      timeoutMs: 5000,
    });
    // The same text again is no change: nothing is delivered.
    const before = snapshots.length;
    ctx.status("leading");
    for (let i = 0; i < 3; i++) await new Promise((r) => setImmediate(r));
    expect(snapshots).toHaveLength(before);
    ctx.status("lease unconfirmed");
    await eventually(() => last()?.status === "lease unconfirmed", "the new status", {
      timeoutMs: 5000,
    });
    expect(snapshots).toHaveLength(before + 1);
    await watch.return?.();
    await reading;
  });
});
