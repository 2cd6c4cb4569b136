/**
 * A unit test of one runnable on a MockContext: no supervisor, no timers to
 * wait out. Run with `node --test` after compiling (it uses node:test so that
 * it needs no test framework; the same calls work in jest or vitest).
 */
import assert from "node:assert/strict";
import { test } from "node:test";
import { eventually, startOnMock } from "@metropolis/supervisor/testing";
import { ticker } from "./ticker";

void test("ticker starts its heartbeat, becomes healthy and ticks", async () => {
  const run = startOnMock("root.ticker", ticker(10));
  try {
    // What the runnable did, as the mock recorded it.
    assert.deepEqual(
      run.ctx.children.map((c) => c.name),
      ["heartbeat"],
    );
    assert.equal(run.ctx.healthyCalls, 1);
    // A condition no event announces: poll it with a deadline.
    await eventually(
      () => run.ctx.lines.filter((l) => l.message === "tick").length >= 3,
      "3 ticks",
    );
    // One level down: run the recorded child on its own MockContext.
    const child = run.ctx.runChild("heartbeat");
    assert.equal(child.ctx.state, "healthy");
  } finally {
    // Aborts the run, awaits it, and throws if it broke a rule of the tree.
    await run.stop();
  }
});
