/**
 * `@metropolis/supervisor/prometheus`: the tree's transitions as Prometheus
 * metrics. Needs the optional peer dependency `prom-client` (v15).
 *
 * @example
 * ```ts
 * import { Registry } from "prom-client";
 * import { supervise } from "@metropolis/supervisor";
 * import { PrometheusSupervisorMetrics } from "@metropolis/supervisor/prometheus";
 *
 * const registry = new Registry();
 * const metrics = new PrometheusSupervisorMetrics(registry, { prefix: "myservice_supervisor" });
 * supervise(root, { metrics });
 * // serve `await registry.metrics()` on your metrics endpoint
 * ```
 *
 * @module
 */
export {
  PrometheusSupervisorMetrics,
  type PrometheusSupervisorMetricsOptions,
} from "./prometheus-metrics";
