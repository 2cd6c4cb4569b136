/**
 * @metropolis/chaos — a bounded fault-injection run against a local cluster
 * of real metropolis-node processes, and the checker of its history.
 *
 * ```ts
 * const report = await runChaos({ minutes: 2, seed: 7, nodes: 5, phaseB: true });
 * if (!report.passed) console.error(report.anomalies);
 * ```
 */
export type * from "./history";
export {
  checkHistory,
  type CheckOptions,
  type CheckReport,
  type OutcomeCounts,
  type RegisterVerdict,
} from "./checker";
export {
  checkLinearizable,
  defaultMaxMinimizeSteps,
  defaultMaxSteps,
  registerOperations,
  type LinearizabilityOptions,
  type LinearizabilityResult,
  type RegisterOperation,
} from "./linearizability";
export { checkLostWrites } from "./lost-writes";
export {
  checkLeaders,
  servesInHistory,
  type LeaderAnomaly,
  type LeaderCheck,
  type LeaderRule,
} from "./leader-check";
export {
  bridgeGroups,
  reachability,
  ringCuts,
  splitGroups,
  type NetworkFaultKind,
} from "./network-faults";
export { checkStaleReads } from "./stale-reads";
export {
  renderTimeline,
  type TimelineFault,
  type TimelineCategory,
  type TimelineInput,
  type TimelinePhase,
  type TimelineLeaderChange,
} from "./timeline-svg";
export { runChaos, type ChaosOptions } from "./run-chaos";
export type { ChaosReport, Phase } from "./report";
