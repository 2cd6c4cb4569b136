/**
 * @metropolis/node — the `metropolis-node` binary (main.ts) and its parts:
 * the node's supervision tree (cluster manager, roleserver, debug service,
 * metrics), its configuration, logging and fatal-error reporting.
 *
 *   main ──▶ supervise(root)
 *              ├─ enrolment  (ClusterManager)
 *              ├─ roleserver (Roleserver)
 *              ├─ debug      (Debug gRPC: logs, tree, conditions; NodeManagement: logs, reboot, power off)
 *              ├─ metrics    (Prometheus over mTLS: /metrics/{core,node,etcd}, /discovery)
 *              └─ plainmetrics (opt-in plain /metrics on 127.0.0.1)
 *
 * `metropolis-node install-service` writes the systemd unit that runs it
 * (install-service.ts, service-unit.ts).
 */
export { nodeServices, nodeVersion, type NodeServices } from "./node-tree";
export {
  loadNodeConfig,
  NodeConfigError,
  usage,
  type NodeConfig,
  type NodeConfigFile,
  type NodePorts,
} from "./node-config";
export { debugServer, defaultDebugPort, nodeStreams, type ConditionSource } from "./debug-service";
export {
  nodeManagementServer,
  rebootExitStatus,
  type NodeManagementOptions,
  type PowerAction,
} from "./node-management";
export {
  metricsRunnable,
  nodeMetricsRegistry,
  hostMetricsRegistry,
  defaultMetricsPort,
} from "./metrics-server";
export {
  discoveryDocument,
  secureMetricsRunnable,
  secureMetricsServer,
  type DiscoveryGroup,
  type SecureMetricsOptions,
} from "./secure-metrics";
export {
  isUnitSafe,
  renderServiceUnit,
  serviceCommandLine,
  serviceFileLimit,
  serviceStopTimeoutSeconds,
  type ServiceUnitOptions,
} from "./service-unit";
export {
  defaultUnitDir,
  defaultUnitName,
  installService,
  InstallServiceError,
  ownCommand,
  parseInstallService,
  type InstallServiceIo,
  type InstallServiceRequest,
} from "./install-service";
export { nodeLogger } from "./node-logger";
export { formatFatal } from "./boxed-error";
export { NodeError } from "./errors";
