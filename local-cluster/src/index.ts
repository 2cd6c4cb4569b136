/**
 * @metropolis/local-cluster — a cluster of real `metropolis-node` processes
 * on loopback addresses, brought up (or resumed from disk) with one command
 * (`main.ts`), and the building blocks the e2e tests use:
 *
 *   LocalCluster ──metroctl (in-process)──▶ curator leader
 *        └─ NodeProcess × N ──spawn──▶ metropolis-node ──▶ etcd, workloads
 */
export {
  defaultAddress,
  LocalCluster,
  LocalClusterError,
  localNodeConfig,
  MetroctlFailedError,
  NodeIdentityError,
  StateFileError,
  StepTimeoutError,
  type ClusterNode,
  type LocalClusterOptions,
  type MetroctlResult,
  type NodeConfigFile,
  type StepTiming,
} from "./cluster-launcher";
export {
  defaultBufferLines,
  defaultStopTimeoutMs,
  describeExit,
  LogWaitTimeoutError,
  NodeBinaryMissingError,
  NodeExitedError,
  nodeBinaryPath,
  NodeProcess,
  NodeProcessError,
  parseNodeLine,
  processGroupMembers,
  type NodeExit,
  type NodeLine,
  type NodeProcessOptions,
} from "./node-process";
export { formatNodeLine } from "./log-format";
export { orphanStopTimeoutMs, StateDirBusyError, StateDirLock } from "./state-dir-lock";
