/**
 * @metropolis/supervisor — the Erlang-style supervision tree on which every
 * Metropolis-TS service runs.
 *
 * Every service of a node is a *runnable*: an async function of a RunContext.
 * It starts its children, declares itself healthy, and runs until its work is
 * done or its signal aborts. A runnable that fails in any other way is logged
 * at its DN, its subtree and its group siblings are stopped, and once all of
 * them have settled it is started again after an exponential backoff, while
 * the siblings restart at once:
 *
 *   root ─┬─ network
 *         ├─ cluster ── (enrolment)
 *         └─ role ─┬─ controlplane ─┬─ consensus     (group: one-for-all)
 *                  │                └─ curator
 *                  └─ heartbeat
 *
 * Guarantees: a runnable is never running twice at once; it is restarted only
 * after its whole subtree has settled; restarts are decided the moment the
 * last runnable of a subtree settles (no polling); stop() leaves no timer
 * behind. Beyond Monogon's design it has OTP's restart types (permanent,
 * transient, temporary) and restart intensity with escalation to the parent.
 *
 * Helpers run child processes (commandRunnable), gRPC servers
 * (grpcServerRunnable) and XState v5 machines (machineRunnable) as supervised
 * runnables. Test helpers live in `@metropolis/supervisor/testing`.
 */
export type * from "./types";
export * from "./report-types";
export { supervise } from "./supervise";
export { defaultBackoff } from "./backoff";
export { abortableSleep } from "./abortable-sleep";
export { abortable } from "./abortable";
export { isRunnableName, runnableNamePattern } from "./names";
export {
  isProgressEvent,
  logProgress,
  nodeProgressEventNames,
  progressField,
  readProgressEvent,
  type EnrolmentFlow,
  type NodeProgressEvent,
  type NodeProgressEventName,
  type NodeProgressEvents,
} from "./node-progress";
export * from "./errors";
export { PrometheusSupervisorMetrics } from "./prometheus-metrics";
export {
  commandRunnable,
  CommandStartError,
  ProcessExitedError,
  type CommandOptions,
} from "./command-runnable";
export { grpcServerRunnable, GrpcBindError, type GrpcServerOptions } from "./grpc-server-runnable";
export {
  machineRunnable,
  type MachineRunnableOptions,
  type SupervisedInput,
} from "./machine-runnable";
