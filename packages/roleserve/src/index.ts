/**
 * @metropolis/roleserve — reactive, role-driven service management (seed
 * 004). The roleserver runs on every node: once the cluster manager has
 * enrolled the node, it starts and stops the node's role-dependent services
 * (control plane, workloads) as the cluster assigns roles, and keeps the
 * node's presence in the cluster current (status, heartbeats, directory).
 *
 * Its workers talk only through event values (`RoleserveValues`), so each is
 * a supervised runnable that can be tested alone; launchers follow a role by
 * failing when its flag flips and being restarted by the supervisor.
 */
export { Roleserver, type RoleserverConfig } from "./roleserver";
export { RoleserveValues, type CuratorConnectionValue, type LocalControlPlane } from "./values";
export { roleFetchWorker, type RoleFetchOptions } from "./rolefetch";
export { keepFirstNodeRoles } from "./first-node-roles";
export { statusPushWorker, type StatusPushOptions } from "./statuspush";
export {
  defaultHeartbeatIntervalMs,
  defaultHeartbeatJitter,
  heartbeatRestartBackoff,
  heartbeatWorker,
  type HeartbeatOptions,
} from "./heartbeat";
export {
  credentialsPem,
  loadCredentials,
  nodeCuratorConnection,
  nodeCuratorKeepalive,
  saveCredentials,
  standbySpreadMs,
  type NodeCredentials,
} from "./node-credentials";
export { validateWorkloads, type WorkloadSpec } from "./workloads";
export { ClusterView, StaleViewError } from "./cluster-view";
export { RoleserveError } from "./errors";
