/**
 * @metropolis/cluster — enrolment of this node into a cluster, and the
 * cluster status every other part of the node watches.
 *
 * This package is being built: what exists are the status value (with the
 * per-user consensus clients it hands out), `getHome`, and the reading and
 * validation of node parameters. The enrolment manager (bootstrap, register,
 * join) comes next; see README.md.
 */
export { ClusterStatus, consensusUsers, type ConsensusUser, type NodeCredentials } from "./status";
export { getHome } from "./status-watcher";
export { parseNodeParameters, readNodeParameters, type Enrolment } from "./node-parameters";
export * from "./errors";
