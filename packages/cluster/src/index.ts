/**
 * @metropolis/cluster — enrolment of this node into a cluster, and the
 * cluster status every other part of the node watches.
 *
 * The `ClusterManager` runs once per node start: with a sealed configuration
 * on the ESP it rejoins the node's cluster (join), else it follows the node
 * parameters to bootstrap a new cluster or register into one. It hands the
 * outcome to the roleserver (`provide*Data`) and publishes `ClusterStatus`,
 * which hands out namespaced etcd clients to a fixed set of users while the
 * node runs consensus.
 *
 *   parameters / sealed configuration ──▶ ClusterManager ──▶ status ──▶ node services
 *                                              └──provide*Data──▶ Roleserver
 */
export { ClusterStatus } from "./status";
export {
  ClusterManager,
  defaultWipeAcknowledgementWaitMs,
  type ClusterManagerConfig,
} from "./manager";
export { readSealedConfiguration } from "./sealed-configuration";
export { ClusterError, NodeDeletedError, NodeWipeOrderedError } from "./errors";
export { recoverNode, type RecoverNodeOptions, type RecoveryReport } from "./recover-node";
