/**
 * The node's plain metrics endpoint: Prometheus text at
 * `http://<host>:<port>/metrics`, served from prom-client registries as a
 * supervised runnable. A node serves it only when its config asks for it
 * (`ports.plainMetrics`), and only on 127.0.0.1; what Prometheus scrapes
 * from other machines is the mTLS endpoint (secure-metrics.ts).
 *
 * The node keeps two registries (main.ts): its own — the supervision tree's
 * state gauge and transition counter (PrometheusSupervisorMetrics registers
 * them in the registry it is given) and node-metrics.ts's gauges — and its
 * host's ({@link hostMetricsRegistry}: Node's process metrics and host
 * figures). The plain endpoint serves both, one after the other. Registries
 * outlive the runnable: a restart serves the same ones again.
 *
 *   const core = new Registry();
 *   const host = hostMetricsRegistry();
 *   const sup = supervise(root, { metrics: new PrometheusSupervisorMetrics(core) });
 *   // in root: ctx.run("plainmetrics", metricsRunnable([core, host], "127.0.0.1", port));
 */
import { createServer, type IncomingMessage, type ServerResponse } from "node:http";
import { cpus, freemem, loadavg, totalmem, uptime } from "node:os";
import { collectDefaultMetrics, Gauge, Registry } from "prom-client";
import type { RunContext, Runnable } from "@metropolis/supervisor";
import { NodeError } from "./errors";

/**
 * The TCP port a node serves its metrics on over mutual TLS (secure-metrics.ts).
 * The plain-HTTP endpoint of this module is an opt-in on loopback with a
 * port of its own (`ports.plainMetrics` in the node's config).
 */
export const defaultMetricsPort = 7838;

/** The metrics server could not listen on its address. */
export class MetricsListenError extends NodeError {
  constructor(
    readonly address: string,
    cause: Error,
  ) {
    super(`cannot serve metrics on ${address}: ${cause.message}`, { cause });
  }
}

/** The metrics server failed after it started listening. */
export class MetricsServerError extends NodeError {
  constructor(
    readonly address: string,
    cause: Error,
  ) {
    super(`metrics server on ${address} failed: ${cause.message}`, { cause });
  }
}

/**
 * A fresh registry with Node's default process metrics, for the
 * supervisor's metrics (`new PrometheusSupervisorMetrics(registry)`) and
 * {@link metricsRunnable}. Make one per process: the default metrics can be
 * registered in a registry only once.
 */
export function nodeMetricsRegistry(): Registry {
  const registry = new Registry();
  collectDefaultMetrics({ register: registry });
  return registry;
}

/** A gauge in `registry` whose value `read` gives at every scrape. */
export function readGauge(
  registry: Registry,
  name: string,
  help: string,
  read: () => number,
): Gauge {
  return new Gauge({
    name,
    help,
    registers: [registry],
    collect() {
      this.set(read());
    },
  });
}

/**
 * A registry for the node's host and process figures (/metrics/node): Node's
 * default process metrics and the host's load, memory and uptime. One per
 * process, like {@link nodeMetricsRegistry}.
 */
export function hostMetricsRegistry(): Registry {
  const registry = nodeMetricsRegistry();
  const gauge = (name: string, help: string, read: () => number) =>
    readGauge(registry, name, help, read);
  gauge("metropolis_host_load1", "The host's 1-minute load average.", () => loadavg()[0]);
  gauge("metropolis_host_load5", "The host's 5-minute load average.", () => loadavg()[1]);
  gauge("metropolis_host_load15", "The host's 15-minute load average.", () => loadavg()[2]);
  gauge("metropolis_host_memory_total_bytes", "The host's memory.", () => totalmem());
  gauge("metropolis_host_memory_free_bytes", "The host's free memory.", () => freemem());
  gauge("metropolis_host_uptime_seconds", "Seconds since the host booted.", () => uptime());
  gauge("metropolis_host_cpus", "The host's logical CPUs.", () => cpus().length);
  return registry;
}

/** Answers one request: the registries' text at GET/HEAD /metrics, 404 elsewhere. */
async function answer(registries: Registry[], req: IncomingMessage, res: ServerResponse) {
  const path = new URL(req.url ?? "/", "http://metrics").pathname;
  if (path !== "/metrics") {
    res.writeHead(404, { "content-type": "text/plain; charset=utf-8" });
    res.end(`not found: ${path}; metrics are at /metrics\n`);
    return;
  }
  if (req.method !== "GET" && req.method !== "HEAD") {
    res.writeHead(405, { allow: "GET, HEAD", "content-type": "text/plain; charset=utf-8" });
    res.end(`method ${req.method} not allowed\n`);
    return;
  }
  let text: string;
  try {
    text = (await Promise.all(registries.map((r) => r.metrics()))).join("\n");
  } catch (e) {
    res.writeHead(500, { "content-type": "text/plain; charset=utf-8" });
    res.end(`collecting metrics failed: ${e instanceof Error ? e.message : String(e)}\n`);
    return;
  }
  res.writeHead(200, { "content-type": registries[0].contentType });
  res.end(req.method === "HEAD" ? undefined : text);
}

/**
 * Serves `registry` at `http://host:port/metrics` (404 for any other path).
 * Healthy once listening; fails with {@link MetricsListenError} when the
 * address cannot be bound, or {@link MetricsServerError} when the server
 * breaks later; when its context aborts, it closes the server (and every
 * open connection) and returns.
 */
export function metricsRunnable(
  registry: Registry | Registry[],
  host: string,
  port: number,
): Runnable {
  const registries = Array.isArray(registry) ? registry : [registry];
  const address = `${host.includes(":") ? `[${host}]` : host}:${port}`;
  return async (ctx: RunContext) => {
    const server = createServer((req, res) => void answer(registries, req, res));
    try {
      await new Promise<void>((resolve, reject) => {
        server.once("error", (e) => reject(new MetricsListenError(address, e)));
        server.listen(port, host, () => resolve());
      });
      const failed = new Promise<never>((_resolve, reject) =>
        server.once("error", (e) => reject(new MetricsServerError(address, e))),
      );
      ctx.logger.info(`serving metrics on http://${address}/metrics`);
      ctx.healthy();
      await Promise.race([ctx.untilAborted(), failed]);
    } finally {
      server.closeAllConnections();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    }
  };
}
