import type { Transition } from "@metropolis/supervisor";
import { PrometheusSupervisorMetrics } from "@metropolis/supervisor/prometheus";
import { testHarness, type TestHarness } from "@metropolis/supervisor/testing";
import { deferred, serve } from "./helpers";

let h: TestHarness | undefined;
afterEach(async () => {
  await h?.cleanup();
  h = undefined;
});

describe("metrics", () => {
  it("are told every transition, in order", async () => {
    const seen: string[] = [];
    const fail = deferred();
    h = testHarness(
      async (ctx) => {
        ctx.run("child", async (c) => {
          c.healthy();
          await fail.promise;
          throw new Error("bye");
        });
        await serve(ctx);
      },
      {
        expectDeath: (dn) => dn === "root.child",
        backoff: { initialMs: 0 },
        metrics: { onTransition: (t: Transition) => seen.push(`${t.dn}:${t.from ?? "-"}>${t.to}`) },
      },
    );
    await h.waitFor("root.child", "healthy");
    const back = h.nextTransition((t) => t.dn === "root.child" && t.to === "healthy");
    fail.resolve();
    await back;
    expect(seen).toEqual([
      "root:->new",
      "root.child:->new",
      "root.child:new>healthy",
      "root:new>healthy",
      "root.child:healthy>dead",
      "root.child:dead>new",
      "root.child:new>healthy",
    ]);
  });

  it("export a state gauge and transition counters per DN to Prometheus", async () => {
    const metrics = new PrometheusSupervisorMetrics();
    h = testHarness(
      async (ctx) => {
        ctx.run("child", serve);
        await serve(ctx);
      },
      { metrics },
    );
    await h.waitFor("root.child", "healthy");
    await h.waitFor("root", "healthy");
    const text = await metrics.registry.metrics();
    expect(text).toContain('metropolis_supervisor_node_state{dn="root.child",state="healthy"} 1');
    expect(text).toContain('metropolis_supervisor_node_state{dn="root.child",state="new"} 0');
    expect(text).toContain('metropolis_supervisor_transitions_total{dn="root.child",to="new"} 1');
    expect(text).toContain('metropolis_supervisor_transitions_total{dn="root",to="healthy"} 1');
  });
});
