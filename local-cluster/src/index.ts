/**
 * @metropolis/local-cluster — a cluster of real `metropolis-node` processes
 * on loopback addresses, brought up (or resumed from disk) with one command
 * (`main.ts`), and the building blocks the e2e tests use:
 *
 *   LocalCluster ──metroctl (in-process)──▶ curator leader
 *        └─ NodeProcess × N ──spawn──▶ metropolis-node ──▶ etcd, workloads
 *
 * In hosts mode each node runs in a network namespace of its own on a
 * bridge (Testbed), and Network breaks the network between them.
 */
export {
  defaultAddress,
  LocalCluster,
  localNodeConfig,
  type ClusterNode,
  type LocalClusterOptions,
  type MetroctlResult,
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
export {
  LocalClusterError,
  MetroctlFailedError,
  NodeIdentityError,
  StateFileError,
  StepTimeoutError,
} from "./errors";
export {
  readClusterState,
  writeClusterState,
  type ClusterStateFile,
  type RecordedNode,
} from "./cluster-state-file";
export { formatNodeLine } from "./log-format";
export type { NodeConfigFile } from "@metropolis/node";
export { orphanStopTimeoutMs, StateDirBusyError, StateDirLock } from "./state-dir-lock";
export {
  ClusterView,
  curatorPort,
  debugPort,
  ownerTowardsNode,
  type EtcdMemberView,
} from "./cluster-view";
export { randomLoopbackNet } from "./loopback-net";
export {
  Testbed,
  TestbedBusyError,
  TestbedError,
  TestbedUnavailableError,
  type TestbedOptions,
} from "./testbed";
export type { TestbedAvailability } from "./testbed-availability";
export {
  describeFault,
  faultChain,
  Network,
  NetworkFaultError,
  type FaultRecord,
  type NetworkFault,
} from "./network";
export { HostCommandError, type CommandOutput } from "./host-command";
