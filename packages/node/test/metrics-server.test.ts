import { request } from "node:http";
import { createServer, Socket } from "node:net";
import { freePort } from "@metropolis/consensus/testing";
import type { Runnable } from "@metropolis/supervisor";
import { PrometheusSupervisorMetrics } from "@metropolis/supervisor/prometheus";
import { testHarness, type TestHarness } from "@metropolis/supervisor/testing";
import {
  defaultMetricsPort,
  MetricsListenError,
  metricsRunnable,
  nodeMetricsRegistry,
} from "../src/metrics-server";

/** One HTTP request to 127.0.0.1:`port`; resolves with status, headers and body. */
function fetchPath(
  port: number,
  path: string,
  method = "GET",
): Promise<{ status: number; contentType: string | undefined; body: string }> {
  return new Promise((resolve, reject) => {
    const req = request({ host: "127.0.0.1", port, path, method, agent: false }, (res) => {
      let body = "";
      res.setEncoding("utf8");
      res.on("data", (c: string) => (body += c));
      res.on("end", () =>
        resolve({ status: res.statusCode!, contentType: res.headers["content-type"], body }),
      );
      res.on("error", reject);
    });
    req.on("error", reject);
    req.end();
  });
}

/** Whether something accepts TCP connections on 127.0.0.1:`port`. */
function accepts(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const socket = new Socket();
    socket.once("connect", () => (socket.destroy(), resolve(true)));
    socket.once("error", () => resolve(false));
    socket.connect(port, "127.0.0.1");
  });
}

let h: TestHarness | undefined;
afterEach(async () => {
  await h?.cleanup();
  h = undefined;
});

describe("metricsRunnable", () => {
  it("serves the supervisor's metrics and process metrics at /metrics, 404 elsewhere", async () => {
    const registry = nodeMetricsRegistry();
    const port = await freePort("127.0.0.1");
    h = testHarness(
      async (ctx) => {
        ctx.run("metrics", metricsRunnable(registry, "127.0.0.1", port));
        ctx.run("worker", async (c) => (c.healthy(), c.untilAborted()));
        ctx.healthy();
        await ctx.untilAborted();
      },
      { metrics: new PrometheusSupervisorMetrics(registry) },
    );
    await h.waitFor("root.metrics", "healthy");
    await h.waitFor("root.worker", "healthy");

    const res = await fetchPath(port, "/metrics");
    expect(res.status).toBe(200);
    expect(res.contentType).toBe(registry.contentType);
    expect(res.body).toContain("# TYPE metropolis_supervisor_node_state gauge");
    expect(res.body).toContain(
      'metropolis_supervisor_node_state{dn="root.worker",state="healthy"} 1',
    );
    expect(res.body).toContain(
      'metropolis_supervisor_transitions_total{dn="root.metrics",to="healthy"} 1',
    );
    expect(res.body).toMatch(/^process_resident_memory_bytes \d+/m);
    expect(res.body).toContain("nodejs_eventloop_lag_seconds");
    expect((await fetchPath(port, "/metrics?x=1")).status).toBe(200);

    const head = await fetchPath(port, "/metrics", "HEAD");
    expect(head.status).toBe(200);
    expect(head.body).toBe("");
    expect((await fetchPath(port, "/metrics", "POST")).status).toBe(405);
    const other = await fetchPath(port, "/");
    expect(other.status).toBe(404);
    expect(other.body).toContain("/metrics");
    expect((await fetchPath(port, "/metricsx")).status).toBe(404);
  });

  it("stops listening when its context aborts, and serves again after a restart", async () => {
    const registry = nodeMetricsRegistry();
    const port = await freePort("127.0.0.1");
    let fail!: () => void;
    // The metrics server shares a group with a runnable that fails on demand.
    h = testHarness(
      async (ctx) => {
        ctx.runGroup({
          metrics: metricsRunnable(registry, "127.0.0.1", port),
          trigger: async (c) => {
            c.healthy();
            await new Promise<void>((resolve, reject) => {
              fail = () => reject(new Error("sibling failed on purpose"));
              void c.untilAborted().then(resolve);
            });
          },
        });
        ctx.healthy();
        await ctx.untilAborted();
      },
      { expectDeath: (dn) => dn === "root.trigger", backoff: { initialMs: 1 } },
    );
    await h.waitFor("root.metrics", "healthy");
    expect((await fetchPath(port, "/metrics")).status).toBe(200);

    const canceled = h.nextTransition((t) => t.dn === "root.metrics" && t.to === "canceled");
    const back = h.nextTransition(
      (t) => t.dn === "root.metrics" && t.to === "healthy" && t.from === "new",
    );
    fail();
    await canceled;
    await back;
    expect((await fetchPath(port, "/metrics")).status).toBe(200);
    expect(h.supervisor.tree().find((n) => n.dn === "root.metrics")?.restarts).toBe(1);

    await h.cleanup();
    h = undefined;
    expect(await accepts(port)).toBe(false);
  });

  it("fails with MetricsListenError when its port is taken", async () => {
    const blocker = createServer();
    await new Promise<void>((resolve) => blocker.listen(0, "127.0.0.1", resolve));
    const { port } = blocker.address() as { port: number };
    try {
      const run: Runnable = metricsRunnable(nodeMetricsRegistry(), "127.0.0.1", port);
      h = testHarness(run, { expectDeath: () => true, backoff: { initialMs: 60_000 } });
      const dead = await h.nextTransition((t) => t.to === "dead");
      expect(dead.error).toBeInstanceOf(MetricsListenError);
      expect(dead.error?.message).toContain(`127.0.0.1:${port}`);
    } finally {
      await new Promise((resolve) => blocker.close(resolve));
    }
  });

  it("uses the node's metrics port", () => {
    expect(defaultMetricsPort).toBe(7838);
  });
});
