/**
 * SupervisorMetrics for Prometheus (prom-client): a state gauge per DN (1 for
 * the node's current state, 0 for the others) and a transition counter per
 * DN and target state. The node's metrics endpoint serves the registry.
 */
import { Counter, Gauge, Registry } from "prom-client";
import type { NodeState, SupervisorMetrics, Transition } from "./types";

const allStates: readonly NodeState[] = ["new", "healthy", "done", "dead", "canceled"];

/** Options of {@link PrometheusSupervisorMetrics}. */
export interface PrometheusSupervisorMetricsOptions {
  /**
   * The prefix of the metric names: `<prefix>_node_state` and
   * `<prefix>_transitions_total`.
   * @default "metropolis_supervisor"
   */
  prefix?: string;
}

/**
 * Supervisor metrics for Prometheus: `<prefix>_node_state{dn,state}` (1 for
 * each node's current state, 0 for the others) and
 * `<prefix>_transitions_total{dn,to}`. Pass it as `SupervisorOptions.metrics`.
 */
export class PrometheusSupervisorMetrics implements SupervisorMetrics {
  private readonly state: Gauge<"dn" | "state">;
  private readonly transitions: Counter<"dn" | "to">;

  /**
   * Registers the metrics in `registry`.
   * @param registry - where the metrics are registered; a fresh one by default
   */
  constructor(
    readonly registry: Registry = new Registry(),
    opts: PrometheusSupervisorMetricsOptions = {},
  ) {
    const { prefix = "metropolis_supervisor" } = opts;
    this.state = new Gauge({
      name: `${prefix}_node_state`,
      help: "1 for the current state of each supervised runnable, 0 for the other states.",
      labelNames: ["dn", "state"],
      registers: [registry],
    });
    this.transitions = new Counter({
      name: `${prefix}_transitions_total`,
      help: "State transitions of each supervised runnable, by target state.",
      labelNames: ["dn", "to"],
      registers: [registry],
    });
  }

  /** Updates both metrics for `t`. */
  onTransition(t: Transition): void {
    for (const s of allStates) this.state.set({ dn: t.dn, state: s }, s === t.to ? 1 : 0);
    this.transitions.inc({ dn: t.dn, to: t.to });
  }
}
